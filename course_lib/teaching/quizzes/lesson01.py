"""Notebook 01 (Ray core): tasks and their timeline, ray.get placement, actor order, ray.put."""

from course_lib.teaching.quiz import Question, right, wrong

QUESTIONS = (
    Question(
        "Ray has 2 CPUs. You submit 6 tasks of 0.5 s each (1 CPU each) in a list comprehension, "
        "then call `ray.get(refs)` once. About how long does that `ray.get` wait?",
        [wrong("0.5 s",
               "Only as many 1-CPU tasks run at a time as Ray has CPUs: two. The other four wait "
               "in the queue."),
         right("1.5 s",
               "6 tasks / 2 CPUs = 3 rounds of 0.5 s, plus Ray's small fixed cost per task."),
         wrong("3.0 s",
               "That is the `ray.get`-inside-the-loop version, which waits for each task before "
               "it submits the next. Submitted together, they run two at a time.")],
        applies=True,
    ),
    Question(
        "Eight tasks of 1 s each, Ray with 4 CPUs. Which line takes about 8 s?",
        [wrong("`out = ray.get([f.remote(x) for x in xs])`",
               "Every task is submitted before the one `ray.get`: they run four at a time, about "
               "2 s in all."),
         wrong("`refs = [f.remote(x) for x in xs]; out = [ray.get(r) for r in refs]`",
               "It looks like a loop of gets, but every task was submitted before the first get: "
               "the gets only wait for tasks that are already running. About 2 s."),
         right("`out = [ray.get(f.remote(x)) for x in xs]`",
               "Each `ray.get` waits for its task before the next one is even submitted: eight "
               "tasks, one after the other, 8 s.")],
        applies=True,
    ),
    Question(
        "The driver calls `a.add.remote(1)` and then `a.add.remote(2)` on one actor `a`, with no "
        "`ray.get` in between. Which is true?",
        [right("`add(1)` runs first, and the two never overlap",
               "An actor is one process that runs one method call at a time, in the order one "
               "caller submitted them: that is why its state needs no locks."),
         wrong("They may run side by side on two CPUs, since neither waits for the other",
               "That is what two *tasks* would do. Calls to one (ordinary) actor queue up in its "
               "single process."),
         wrong("`add(2)` may run first, on a less busy worker",
               "Both calls go to the same actor process; calls to an actor are not load-balanced "
               "over workers.")],
    ),
    Question(
        "Ten tasks need the same 100 MB array. What is the difference between "
        "`f.remote(array)` ten times and `ref = ray.put(array)` once, then `f.remote(ref)`?",
        [wrong("None: Ray stores the same array only once",
               "Ray does not deduplicate by content: each `.remote(array)` serialises the "
               "argument again and puts another copy into the object store."),
         right("Ten serialised copies against one, shared by all ten tasks",
               "One `ray.put`, one copy in the node's shared memory; every task on the node "
               "reads that copy (numpy arrays without copying)."),
         wrong("The `ray.put` version is slower: each task fetches the array from the driver",
               "The object store is shared memory on the node: tasks map the one copy. Only a "
               "task on another node needs a transfer, once per node.")],
    ),
)
