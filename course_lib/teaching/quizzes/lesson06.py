"""Notebook 06 (parallel SAC): what a worker pulls, the soft target by hand, the tanh
correction, and who sets the pace on two cores."""

from course_lib.teaching.quiz import Question, right, wrong

QUESTIONS = (
    Question(
        "Which weights does a SAC rollout worker pull from the parameter server?",
        [right("Only the actor's (the policy)",
               "A worker only acts, by sampling from the policy; the critics, their targets and "
               "the temperature stay with the learner."),
         wrong("The actor's and both critics'",
               "That is DQN, whose actions are an argmax over Q. SAC's actions are sampled from "
               "the policy; Q is needed only to train."),
         wrong("The actor's and the temperature alpha",
               "Alpha weighs the entropy term in the losses. The worker's randomness is the "
               "policy's own Gaussian, whose width the policy learned.")],
    ),
    Question(
        "Compute a soft target y: r = -2, gamma = 0.9, not terminated, the target critics give "
        "Q1' = -30 and Q2' = -20 at (s', a'), alpha = 0.5 and log pi(a'|s') = -2.",
        [wrong("-19.1",
               "That takes the larger critic. SAC takes min(Q1', Q2') = -30, the pessimistic "
               "estimate that curbs overestimation."),
         wrong("-29.0",
               "That leaves out the entropy bonus, -alpha * log pi = +1, inside the "
               "bracket."),
         right("-28.1",
               "y = r + gamma * (min(Q1', Q2') - alpha * log pi) = -2 + 0.9 * (-30 + 1)."),
         wrong("-29.9",
               "That adds alpha * log pi instead of subtracting it: the bonus for a likely "
               "action's low entropy has the wrong sign.")],
        applies=True,
    ),
    Question(
        "Why is log(1 - tanh(u)^2) subtracted from the Gaussian's log-probability?",
        [wrong("To keep log pi finite at the bounds",
               "It is the other way round: that term itself goes to minus infinity near ±1, "
               "which is why the code computes it with a stable identity."),
         right("Squashing a = tanh(u) changes the density",
               "Change of variables: tanh compresses the Gaussian near the bounds, and the "
               "log of its derivative corrects the density of a."),
         wrong("It is the entropy bonus that keeps the policy exploring",
               "The entropy bonus is -alpha * log pi in the losses; this term is part of log "
               "pi itself, before any bonus.")],
    ),
    Question(
        "On two cores the SAC learner makes about 230 updates per second at `utd_ratio=1`, and "
        "one rollout worker alone could step Pendulum 3,000 times per second. Once learning has "
        "started, two workers give the run about...",
        [right("At most about 230 env steps/s",
               "At one update per env step the driver lets the workers run only as fast as the "
               "learner trains: the learner sets the pace."),
         wrong("About 6,000 env steps/s",
               "The driver holds updates per env step at 1, so the workers wait for the "
               "learner; their own speed does not matter."),
         wrong("About 3,000 env steps/s",
               "Not even one worker's rate: the learner's 230 updates per second cap the env "
               "steps at 230.")],
        applies=True,
    ),
)
