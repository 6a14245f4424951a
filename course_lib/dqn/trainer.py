"""Single-process DQN, the baseline for Ape-X: one env, one prioritized buffer, one
`DQNLearner` (`course_lib.dqn.learner`), in this process."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from course_lib.dqn.learner import (
    DQNSettings,
    epsilon_greedy,
    evaluate_greedy,
    greedy_policy,
    linear_epsilon,
    make_learner,
    require_discrete,
)
from course_lib.envs import env_dims, make_env
from course_lib.replay.nstep import NStepBuffer, stack_transitions
from course_lib.replay.prioritized import PrioritizedReplayBuffer
from course_lib.replay.uniform import transition_spec
from course_lib.results import Algorithm
from course_lib.trainer import Trainer, mean_or_nan, train_with


@dataclass
class DQNConfig(DQNSettings):
    """Single-process DQN (dueling, double, n-step, prioritized): the baseline for Ape-X."""

    QUICK: ClassVar[dict] = {"max_env_steps": 3_000, "target_return": None,
                             "learning_starts": 500, "steps_per_iteration": 500,
                             "eval_episodes": 3}
    eps_start: float = 1.0            # exploration epsilon at the first step ...
    eps_end: float = 0.02             # ... decays linearly to this ...
    eps_decay_steps: int = 10_000     # ... over this many env steps
    steps_per_iteration: int = 1_000  # env steps per iteration (one progress row, one eval)


# ---------------------------------------------------------------------------------------------
# Single-process DQN: the baseline
# ---------------------------------------------------------------------------------------------

class DQNTrainer(Trainer):
    """One env, one prioritized buffer, one DQNLearner, in this process.

    `step()` runs one iteration (`steps_per_iteration` env steps, with the learner updates
    that fall due interleaved; fewer when the wall-clock budget runs out), then evaluates a
    snapshot of the learner (`trainer.Trainer`);
    `DQNTrainer(cfg, restore=checkpoint)` continues from one (network, optimiser and
    counters; the replay buffer starts empty and refills).
    """

    algo = "dqn"

    def __init__(self, config: DQNConfig, restore: dict | None = None):
        super().__init__(config, restore)
        cfg = self.cfg
        # Tiny networks: one thread is fastest, and several threads spin-waiting on a busy
        # laptop (Ray workers, Jupyter) made this loop several times slower.
        torch.set_num_threads(1)
        torch.manual_seed(self.seed("learner"))
        self.rng = np.random.default_rng(self.seed("explore"))
        self.env = make_env(cfg.env_id)
        require_discrete(self.env)
        self.obs_dim, self.n_actions = env_dims(self.env)
        spec = transition_spec((self.obs_dim,), n_step=True)
        self.buffer = PrioritizedReplayBuffer(cfg.buffer_size, spec, alpha=cfg.priority_alpha,
                                              seed=self.seed("replay"))
        self.nstep = NStepBuffer(cfg.n_step, cfg.gamma)
        self.learner = make_learner(cfg, self.obs_dim, self.n_actions)
        if restore is not None:
            self.learner.load_state_dict(restore["learner"])
        self.obs, _ = self.env.reset(seed=self.seed("env"))
        self.episode_return = 0.0

    @property
    def updates_per_transition(self) -> float:
        return self.cfg.replay_ratio / self.cfg.batch_size

    def step(self) -> dict[str, Any]:
        cfg, c, learner = self.cfg, self.counters, self.learner
        t0, steps0, updates0 = time.perf_counter(), c["env_steps"], learner.updates
        returns, losses = [], []
        deadline = math.inf if cfg.max_time_s is None else self.start + cfg.max_time_s
        for _ in range(cfg.steps_per_iteration):
            # -- act and store the n-step transitions that are complete --------------------
            eps = linear_epsilon(c["env_steps"], cfg.eps_start, cfg.eps_end, cfg.eps_decay_steps)
            action = epsilon_greedy(learner.online, self.obs, eps, self.rng, self.n_actions)
            next_obs, reward, terminated, truncated, _ = self.env.step(action)
            done = self.nstep.add(self.obs, action, reward, next_obs, terminated, truncated)
            if done:
                self.buffer.add(stack_transitions(done))  # new transitions get the max priority
                c["inserted"] += len(done)
            c["env_steps"] += 1
            self.episode_return += reward
            self.obs = next_obs                         # carry the next observation over
            if terminated or truncated:
                returns.append(self.episode_return)
                c["episodes"] += 1
                self.obs, _ = self.env.reset()
                self.episode_return = 0.0
            # -- learn: the updates that are due (none before learning_starts) ------------
            while learner.updates < self.updates_due():
                batch = self.buffer.sample(cfg.batch_size, beta=cfg.priority_beta)
                info = learner.update(batch)
                self.buffer.update_priorities(batch["indices"], info["priorities"])
                losses.append(info["loss"])
            if time.perf_counter() >= deadline:   # the clock ran out: evaluate what we have
                break
        c["learner_updates"] = learner.updates
        elapsed = time.perf_counter() - t0
        # -- evaluate exactly the weights a checkpoint of this iteration would hold ----------
        snapshot = self.snapshot(learner.state_dict(), learner.get_weights(), learner.updates)
        while (request := self.next_evaluation(snapshot)) is not None:
            episodes, seed = request
            snapshot.returns += evaluate_greedy(learner.online, cfg.env_id, episodes,
                                                seed).tolist()
        return self.row(snapshot, elapsed, steps0, updates0, returns,
                        loss=mean_or_nan(losses), epsilon=eps, replay_size=len(self.buffer))

    def close(self) -> None:
        self.env.close()


def train_dqn(config: DQNConfig, progress=None, run=None, restore: dict | str | None = None):
    """Train single-process DQN until a stop criterion of `config` holds; a TrainResult
    (see `trainer.train_with` for progress, run and restore)."""
    return train_with(DQNTrainer, config, progress=progress, run=run, restore=restore)


#: what `python -m course_lib train --algo dqn` runs (see `course_lib.cli`)
ALGORITHM = Algorithm(DQNConfig, train_dqn, greedy_policy, require_discrete)
