"""DQN with the pieces of Ape-X's learner: dueling net, n-step double-Q targets, prioritized replay.

Every piece is a plain function or a small class that a test or a notebook can call on its own,
and the distributed version (`course_lib.apex`) calls exactly the same ones:

1. the network: `DuelingQNet`, Q(s, a) = V(s) + A(s, a) - mean_a' A(s, a');
2. acting: `epsilon_greedy`, with `epsilon_for_explorer` (Ape-X's fixed eps per explorer) or
   `linear_epsilon` (the single-process baseline's decaying eps);
3. the target: `n_step_double_q_target`, the Bellman backup over n steps, double-Q style;
4. the loss: `dqn_loss`, importance-weighted Huber; its |TD errors| are the new priorities;
5. one update: `DQNLearner.update` (gradient clipping, hard target-network copy every N updates);
6. scoring: `greedy_returns`, the greedy policy over several episodes run side by side.

`DQNTrainer` is the single-process baseline: one env, one prioritized buffer, the same learner.

The update rule, for a batch of n-step transitions (s, a, R, s', discount = gamma^k, terminated)
sampled with probability P(i) and importance weights w_i:

    a*   = argmax_a Q_online(s', a)                                (the online net chooses ...)
    y    = R + discount * (1 - terminated) * Q_target(s', a*)      (... the target net scores)
    delta = y - Q_online(s, a)
    L    = mean_i  w_i * huber(delta_i)           new priority p_i = |delta_i|

Two modules: `learner` holds the pieces Ape-X shares (1-6 above and `DQNSettings`, the config
fields they read); `trainer` is the single-process baseline (`DQNConfig`, `DQNTrainer`,
whose `DQNTrainer.train(cfg)` trains). Every name below is importable from `course_lib.dqn` itself.
"""

from course_lib.dqn.learner import (
    DQNLearner as DQNLearner,
    DQNSettings as DQNSettings,
    DuelingQNet as DuelingQNet,
    dqn_loss as dqn_loss,
    epsilon_for_explorer as epsilon_for_explorer,
    epsilon_greedy as epsilon_greedy,
    greedy_policy as greedy_policy,
    greedy_returns as greedy_returns,
    linear_epsilon as linear_epsilon,
    make_learner as make_learner,
    make_q_net as make_q_net,
    n_step_double_q_target as n_step_double_q_target,
    require_discrete as require_discrete,
    td_errors as td_errors,
)
from course_lib.dqn.trainer import (
    SPEC as SPEC,
    DQNConfig as DQNConfig,
    DQNTrainer as DQNTrainer,
)
