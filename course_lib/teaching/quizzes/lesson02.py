"""Notebook 02 (parallel rollouts): sync against async collection, reward-to-go, ray.put of the
weights, what asynchrony costs."""

from course_lib.teaching.quiz import Question, right, wrong

QUESTIONS = (
    Question(
        "Three workers take 1 s, 1 s and 3 s per batch. In 6 s, how many batches does the driver "
        "get with synchronous rounds (wait for all three, then start the next round), and how "
        "many with asynchronous collection (`ray.wait`, and a ready worker gets its next request "
        "at once)?",
        [wrong("Sync 6, async 6: the slow worker limits both",
               "Asynchronous collection does not wait for the slow worker: the two fast ones "
               "keep going while it works."),
         right("Sync 6, async 14",
               "Sync: a round lasts as long as its slowest batch (3 s), so 2 rounds of 3 batches. "
               "Async: 6 + 6 from the fast workers, 2 from the slow one."),
         wrong("Sync 2, async 14",
               "2 is the number of rounds; each round brings one batch from each of the three "
               "workers."),
         wrong("Sync 6, async 18",
               "Asynchrony does not speed the slow worker up: in 6 s it still delivers 2 "
               "batches, not 6.")],
        applies=True,
    ),
    Question(
        "One episode gets rewards 1, 1, 1 and ends after the third step; gamma is 0.5. What is "
        "the reward-to-go G_0 of its first step?",
        [right("1.75",
               "G_0 = 1 + 0.5 * 1 + 0.25 * 1: each later reward is discounted once more."),
         wrong("3.0",
               "That is the undiscounted sum; with gamma = 0.5 a reward k steps later counts "
               "0.5^k."),
         wrong("1.0",
               "That is G_2, the reward-to-go of the last step (or r_0 alone). G_0 sums the "
               "discounted rewards from step 0 to the end of the episode.")],
        applies=True,
    ),
    Question(
        "Each iteration the driver calls `ray.put(weights)` once and passes the reference to its "
        "4 workers, instead of passing the weights to each `.remote()` call. What does that "
        "save?",
        [wrong("Nothing on one machine: the processes share memory anyway",
               "Processes do not share Python objects. Each `.remote(weights)` would serialise "
               "the weights and store another copy."),
         wrong("It lets the workers update one shared copy in place",
               "Objects in the store are immutable: workers read them, and the driver publishes "
               "new weights with a new `ray.put`."),
         right("Three of the four serialisations and copies of the weights",
               "One `ray.put`, one copy in the object store, four readers of the same "
               "`ObjectRef`.")],
    ),
    Question(
        "What does asynchronous collection give up in exchange for not waiting for the slowest "
        "worker?",
        [wrong("Some data: a batch that arrives late is dropped",
               "No batch is dropped: a late batch is used when it arrives, with whatever weights "
               "it was sampled with."),
         right("Freshness: some batches come from weights an update or two old",
               "While one worker samples, the driver updates with other workers' batches, so "
               "its batch is slightly off-policy when it arrives."),
         wrong("Data efficiency: it needs about twice the env steps to reach the goal",
               "Notebook 02's curves show the two learning at a similar pace per env step; the "
               "difference is in the updates (one per batch) and in wall-clock time.")],
    ),
)
