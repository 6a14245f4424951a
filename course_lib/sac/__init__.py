"""Soft actor-critic (Haarnoja et al. 2018), split across Ray actors the way practitioners run it.

    rollout workers (N actors)           learner (1 actor, GPU if any)
    env + own copy of the policy --add--> uniform buffer --sample--> SACLearner.update
    random actions first, then   batches  (its replay thread)        twin Q, Polyak targets,
    a ~ pi(.|s)                  of ~50                              automatic entropy tuning
          ^                                                            |
          +-- pull at episode end and every K steps <-- parameter server <-- push every N
                                 evaluator (1 actor): deterministic episodes of a snapshot

The maths, one small function each (tests and notebook 06 call exactly these):

    a = tanh(u),  u = mu(s) + sigma(s) * eps,  eps ~ N(0, I)          `squashed_gaussian`
    log pi(a|s) = log N(u; mu, sigma) - sum_i log(1 - tanh(u_i)^2)      `squashed_log_prob`
    y  = r + gamma * (1 - terminated) * (min_j Q'_j(s', a') - alpha * log pi(a'|s')),
         a' ~ pi(.|s')                                                 `q_target`
    L_Q  = mean (Q_1(s, a) - y)^2 + mean (Q_2(s, a) - y)^2             `critic_loss`
    L_pi = mean (alpha * log pi(a~|s) - min_j Q_j(s, a~)),  a~ ~ pi(.|s)   `actor_loss`
    L_alpha = -mean log(alpha) * (log pi(a~|s) + H_target),  H_target = -dim(A)  `alpha_loss`
    theta'  <- (1 - tau) * theta' + tau * theta                        `polyak_update`

A time-limit end (`truncated`) is NOT a terminal state: the target still bootstraps from s'.

The roles, each a Ray actor, fill in the shared bases of `course_lib.distributed`: `RolloutWorker`
and `SACLearnerActor` (wraps `SACLearner`, a plain class that tests use without Ray, and holds the
uniform replay buffer); the evaluator and the parameter server are the shared ones. `SACTrainer` is
the driver (`course_lib.distributed`): it hands out chunks of work and holds the
update-to-data ratio (learner updates per env step) at `utd_ratio`.

Two modules: `learner` is the maths and one update without Ray (the squashed Gaussian actor,
the twin critics, the losses, `SACLearner`); `parallel` is the config, the Ray actors and the
driver (`SACConfig`, `RolloutWorker`, `SACLearnerActor`, `SACTrainer`; `SACTrainer.train(cfg)`
trains). Every name below is importable from `course_lib.sac` itself.
"""

from course_lib.sac.learner import (
    LOG_STD_MAX as LOG_STD_MAX,
    LOG_STD_MIN as LOG_STD_MIN,
    SACLearner as SACLearner,
    SACMaths as SACMaths,
    SquashedGaussianActor as SquashedGaussianActor,
    TwinQ as TwinQ,
    actor_loss as actor_loss,
    actor_step as actor_step,
    alpha_loss as alpha_loss,
    critic_loss as critic_loss,
    make_learner as make_learner,
    polyak_update as polyak_update,
    q_target as q_target,
    scale_action as scale_action,
    squashed_gaussian as squashed_gaussian,
    squashed_log_prob as squashed_log_prob,
)
from course_lib.sac.parallel import (
    SPEC as SPEC,
    RolloutWorker as RolloutWorker,
    SACConfig as SACConfig,
    SACLearnerActor as SACLearnerActor,
    SACSlots as SACSlots,
    SACTrainer as SACTrainer,
    deterministic_policy as deterministic_policy,
    deterministic_returns as deterministic_returns,
    require_continuous as require_continuous,
)
