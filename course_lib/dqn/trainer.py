"""Single-process DQN, the baseline for Ape-X: one env, one prioritized buffer, one
`DQNLearner` (`course_lib.dqn.learner`), in this process."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from course_lib.algorithms import AlgoSpec
from course_lib.dqn.learner import (
    DQNSettings,
    epsilon_greedy_batch,
    greedy_policy,
    greedy_returns,
    linear_epsilon,
    make_learner,
    require_discrete,
)
from course_lib.envs import EnvBatch, env_dims
from course_lib.replay.nstep import NStepBuffer, stack_transitions
from course_lib.replay.prioritized import PrioritizedReplayBuffer
from course_lib.replay.uniform import transition_spec
from course_lib.trainer import Trainer, mean_or_nan


@dataclass
class DQNConfig(DQNSettings):
    """Single-process DQN (dueling, double, n-step, prioritized): the baseline for Ape-X."""

    QUICK: ClassVar[dict] = {"max_env_steps": 3_000, "target_return": None,
                             "learning_starts": 500, "steps_per_iteration": 500,
                             "eval_episodes": 3}
    LIMITS: ClassVar[dict[str, str]] = {"eps_start": "[0, 1]", "eps_end": "[0, 1]",
                                        "eps_decay_steps": ">= 0", "steps_per_iteration": ">= 1",
                                        "num_envs": ">= 1"}
    eps_start: float = 1.0            # exploration epsilon at the first step ...
    eps_end: float = 0.02             # ... decays linearly to this ...
    eps_decay_steps: int = 10_000     # ... over this many env steps
    steps_per_iteration: int = 1_000  # env steps per iteration (one progress row, one eval)
    num_envs: int = 1                 # envs stepped as one batch (one forward pass for all)


# ---------------------------------------------------------------------------------------------
# Single-process DQN: the baseline
# ---------------------------------------------------------------------------------------------

class DQNTrainer(Trainer):
    """`num_envs` envs stepped as one batch (`envs.EnvBatch`: one forward pass acts in all of
    them, and their `env_latency_ms` waits overlap), one prioritized buffer, one DQNLearner,
    in this process.

    `step()` runs one iteration (`steps_per_iteration` env steps, with the learner updates
    that fall due interleaved; fewer when the wall-clock budget runs out), then evaluates a
    snapshot of the learner (`trainer.Trainer`);
    `DQNTrainer(cfg, restore=checkpoint)` continues from one (network, optimiser and
    counters; the replay buffer starts empty and refills).
    """

    algo, config_class = "dqn", DQNConfig

    def __init__(self, config: DQNConfig, restore: dict | None = None):
        super().__init__(config, restore)
        cfg = self.cfg
        # Tiny networks: one thread is fastest, and several threads spin-waiting on a busy
        # laptop (Ray workers, Jupyter) made this loop several times slower.
        torch.set_num_threads(1)
        torch.manual_seed(self.seed_for("learner"))
        self.rng = np.random.default_rng(self.seed_for("explore"))
        self.envs = EnvBatch(cfg.env_id, cfg.num_envs, cfg.env_latency_ms, self.seed_for("env"))
        self.check_env(self.envs.envs[0])
        self.obs_dim, self.n_actions = env_dims(self.envs.envs[0])
        spec = transition_spec((self.obs_dim,), n_step=True)
        self.buffer = PrioritizedReplayBuffer(cfg.buffer_size, spec, alpha=cfg.priority_alpha,
                                              seed=self.seed_for("replay"))
        self.nsteps = [NStepBuffer(cfg.n_step, cfg.gamma) for _ in range(cfg.num_envs)]
        self.learner = make_learner(cfg, self.obs_dim, self.n_actions)
        if restore is not None:
            self.learner.load_state_dict(restore["learner"])
        self.episode_returns = np.zeros(cfg.num_envs)

    @classmethod
    def check_env(cls, env) -> None:
        require_discrete(env)

    @property
    def updates_per_transition(self) -> float:
        return self.cfg.replay_ratio / self.cfg.batch_size

    def step(self) -> dict[str, Any]:
        cfg, c, learner = self.cfg, self.counters, self.learner
        losses = []
        deadline = math.inf if cfg.max_time_s is None else self.start + cfg.max_time_s
        for _ in range(math.ceil(cfg.steps_per_iteration / cfg.num_envs)):
            # -- act in every env and store the n-step transitions that are complete -------
            eps = linear_epsilon(c.env_steps, cfg.eps_start, cfg.eps_end, cfg.eps_decay_steps)
            obs = self.envs.obs
            actions = epsilon_greedy_batch(learner.online, obs, eps, self.rng, self.n_actions)
            next_obs, rewards, terminated, truncated = self.envs.step(actions)
            self.episode_returns += rewards
            for i, nstep in enumerate(self.nsteps):
                done = nstep.add(obs[i], actions[i], rewards[i], next_obs[i], terminated[i],
                                 truncated[i])
                if done:
                    self.buffer.add(stack_transitions(done))  # stored with the max priority
                    c.inserted += len(done)
                if terminated[i] or truncated[i]:
                    self.book_episodes([float(self.episode_returns[i])])
                    c.episodes += 1
                    self.episode_returns[i] = 0.0
            c.env_steps += cfg.num_envs
            # -- learn: the updates that are due (none before learning_starts) ------------
            while learner.updates < self.updates_due():
                batch = self.buffer.sample(cfg.batch_size, beta=cfg.priority_beta)
                info = learner.update(batch)
                self.buffer.update_priorities(batch["indices"], info["priorities"])
                losses.append(info["loss"])
            if time.perf_counter() >= deadline:   # the clock ran out: evaluate what we have
                break
        c.learner_updates = learner.updates
        # -- evaluate exactly the weights a checkpoint of this iteration would hold ----------
        snapshot = self.snapshot(learner.state_dict(), learner.get_weights(), learner.updates,
                                 loss=mean_or_nan(losses))
        while (request := self.next_evaluation(snapshot)) is not None:
            episodes, seed = request
            snapshot.returns += greedy_returns(learner.online, cfg.env_id, episodes,
                                                seed).tolist()
        return self.row(snapshot, epsilon=eps, replay_size=len(self.buffer))

    def close(self) -> None:
        self.envs.close()


#: what `python -m course_lib train --algo dqn` runs (see `course_lib.cli`)
SPEC = AlgoSpec(DQNTrainer, greedy_policy)
