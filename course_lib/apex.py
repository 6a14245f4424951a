"""Ape-X DQN (Horgan et al. 2018) on Ray core: many explorers, one prioritized replay, one learner.

    explorers (N actors)                  learner (1 actor, 2 threads)
    env + own copy of Q  --add batches-->  prioritized buffer --sample--> DQNLearner.update
    eps_i-greedy, n-step   of ~50 with     (replay thread)     <--new priorities--+
    initial priorities     priorities                          weights published  |
          ^                                                                        |
          +------ pull every ~400 steps <-- parameter server <---------------------+
                  (only when the version changed)
    evaluator (1 actor): plays the learner's snapshot that the driver took, greedily

Every piece of DQN maths is `course_lib.dqn` (the same functions the single-process baseline
calls), and the distributed machinery is `course_lib.distributed` (shared with parallel SAC);
this module only says what is particular to Ape-X:

- `Explorer`: a worker with a fixed eps_i = eps^(1 + alpha i/(N-1)), an NStepBuffer, and its
  own network to compute the initial priorities |TD error| of the batches it sends.
- `ApexLearnerActor`: a DQNLearner that holds the prioritized buffer, samples it and writes the new
  priorities back.
- `ApexTrainer`: the driver. It holds the *replay ratio*, learner samples per inserted
  transition, near `replay_ratio`: the learner gets updates only as data arrives, and the
  explorers pause while the learner is behind. That throttle is this workbook's choice, not
  the paper's (there, 360 actors produce far more data than the learner replays): on a laptop
  it keeps a run's data per update the same whatever the number of explorers.

Fault tolerance, start-up and the evaluation of exactly the weights that are saved are the
shared driver's (see `course_lib.distributed` and `course_lib.trainer`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

import numpy as np
import ray

from course_lib.algorithms import AlgoSpec
from course_lib.distributed import (
    DistributedConfig,
    DistributedTrainer,
    LearnerActor,
    Slots,
    Worker,
    remote_learner,
)
from course_lib.dqn.learner import (
    DQNSettings,
    DuelingQNet,
    epsilon_for_explorer,
    epsilon_greedy_batch,
    greedy_policy,
    greedy_returns,
    make_learner,
    require_discrete,
    td_errors,
)
from course_lib.replay.nstep import NStepBuffer
from course_lib.replay.uniform import transition_spec


@dataclass
class ApexConfig(DistributedConfig, DQNSettings):
    """Ape-X DQN hyperparameters. Full mode: greedy CartPole-v1 return >= 475 (10 episodes,
    confirmed on 20 more)."""

    QUICK: ClassVar[dict] = {"max_env_steps": 4_000, "max_time_s": 120.0, "target_return": None,
                             "num_workers": 2, "eval_every_s": 2.0, "eval_episodes": 3,
                             "learning_starts": 500}
    LIMITS: ClassVar[dict[str, str]] = {"eps": "[0, 1]", "eps_alpha": ">= 0"}
    num_workers: int = 4              # explorer actors (cheap: they wait while the learner works)
    num_envs: int = 4                 # envs each explorer steps as one batch (one forward pass)
    send_every: int = 200             # transitions per add: each add is a Ray call the learner's
                                      # process serves beside its updates (bench/learner_feed.py)
    publish_every: int = 100          # learner updates between weight publications (explorers
                                      # pull every `pull_every` steps: more is never read)
    eps: float = 0.4                  # eps_i = eps^(1 + eps_alpha * i / (N-1))
    eps_alpha: float = 7.0            # how fast eps_i falls from explorer 0 to N-1
    max_env_steps: int | None = 150_000  # stop: env step budget; above DQN's 100K because
                                      # Ape-X's env steps to 475 spread wider over seeds (its
                                      # explorers' high eps): bench/apex's seeds took up to ~107K


@dataclass(frozen=True)
class ApexSlots(Slots):
    """Ape-X's slots (`distributed.config.Slots`) and two of its own; None: course_lib's.

    | slot        | called in        | as                               | gives                  |
    | ----------- | ---------------- | -------------------------------- | ---------------------- |
    | `epsilons`  | the driver, once | `epsilons(n, eps, alpha)`        | each explorer's eps_i  |
    | `draw`      | the learner, once| `draw()`                         | the prioritized        |
    |             |                  |                                  | replay's draw function |
    """

    epsilons: Callable | None = None
    draw: Callable | None = None


@ray.remote
class Explorer(Worker):
    """A worker that plays eps_i-greedy, stores n-step transitions, and sends each batch with
    initial priorities |TD error| from its own copy of the network."""

    def __init__(self, index: int, cfg: ApexConfig, prefix: str, seed: int, slots: ApexSlots,
                 epsilon: float):
        self.epsilon = epsilon
        self.nsteps = [NStepBuffer(cfg.n_step, cfg.gamma) for _ in range(cfg.num_envs)]
        super().__init__(index, cfg, prefix, seed, slots)

    def make_net(self, obs_dim: int, n_actions: int) -> DuelingQNet:
        self.n_actions = n_actions
        return DuelingQNet(obs_dim, n_actions, tuple(self.cfg.hidden))

    def act(self, obs: np.ndarray) -> np.ndarray:
        return epsilon_greedy_batch(self.net, obs, self.epsilon, self.rng, self.n_actions)

    def transitions(self, env, obs, action, reward, next_obs, terminated, truncated) -> list[dict]:
        return self.nsteps[env].add(obs, action, reward, next_obs, terminated, truncated)

    def priorities(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        return td_errors(batch, self.net)


@remote_learner
class ApexLearnerActor(LearnerActor):
    """A DQNLearner on prioritized batches from the buffer it holds; the new priorities of
    each draw's batches are written back together after their updates (a local call: the
    buffer is in this process)."""

    def make_learner(self, cfg: ApexConfig, obs_dim: int, n_actions: int, slots, device):
        return make_learner(cfg, obs_dim, n_actions, device)

    def replay_draw(self, slots: ApexSlots):
        return slots.draw() if slots.draw is not None else None

    def sample_args(self) -> tuple:
        return (*super().sample_args(), self.cfg.priority_beta)

    def after_updates(self, batches: list[dict[str, np.ndarray]],
                      infos: list[dict[str, Any]]) -> None:
        indices = np.concatenate([batch["indices"] for batch in batches])
        priorities = np.concatenate([info["priorities"] for info in infos])
        with self.lock:                       # an id drawn twice: its last update's priority
            self.replay.update_priorities(indices, priorities)


class ApexTrainer(DistributedTrainer):
    """The Ape-X driver (`distributed.DistributedTrainer`) with explorers, a prioritized
    replay and a DQN learner. `epsilons`: each explorer's eps_i."""

    algo, config_class = "apex", ApexConfig
    Worker, Learner, Slots = Explorer, ApexLearnerActor, ApexSlots
    worker_name = "explorer"
    learner_metrics = ("loss", "q_mean")

    @functools.cached_property
    def epsilons(self) -> list[float]:
        cfg = self.cfg
        if self.slots.epsilons is not None:
            return list(self.slots.epsilons(cfg.num_workers, cfg.eps, cfg.eps_alpha))
        return [epsilon_for_explorer(i, cfg.num_workers, cfg.eps, cfg.eps_alpha)
                for i in range(cfg.num_workers)]

    @property
    def updates_per_transition(self) -> float:
        return self.cfg.replay_ratio / self.cfg.batch_size

    @classmethod
    def check_env(cls, env) -> None:
        require_discrete(env, "Ape-X")

    def transition_spec(self) -> dict:
        return transition_spec((self.dims[0],), n_step=True)

    def replay_options(self) -> dict[str, Any]:
        return {"alpha": self.cfg.priority_alpha}

    def worker_options(self, index: int) -> dict[str, Any]:
        return {"epsilon": self.epsilons[index]}

    def evaluation_functions(self) -> tuple:
        return (partial(DuelingQNet, *self.dims, tuple(self.cfg.hidden)),
                partial(greedy_returns, env_id=self.cfg.env_id))

    def row_extras(self) -> dict[str, float]:
        return {"replay_ratio": self.ratio_held() * self.cfg.batch_size}   # samples / transition

    def extras(self) -> dict[str, Any]:
        return {**super().extras(), "epsilons": self.epsilons}


#: what `python -m course_lib train --algo apex` runs (see `course_lib.algorithms`)
SPEC = AlgoSpec(ApexTrainer, greedy_policy)
