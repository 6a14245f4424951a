"""Parallel SAC on Ray: the config, the environment check, the rollout-worker and learner
actors, deterministic evaluation, and `SACTrainer`, the driver that holds the update-to-data
ratio. The maths is in `course_lib.sac.learner`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import ray

from course_lib.algorithms import AlgoSpec
from course_lib.distributed import (
    DistributedConfig,
    DistributedTrainer,
    LearnerActor,
    Slots,
    Worker,
    WorkerReport,
    remote_learner,
)
from course_lib.envs import check_finite, env_dims, evaluate_policy, make_env
from course_lib.replay.uniform import transition_spec
from course_lib.sac.learner import (
    SACLearner,
    SACMaths,
    SquashedGaussianActor,
    make_learner,
    scale_action,
)


@dataclass
class SACConfig(DistributedConfig):
    """Parallel SAC hyperparameters. Full mode: deterministic Pendulum-v1 return >= -200
    (mean of 10 episodes, confirmed on 20 more) within 20K env steps.

    Tuned for wall-clock time on a 2-core laptop, where the learner's updates are the
    bottleneck: small 64x64 networks (about 1.5x the updates per second of 128x128), a high
    learning rate and a fast target (tau 0.05) reach the goal in a median of 750 updates on
    Pendulum, against 2,500 with the textbook 128x128, lr 1e-3 and tau 0.005 (6 seeds each,
    single process, one update per env step: `python bench/sac_settings.py`)."""

    # quick: 1,500 env steps, checking the code; 180 s, as start-up alone can take a minute on
    # a busy machine (CI's, with two test streams side by side)
    QUICK: ClassVar[dict] = {"max_env_steps": 1_500, "max_time_s": 180.0, "target_return": None,
                             "hidden": (64, 64), "start_steps": 400, "learning_starts": 400,
                             "eval_every_s": 2.0, "eval_episodes": 3}
    LIMITS: ClassVar[dict[str, str]] = {"alpha_lr": "> 0", "init_alpha": "> 0", "tau": "(0, 1]",
                                        "utd_ratio": "> 0", "start_steps": ">= 0"}
    env_id: str = "Pendulum-v1"       # any gymnasium env with a 1-D Box action space
    hidden: tuple[int, ...] = (64, 64)  # hidden layer sizes of the actor and both critics
    lr: float = 3e-3                  # Adam learning rate of the actor and the critics
    alpha_lr: float = 3e-3            # Adam learning rate of log(alpha)
    init_alpha: float = 1.0           # the entropy coefficient at the start
    tau: float = 0.05                 # Polyak averaging rate of the target critics
    batch_size: int = 256             # transitions per gradient step
    utd_ratio: float = 1.0            # update-to-data ratio: learner updates per env step
    start_steps: int = 1_000          # env steps (all workers together) of uniform random actions
    pull_every: int = 100             # a worker pulls weights at least every K env steps
    publish_every: int = 50           # the learner pushes weights every N updates
    worker_chunk: int = 100           # env steps per rollout-worker task
    eval_every_s: float = 1.0         # seconds per iteration: one evaluation, one row
    learner_cpus: float = 1.0         # logical CPUs of the learner actor
    worker_cpus: float = 0.4          # each rollout worker, at most
    target_return: float | None = -200.0  # stop: deterministic mean return reached (None: no goal)
    max_env_steps: int | None = 30_000    # stop: env step budget (None: unlimited)

# ---------------------------------------------------------------------------------------------
# 4. Environments: continuous actions only
# ---------------------------------------------------------------------------------------------

def require_continuous(env: gym.Env) -> None:
    """Refuse an env SAC cannot drive (ValueError, one line): actions must be a 1-D Box with
    finite bounds, and the first observations must be finite."""
    env_id = env.spec.id if env.spec else str(env)
    space = env.action_space
    if not isinstance(space, gym.spaces.Box):
        raise ValueError(f"{env_id} has a {type(space).__name__} action space; SAC needs "
                         "continuous (Box) actions (use --algo apex for discrete actions)")
    if len(space.shape) != 1:
        raise ValueError(f"{env_id} has actions of shape {space.shape}; SAC here needs a 1-D "
                         "Box action space")
    if not (np.isfinite(space.low).all() and np.isfinite(space.high).all()):
        raise ValueError(f"{env_id} has unbounded actions (low {space.low}, high "
                         f"{space.high}); SAC squashes actions into finite bounds")
    obs, _ = env.reset(seed=0)
    check_finite(obs, "observation", env_id, 0)


# ---------------------------------------------------------------------------------------------
# 5. The actors: rollout workers and the learner
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SACSlots(Slots):
    """Parallel SAC's slots (`distributed.config.Slots`) and its own; None: course_lib's.

    | slot                | called in             | as              | gives                    |
    | ------------------- | --------------------- | --------------- | ------------------------ |
    | `rollout`           | each rollout worker,  | `rollout(worker)`| `.run(num_steps)` ->    |
    |                     | once                  |                 | a `WorkerReport`         |
    | `squashed_log_prob`,| the learner, once     | `f()`           | the function of that     |
    | `q_target`,         |                       |                 | name in `SACMaths`       |
    | `actor_step`,       |                       |                 |                          |
    | `polyak_update`     |                       |                 |                          |
    """

    rollout: Callable | None = None
    squashed_log_prob: Callable | None = None
    q_target: Callable | None = None
    actor_step: Callable | None = None
    polyak_update: Callable | None = None


@ray.remote
class RolloutWorker(Worker):
    """A worker that plays a ~ pi(.|s) (sampled, not the mean) and sends 1-step transitions.

    Its first `random_steps` steps take uniform random actions (the replay fills with broad
    data before the policy means anything; a restarted worker does not do that again).
    Weights are pulled at every episode end and at least every `pull_every` steps.
    """

    pull_at_episode_end = True

    def __init__(self, index: int, cfg: SACConfig, prefix: str, seed: int, slots: SACSlots,
                 random_steps: int):
        super().__init__(index, cfg, prefix, seed, slots)
        self.random_steps = 0 if self.restarted else random_steps
        space = self.envs.envs[0].action_space
        self.low, self.high = space.low, space.high
        self.rollout = slots.rollout(self) if slots.rollout is not None else None

    def run(self, num_steps: int) -> WorkerReport:
        """`Worker.run`, or the `rollout` slot's loop if given."""
        if self.rollout is not None:
            return self.rollout.run(num_steps)
        return super().run(num_steps)

    def make_net(self, obs_dim: int, act_dim: int) -> SquashedGaussianActor:
        self.act_dim = act_dim
        return SquashedGaussianActor(obs_dim, act_dim, tuple(self.cfg.hidden))

    def act(self, obs: np.ndarray) -> np.ndarray:
        if self.steps < self.random_steps:
            actions = self.rng.uniform(-1.0, 1.0, (len(obs), self.act_dim)).astype(np.float32)
        else:
            actions = self.net.act(obs)
        check_finite(actions, "action", self.cfg.env_id, self.steps)
        return actions

    def env_action(self, action: np.ndarray) -> np.ndarray:
        return scale_action(action, self.low, self.high)

    def transitions(self, env, obs, action, reward, next_obs, terminated, truncated) -> list[dict]:
        check_finite(reward, "reward", self.cfg.env_id, self.steps)
        # a time-limit end is not terminal: only `terminated` is stored
        return [{"obs": obs, "action": action, "reward": reward, "next_obs": next_obs,
                 "terminated": terminated}]


