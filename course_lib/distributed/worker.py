"""A distributed run's workers: they play their envs, send batches to the replay, follow the
learner's weights (Ape-X's explorers, parallel SAC's rollout workers).

    Worker.run(num_steps)
      act on every env at once -> step them -> transitions into the outbox -> follower.step
      ... until num_steps env steps -> outbox.flush() -> WorkerReport

Two of its parts are slots (`distributed.config.Slots`), with course_lib's own here:
`Outbox` (batches to the replay, at most one add in flight) and `WeightsFollower` (pull the
newest weights every `pull_every` steps). An algorithm subclasses `Worker` and writes
`make_net`, `act` and `transitions` (and `priorities`, `env_action` if it needs them).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import ray
import torch

from course_lib.envs import EnvBatch, check_finite, env_dims
from course_lib.param_server import pull_into
from course_lib.ray_tools import get_result, restart_count
from course_lib.replay.nstep import stack_transitions
from course_lib.trainer import derive_seed

if TYPE_CHECKING:
    from course_lib.distributed.config import DistributedConfig, Slots

POLICY = "policy"   # the name the learner publishes the acting network's weights under


@dataclasses.dataclass
class WorkerReport:
    """What one `Worker.run` call did: the driver books it."""

    env_steps: int                    # env steps played
    episode_returns: list[float]      # returns of the episodes that ended
    pid: int                          # the worker's process (a new one after a restart)
    restarts: int                     # how often Ray has restarted this worker so far
    replay_inserted: int | None       # the replay's count after this worker's last add


class Outbox:
    """course_lib's outbox: transitions go out in batches of `send_every`, stacked, with their
    initial priorities (Ape-X; `priorities` returns None for a uniform replay). At most one
    add is in flight: waiting for the previous one is the back-pressure that keeps a fast
    worker from flooding a busy learner. `flush()` sends what is left and waits until it is
    stored; it returns the replay's count of stored transitions then (None if it sent nothing)."""

    def __init__(self, replay_actor, send_every: int, priorities):
        self.replay_actor, self.send_every, self.priorities = replay_actor, send_every, priorities
        self.pending: list[dict] = []     # transitions not sent yet
        self.adding = None                # the add in flight, if any
        self.stored: int | None = None    # the replay's count after the last add we saw

    def add(self, transitions: list[dict]) -> None:
        self.pending += transitions
        if len(self.pending) >= self.send_every:
            self._send()

    def flush(self) -> int | None:
        if self.pending:
            self._send()
        self._wait()
        return self.stored

    def _send(self) -> None:
        batch = stack_transitions(self.pending)
        self.pending = []
        priorities = self.priorities(batch)
        self._wait()
        self.adding = self.replay_actor.add.remote(batch, priorities)

    def _wait(self) -> None:
        if self.adding is not None:
            self.stored, self.adding = get_result(self.adding), None


class WeightsFollower:
    """course_lib's follower: pulls the newest weights of `name` into `net` when created, then
    after every `pull_every` steps of the worker's envs (and at each episode end if
    `at_episode_end`), copying them only when their version changed."""

    #: how long it waits for the first weights: a parameter server that Ray just restarted is
    #: empty until the learner publishes again (within `publish_every` updates, or at the
    #: driver's next snapshot)
    wait_s = 30.0

    def __init__(self, params, name: str, net, pull_every: int, at_episode_end: bool = False):
        self.params, self.name, self.net = params, name, net
        self.pull_every, self.at_episode_end = pull_every, at_episode_end
        self.version = -1
        deadline = time.monotonic() + self.wait_s
        while self.pull() < 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no weights named {name!r} on the parameter server after "
                                   f"{self.wait_s:g} s: the learner never published them")
            time.sleep(0.1)
        self.since_pull = 0

    def step(self, episode_ended: bool) -> None:
        self.since_pull += 1
        if self.since_pull >= self.pull_every or (self.at_episode_end and episode_ended):
            self.pull()
            self.since_pull = 0

    def pull(self) -> int:
        """`pull_into` the newest weights; the version held. A server that died after it
        answered took the weights' object with it (Ray's objects die with their owner): the
        weights held stay until the restarted server has new ones."""
        try:
            self.version = pull_into(self.params, self.name, self.net, self.version)
        except ray.exceptions.ObjectLostError:
            pass
        return self.version


def pin_this_process(learner: bool) -> None:
    """`pin_learner`: the learner's process alone on the last core, a worker's on the others
    (Linux; every thread of the process, Ray's included). Ray's CPUs are logical: without
    this, the operating system moves the learner between the cores the workers also use."""
    last = os.cpu_count() - 1
    cores = {last} if learner else set(range(last))
    for tid in os.listdir("/proc/self/task"):
        os.sched_setaffinity(int(tid), cores)


