"""Environments, as every algorithm of the workbook makes, checks and scores them.

- `make_env`: `gym.make` with observations as 1-D float32 vectors, so one MLP fits any env,
  and a time limit on every episode (`DEFAULT_TIME_LIMIT` steps where the env has none);
  `latency_ms` makes each step wait as an env whose cost is paid elsewhere would (`Latency`).
- `env_dims`: (obs_dim, action_dim) of such an env; action_dim counts the choices of a
  Discrete action space and the components of a Box one.
- `check_finite`: an observation or an action with NaN or inf stops the run with one line
  that names the env and the step (`NonFiniteError`), instead of poisoning the networks.
- `play_episode`: the one loop that plays an episode of act(obs) in one env (the command
  line's evaluation, rendering and REINFORCE's sampling all call it).
- `evaluate_policy`: undiscounted returns of a deterministic policy, all episodes side by side.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np

from course_lib.errors import NonFiniteError

#: env steps after which an episode of an env registered without a time limit is truncated
#: (CliffWalking-v1: a greedy policy that walks into a wall would otherwise play forever, and
#: an evaluation or a training episode would never end)
DEFAULT_TIME_LIMIT = 1_000


class Latency(gym.Wrapper):
    """Each `step` waits `ms` milliseconds before it returns, without using the CPU: the
    stand-in for an env whose cost is paid somewhere else (a simulator on another machine, a
    robot, a game server). On a 2-core laptop this is where many explorers pay: while one
    waits, the others act, and the learner keeps the cores."""

    def __init__(self, env: gym.Env, ms: float):
        super().__init__(env)
        self.seconds = ms / 1000.0

    def step(self, action):
        time.sleep(self.seconds)
        return self.env.step(action)


def make_env(env_id: str, latency_ms: float = 0.0, **kwargs) -> gym.Env:
    """`gym.make(env_id)`, with observations as 1-D float32 vectors, so one MLP fits every env:
    flattened when they are not 1-D (a Discrete observation becomes a one-hot vector) and cast
    when they are not float32 (a flattened Discrete is int64, which a torch layer refuses).
    An env without a time limit of its own gets one of `DEFAULT_TIME_LIMIT` steps: its
    episodes end as truncated (not terminated: the bootstrap goes on) instead of never.
    `latency_ms` > 0 wraps it in `Latency` (training envs only: evaluation stays fast)."""
    env = gym.make(env_id, **kwargs)
    if env.spec is None or env.spec.max_episode_steps is None:
        env = gym.wrappers.TimeLimit(env, DEFAULT_TIME_LIMIT)
    if latency_ms > 0:
        env = Latency(env, latency_ms)
    space = env.observation_space
    if not (isinstance(space, gym.spaces.Box) and len(space.shape) == 1):
        env = gym.wrappers.FlattenObservation(env)
    if env.observation_space.dtype != np.float32:
        env = gym.wrappers.DtypeObservation(env, np.float32)
    return env


class EnvBatch:
    """N envs stepped as one batch, as one process drives several remote simulators: one
    `step(actions)` steps all N and waits `latency_ms` once (the N requests go out together,
    so their waits overlap), and an env whose episode ended starts the next one at once.
    `obs` (N, obs_dim) holds the observations the next actions are chosen from."""

    def __init__(self, env_id: str, n: int, latency_ms: float = 0.0, seed: int = 0):
        self.envs = [make_env(env_id) for _ in range(n)]
        self.seconds = latency_ms / 1000.0
        self.obs = np.stack([env.reset(seed=seed + i)[0] for i, env in enumerate(self.envs)])

    def step(self, actions) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(next_obs, rewards, terminated, truncated), each (N, ...): next_obs is where each
        action led (an episode's last observation where it ended, which is what an n-step
        window stores); `obs` moves on to the next episode's first observation there."""
        if self.seconds:
            time.sleep(self.seconds)
        out = [env.step(action) for env, action in zip(self.envs, actions, strict=True)]
        next_obs = np.stack([o[0] for o in out])
        rewards, terminated, truncated = (np.array([o[k] for o in out]) for k in (1, 2, 3))
        self.obs = next_obs.copy()
        for i in np.flatnonzero(terminated | truncated):
            self.obs[i] = self.envs[i].reset()[0]
        return next_obs, rewards, terminated, truncated

    def close(self) -> None:
        for env in self.envs:
            env.close()