@remote_learner
class SACLearnerActor(LearnerActor):
    """A SACLearner on uniform batches from the buffer it holds, calling SAC's maths slots
    where given. Ask Ray for a GPU (`learner_gpus`) and it trains there; without one it trains
    on the CPU, even where a GPU is visible (`ray_tools.reserved_device`)."""

    def make_learner(self, cfg: SACConfig, obs_dim: int, act_dim: int, slots: SACSlots,
                     device: str) -> SACLearner:
        given = {name: getattr(slots, name)() for name in ("squashed_log_prob", "q_target",
                                                            "actor_step", "polyak_update")
                 if getattr(slots, name) is not None}
        return make_learner(cfg, obs_dim, act_dim, device, SACMaths(**given))


def deterministic_returns(actor: SquashedGaussianActor, env_id: str, episodes: int = 10,
                          seed: int = 10_000) -> np.ndarray:
    """Returns (episodes,) of the deterministic policy a = tanh(mean(s)), scaled to the env."""
    env = make_env(env_id)
    low, high = env.action_space.low, env.action_space.high
    env.close()

    def act(obs: np.ndarray) -> np.ndarray:
        return scale_action(actor.act(obs, deterministic=True), low, high)

    return evaluate_policy(act, env_id, episodes, seed)


# ---------------------------------------------------------------------------------------------
# 6. The driver
# ---------------------------------------------------------------------------------------------

class SACTrainer(DistributedTrainer):
    """The parallel-SAC driver (`distributed.DistributedTrainer`) with rollout workers, a
    uniform replay and a SAC learner, holding the update-to-data ratio at `utd_ratio`.

    `SACTrainer(cfg, restore=checkpoint)` continues: networks, optimisers, alpha and counters;
    the replay buffer refills (the policy acts from the start: no random steps again).
    """

    algo, config_class = "sac", SACConfig
    Worker, Learner, Slots = RolloutWorker, SACLearnerActor, SACSlots
    worker_name = "rollout worker"
    learner_metrics = ("critic_loss", "actor_loss", "alpha", "entropy", "q_mean")

    @property
    def updates_per_transition(self) -> float:
        return self.cfg.utd_ratio

    @classmethod
    def check_env(cls, env) -> None:
        require_continuous(env)

    def transition_spec(self) -> dict:
        obs_dim, act_dim = self.dims
        return transition_spec((obs_dim,), action_shape=(act_dim,), action_dtype=np.float32)

    def replay_options(self) -> dict[str, Any]:
        return {"prioritized": False}

    def worker_options(self, index: int) -> dict[str, Any]:
        cfg = self.cfg
        random = 0 if self.counters.starts else math.ceil(cfg.start_steps / cfg.num_workers)
        return {"random_steps": random}

    def evaluation_functions(self) -> tuple:
        return (partial(SquashedGaussianActor, *self.dims, tuple(self.cfg.hidden)),
                partial(deterministic_returns, env_id=self.cfg.env_id))

    def row_extras(self) -> dict[str, float]:
        return {"utd": self.ratio_held()}


def deterministic_policy(checkpoint: dict):
    """act(obs) -> the env-scaled action tanh(mean(s)), from a SAC checkpoint (for
    `course_lib evaluate`)."""
    cfg = checkpoint["config"]
    env = make_env(checkpoint["env_id"])
    obs_dim, act_dim = env_dims(env)
    low, high = env.action_space.low, env.action_space.high
    env.close()
    actor = SquashedGaussianActor(obs_dim, act_dim, tuple(cfg["hidden"]))
    actor.load_state_dict(checkpoint["learner"]["actor"])
    actor.eval()

    def act(obs: np.ndarray) -> np.ndarray:
        return scale_action(actor.act(np.asarray(obs)[None], deterministic=True)[0], low, high)

    return act


#: what `python -m course_lib train --algo sac` runs (see `course_lib.algorithms`)
SPEC = AlgoSpec(SACTrainer, deterministic_policy)
