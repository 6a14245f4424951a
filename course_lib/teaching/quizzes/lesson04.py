"""Notebook 04 (replay): a sum-tree descent, n-step targets, time limits, importance weights,
and what batching the adds buys."""

from course_lib.teaching.quiz import Question, right, wrong

QUESTIONS = (
    Question(
        "A sum tree holds the priorities 3, 1, 4, 2 in leaves 0 to 3 (so the root is 10, its "
        "children 4 and 6). Which leaf does the target u = 5.5 select?",
        [wrong("Leaf 3",
               "That is what you get if you forget to subtract: after going right, u becomes "
               "5.5 - 4 = 1.5 before the next comparison."),
         wrong("Leaf 1",
               "Leaf 1 covers the prefix sums [3, 4); 5.5 is past it. Go right at the root, "
               "since 5.5 >= 4."),
         right("Leaf 2",
               "5.5 >= 4 (the left sum): go right, u = 1.5. Then 1.5 < 4: go left, to leaf 2, "
               "whose range of prefix sums is [4, 8).")],
        applies=True,
    ),
    Question(
        "A 3-step transition: rewards 1, 1, 1, gamma = 0.9, no episode end, and the target "
        "network values the state 3 steps later at 10. What is its target?",
        [right("10.0",
               "1 + 0.9 + 0.81 = 2.71 for the rewards, plus 0.9^3 * 10 = 7.29 for the "
               "bootstrap."),
         wrong("12.71",
               "The bootstrap value is 3 steps away, so it is discounted too, by 0.9^3."),
         wrong("11.71",
               "That discounts the bootstrap by 0.9 once, as a 1-step target would; here it is "
               "3 steps away: 0.9^3."),
         wrong("2.71",
               "That stops at the last reward, which is right only if the episode truly ended "
               "(terminated) there.")],
        applies=True,
    ),
    Question(
        "CartPole's 500-step time limit cuts an episode (truncated, not terminated) one step "
        "after a 3-step window opened, so it holds 2 rewards. What does `NStepBuffer` store?",
        [wrong("The 2 rewards, marked terminated: the episode is over",
               "A time limit is not a true end: the state still has a future. Storing it as "
               "terminal teaches the agent that time running out is a disaster."),
         right("The 2 rewards with discount gamma^2, bootstrapping from the last state",
               "At an episode end the pending steps are flushed with the k that is left; a "
               "truncated one keeps `terminated=False`, so the target adds gamma^2 * Q."),
         wrong("Nothing: a transition needs all 3 rewards",
               "Dropping them would lose the last steps of every episode; the flush stores them "
               "with fewer rewards and the matching discount.")],
    ),
    Question(
        "In a sampled batch the smallest priority q (already raised to alpha) is 1. A transition "
        "in it has q = 4, and beta = 0.5. Its importance weight is...",
        [wrong("2.0",
               "The weight must be below 1 for a transition sampled more often than the others: "
               "it undoes the extra sampling. (q / q_min)^-beta, with the minus."),
         wrong("0.25",
               "That is the full correction, beta = 1. With beta = 0.5 it is partial: "
               "4^-0.5."),
         right("0.5",
               "(q / q_min)^-beta = 4^-0.5 = 0.5: sampled four times as often, it counts half as "
               "much in the loss.")],
        applies=True,
    ),
    Question(
        "One `add` call to the replay actor costs about 1 ms whatever it carries, and storing a "
        "transition about 10 µs. About how many transitions per second can one explorer send "
        "in batches of 50?",
        [wrong("About 1,000",
               "The call costs the same, but it now carries 50 transitions: 50 per 1.5 ms."),
         right("About 33,000",
               "One call: 1 ms + 50 * 10 µs = 1.5 ms for 50 transitions."),
         wrong("About 50,000",
               "Storing is not free: the 50 * 10 µs = 0.5 ms per batch grows with the batch, "
               "so the gain is less than 50x."),
         wrong("About 100,000",
               "That ignores the 1 ms per call, which is still the larger part of each batch's "
               "1.5 ms.")],
        applies=True,
    ),
)