def env_dims(env: gym.Env) -> tuple[int, int]:
    """(obs_dim, action_dim) of an env from `make_env`: the number of choices of a Discrete
    action space, the number of components of a Box one."""
    space = env.action_space
    action_dim = int(space.n) if isinstance(space, gym.spaces.Discrete) else int(
        np.prod(space.shape))
    return int(np.prod(env.observation_space.shape)), action_dim


def check_finite(value, what: str, env_id: str, step: int) -> None:
    """NonFiniteError naming `env_id` and `step` if `value` holds a NaN or an infinity.

    >>> check_finite(np.array([0.0, np.nan]), "observation", "Bad-v0", 12)
    Traceback (most recent call last):
    ...
    course_lib.errors.NonFiniteError: Bad-v0 gave a non-finite observation at env step 12: [ 0. nan]
    """
    array = np.asarray(value, dtype=np.float64)
    if not np.isfinite(array).all():
        verb = "was given" if what == "action" else "gave"
        raise NonFiniteError(f"{env_id} {verb} a non-finite {what} at env step {step}: "
                             f"{np.array2string(array, precision=3, threshold=8)}")


def play_episode(env: gym.Env, act: Callable, obs: np.ndarray, max_steps: int | None = None,
                 on_step: Callable | None = None) -> tuple[float, int]:
    """Play act(obs) in `env` from `obs` (what `env.reset` returned) until the episode ends
    (terminated or truncated) or `max_steps` steps: (undiscounted return, steps).

    `on_step(obs, action, reward, next_obs, terminated, truncated)` sees every step as it
    happens: REINFORCE stores it, rendering draws a frame.
    """
    total, steps, done = 0.0, 0, False
    while not done and (max_steps is None or steps < max_steps):
        action = act(obs)
        next_obs, reward, terminated, truncated, _ = env.step(action)
        total, steps, done = total + float(reward), steps + 1, terminated or truncated
        if on_step is not None:
            on_step(obs, action, reward, next_obs, terminated, truncated)
        obs = next_obs
    return total, steps


def evaluate_policy(act: Callable[[np.ndarray], np.ndarray], env_id: str, episodes: int = 10,
                    seed: int = 10_000) -> np.ndarray:
    """Undiscounted returns (episodes,) of `act`, all episodes run side by side.

    `act` maps a batch of observations (B, obs_dim) float32 to a batch of actions (B, ...);
    one call per time step serves every episode still running, which is several times faster
    than one episode at a time. Episode i starts from `reset(seed=seed + i)`. Every episode
    ends: at the env's time limit, or after `DEFAULT_TIME_LIMIT` steps where it has none
    (`make_env`). The envs are closed also when an episode raises (`NonFiniteError`, say).
    """
    envs = []
    try:
        envs += [make_env(env_id) for _ in range(episodes)]
        return _play_side_by_side(act, envs, env_id, seed)
    finally:
        for env in envs:
            env.close()


def _play_side_by_side(act, envs: list[gym.Env], env_id: str, seed: int) -> np.ndarray:
    """`evaluate_policy`'s loop: one `act` call per time step for the episodes still running."""
    obs = np.stack([env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]).astype(np.float32)
    returns = np.zeros(len(envs))
    running = np.ones(len(envs), dtype=bool)
    t = 0
    while running.any():
        idx = np.flatnonzero(running)
        actions = act(obs[idx])
        for j, action in zip(idx, actions, strict=True):
            obs[j], reward, terminated, truncated, _ = envs[j].step(action)
            check_finite(obs[j], "observation", env_id, t)
            returns[j] += reward
            running[j] = not (terminated or truncated)
        t += 1
    return returns
