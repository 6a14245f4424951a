"""Notebook 05 (Ape-X): initial priorities, the replay ratio at work, explorer epsilons,
throughput on two cores, restarts."""

from course_lib.teaching.quiz import Question, right, wrong

QUESTIONS = (
    Question(
        "In this Ape-X, who computes the priority a new transition gets when it enters the "
        "replay?",
        [wrong("The learner, the first time it samples the transition",
               "It could only sample it by some priority first. Ape-X avoids that wait: the "
               "priority is known when the transition arrives."),
         wrong("The replay buffer, which gives it the largest priority seen so far",
               "That is single-process prioritized replay's rule. With many explorers, each "
               "can afford to compute a real TD error, so a new transition is not over-sampled."),
         right("The explorer, from the TD errors of its own copy of the network",
               "Explorers compute the priorities before they send a batch, so a new transition is "
               "sampled about as often as it deserves before the learner has seen it.")],
    ),
    Question(
        "`replay_ratio=16`, `batch_size=64`, `learning_starts=1_000`, and the explorers have "
        "inserted 6,000 transitions. How many learner updates does the driver allow by now?",
        [wrong("1,500",
               "That forgets `learning_starts`: the first 1,000 transitions only fill the "
               "buffer and are owed nothing."),
         right("1,250",
               "16 / 64 = 0.25 updates per transition past the first 1,000: 0.25 * 5,000."),
         wrong("80,000",
               "That counts sampled transitions (16 per inserted one), not updates: each update "
               "samples a batch of 64."),
         wrong("312",
               "That divides by the ratio. The ratio is samples per inserted transition: a "
               "higher ratio buys more updates from the same data, not fewer.")],
        applies=True,
    ),
    Question(
        "Explorer i of N explores with eps_i = 0.4^(1 + 7 i / (N - 1)). With N = 2 explorers, "
        "their epsilons are...",
        [right("0.4 and about 0.0007",
               "i = 0: 0.4^1. i = 1: 0.4^8 = 0.00066, nearly greedy. One explores, one "
               "exploits."),
         wrong("0.4 and 0.2",
               "The exponent, not epsilon, is spread evenly, from 1 to 8: the second explorer "
               "gets 0.4^8."),
         wrong("Both 0.4: the formula needs more explorers to spread",
               "Any N >= 2 spans the whole range, from 0.4^1 to 0.4^8; with only two, the "
               "explorers are the two ends of it.")],
        applies=True,
    ),
    Question(
        "On a 2-core laptop, Ape-X with 2 explorers makes about 400 learner updates per second. "
        "With 4 explorers and the same replay ratio, expect...",
        [wrong("About 800 updates/s",
               "The data would pay for them, but the learner cannot compute them faster: it "
               "already uses about one core, and the explorers wait for it."),
         right("About 400 updates/s, or fewer",
               "The learner sets the pace, and the two extra explorer processes take CPU time "
               "from it on the same two cores."),
         wrong("About 200 updates/s",
               "The replay ratio counts samples per inserted transition, whoever inserted it; "
               "the number of explorers does not enter it.")],
        applies=True,
    ),
    Question(
        "The process of one explorer is killed during a run. What happens?",
        [wrong("The run stops with an error naming the dead actor",
               "Only a worker that keeps dying ends the run. Explorers are created with "
               "`max_restarts`, so Ray restarts one that dies."),
         wrong("Ray restarts it with its state at the moment it died",
               "A restart runs `__init__` again in a new process: what was only in memory "
               "(the outbox, the n-step window, the chunk under way) is lost."),
         right("Ray starts a new process: it runs `__init__` again and pulls the newest weights",
               "Ray sends the call under way again (`max_task_retries=-1`); the new process "
               "plays with a new seed and counts one restart.")],
    ),
)