class Worker(ABC):
    """`num_envs` envs stepped as one batch (`envs.EnvBatch`) and a copy of the acting network.
    `run(num_steps)` plays that many env steps and returns a `WorkerReport`.

    Several envs per worker is how Sample Factory and EnvPool make acting cheap: one forward
    pass chooses the actions of all of them, and an env whose step waits on something remote
    (`env_latency_ms`) waits once for all of them.

    The replay actor and the parameter server are found by name: when Ray restarts a worker it
    runs `__init__` again with the same arguments, and handles passed as arguments would have
    to outlive the original call in the object store (Ray warns that a restart fails if not).
    """

    pull_at_episode_end: ClassVar[bool] = False   # also pull when an episode ends (SAC)

    def __init__(self, index: int, cfg: DistributedConfig, prefix: str, seed: int,
                 slots: Slots):
        torch.set_num_threads(1)
        if cfg.pin_learner:
            pin_this_process(learner=False)
        self.restarts = restart_count()
        self.restarted = self.restarts > 0
        if self.restarted:                    # a new process: new episodes, new exploration
            seed = derive_seed(seed, "restart", self.restarts)
        self.seed = seed
        torch.manual_seed(seed)
        self.cfg, self.index, self.rng = cfg, index, np.random.default_rng(seed)
        self.replay_actor = ray.get_actor(f"{prefix}:learner")   # it holds the replay
        self.params = ray.get_actor(f"{prefix}:parameter server")
        self.envs = EnvBatch(cfg.env_id, cfg.num_envs, cfg.env_latency_ms, seed)
        self.episode_returns = np.zeros(cfg.num_envs)     # of the episode under way, per env
        self.steps = 0
        self.net = self.make_net(*env_dims(self.envs.envs[0]))
        self.outbox = (slots.outbox or Outbox)(self.replay_actor, cfg.send_every,
                                               self.priorities)
        self.follower = (slots.follower or WeightsFollower)(
            self.params, POLICY, self.net, math.ceil(cfg.pull_every / cfg.num_envs),
            self.pull_at_episode_end)

    def pid(self) -> int:
        """This worker's process id (a new one after a restart)."""
        return os.getpid()

    def node_id(self) -> str:
        """The Ray node this worker runs on (on a cluster: which machine)."""
        return ray.get_runtime_context().get_node_id()

    def run(self, num_steps: int) -> WorkerReport:
        """Play `num_steps` env steps (rounded up to whole steps of all `num_envs` envs)."""
        cfg, returns, played = self.cfg, [], 0
        while played < num_steps:
            obs = self.envs.obs
            actions = self.act(obs)                      # one forward pass for every env
            next_obs, rewards, terminated, truncated = self.envs.step(
                [self.env_action(a) for a in actions])   # obs moves on; resets where ended
            check_finite(next_obs, "observation", cfg.env_id, self.steps)
            for i in range(len(actions)):
                self.outbox.add(self.transitions(i, obs[i], actions[i], rewards[i],
                                                 next_obs[i], terminated[i], truncated[i]))
            self.episode_returns += rewards
            ended = terminated | truncated
            returns += self.episode_returns[ended].tolist()
            self.episode_returns[ended] = 0.0
            self.steps += len(actions)
            played += len(actions)
            self.follower.step(bool(ended.any()))
        return self.report(played, returns)

    def report(self, played: int, returns: list[float]) -> WorkerReport:
        """What `run` returns, once everything it played is stored (the outbox flushed)."""
        return WorkerReport(played, returns, os.getpid(), self.restarts, self.outbox.flush())

    # -- what an algorithm writes -----------------------------------------------------------

    @abstractmethod
    def make_net(self, obs_dim: int, action_dim: int) -> torch.nn.Module:
        """The acting network (weights arrive from the parameter server)."""

    @abstractmethod
    def act(self, obs: np.ndarray) -> np.ndarray:
        """The actions to take in a batch of observations (num_envs, obs_dim), exploration
        included: one forward pass serves every env of this worker."""

    @abstractmethod
    def transitions(self, env: int, obs, action, reward, next_obs, terminated,
                    truncated) -> list[dict]:
        """The transitions of env `env` that are complete after this step (a time-limit end
        is not terminal: only `terminated` may stop the bootstrap)."""

    def env_action(self, action):
        """The action as the env takes it (SAC scales [-1, 1] to the env's bounds)."""
        return action

    def priorities(self, batch: dict[str, np.ndarray]) -> np.ndarray | None:
        """Initial priorities of a batch (Ape-X); None: the replay samples uniformly."""
        return None

