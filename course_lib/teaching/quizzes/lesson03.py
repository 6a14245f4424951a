"""Notebook 03 (parameter server): pull by version, references to weights, staleness, and when
asynchronous SGD pays."""

from course_lib.teaching.quiz import Question, right, wrong

QUESTIONS = (
    Question(
        "A worker holding version 7 calls `ps.pull.remote(\"policy\", 7)`; meanwhile the server "
        "has reached version 9. What comes back?",
        [wrong("`(8, ref)` to version 8's weights",
               "The server keeps only the newest weights of each name; a worker that is behind "
               "jumps straight to the newest."),
         wrong("The differences between versions 7 and 9",
               "The server stores and sends full weights, not deltas, so a pull never depends on "
               "what the worker missed."),
         wrong("`(9, None)`",
               "`None` comes back only when the caller already has the newest version: that is "
               "what makes polling cheap."),
         right("`(9, ref)` to version 9's weights",
               "The caller is behind, so it gets the newest version and a reference to its "
               "weights, in one call.")],
        applies=True,
    ),
    Question(
        "Why does the parameter server actor return an `ObjectRef` of the weights rather than "
        "the arrays themselves?",
        [wrong("An actor method cannot return numpy arrays",
               "It can return any value Ray can serialise; it would then serialise the weights "
               "once per caller."),
         right("Every reader of a version then shares one object-store copy",
               "The actor puts each version once; every caller reads that copy instead of "
               "getting its own serialised one."),
         wrong("So that workers can write to the weights and the server sees the change",
               "Objects in the store are immutable; a change reaches the server only through "
               "`push` or `push_gradients`, as a new version.")],
    ),
    Question(
        "Asynchronous SGD with three workers: A pulls version 10 and starts a gradient; while it "
        "computes, B's and C's gradients are applied (versions 11 and 12). Then A's gradient is "
        "applied, making version 13. What is its staleness, as `async_sgd` counts it?",
        [right("2",
               "Two updates by other workers landed after the weights A computed on: "
               "13 - 1 - 10 = 2."),
         wrong("3",
               "The step from 12 to 13 is A's own update. Staleness counts the updates other "
               "workers made while A was computing."),
         wrong("0, because the server applies it to its newest weights",
               "It is applied to the newest weights but was computed on older ones: staleness "
               "measures exactly that gap.")],
        applies=True,
    ),
    Question(
        "When does asynchronous (parameter-server) SGD finish before synchronous SGD, for the "
        "same number of gradients?",
        [wrong("Always: it never waits for anyone",
               "Every update is a round trip through the server actor; with cheap gradients, as "
               "in notebook 03, those round trips cost more than the waiting they save."),
         wrong("When gradients are cheap and there are many of them",
               "Then the fixed cost of each round trip dominates, and the synchronous run, with "
               "one broadcast per round, can finish first."),
         right("When gradients are slow and take uneven times on different workers",
               "Then waiting for the slowest worker costs the most, and one round trip is small "
               "next to one gradient.")],
    ),
)
