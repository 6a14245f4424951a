"""The three kinds of actor a distributed trainer starts, as base classes an algorithm fills in.

| class          | job                                               | an algorithm writes      |
| -------------- | ------------------------------------------------- | ------------------------ |
| `Worker`       | plays its env, sends batches to the replay actor, | `make_net`, `act`,       |
|                | pulls weights (Ape-X calls workers *explorers*)   | `transitions`            |
| `LearnerActor` | samples from the replay actor, updates, publishes | `make_learner`           |
| `Evaluator`    | plays a snapshot's weights on fresh episodes      | nothing: it is given a   |
|                |                                                   | net factory and a scorer |

`course_lib.distributed.DistributedTrainer` starts them and hands out their work.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import ray
import torch

from course_lib.envs import check_finite, env_dims, make_env
from course_lib.errors import first_line
from course_lib.nets import set_weights
from course_lib.param_server import get_result, pull_into
from course_lib.replay.nstep import stack_transitions
from course_lib.trainer import derive_seed

if TYPE_CHECKING:
    from course_lib.distributed import DistributedConfig

class UnawaitedCallError(RuntimeError):
    """A call the learner sent without waiting for it (`publish`, `update_priorities`) failed."""


POLICY = "policy"   # the name the learner publishes the acting network's weights under


# ---------------------------------------------------------------------------------------------
# Workers: play, send batches to the replay actor, pull weights
# ---------------------------------------------------------------------------------------------

def restart_count() -> int:
    """How often Ray has restarted the actor this runs in (0 outside an actor), from Ray's own
    actor table: the number `was_current_actor_reconstructed` reads (Ray is pinned)."""
    from ray._private.state import actors

    actor_id = ray.get_runtime_context().get_actor_id()
    info = actors(actor_id=actor_id) if actor_id else None
    return int(info["NumRestarts"]) if info else 0


class Worker(ABC):
    """One env and a copy of the acting network. `run(num_steps)` plays that many env steps and
    returns {"env_steps", "episode_returns", "pid", "restarts", "replay_inserted"}: `restarts`
    is how often Ray has restarted this worker (two restarts between two results count two),
    `replay_inserted` the replay actor's own count of stored transitions after this worker's
    last add, or None if it sent nothing.

    The replay actor and the parameter server are found by name: when Ray restarts a worker it
    runs `__init__` again with the same arguments, and handles passed as arguments would have
    to outlive the original call in the object store (Ray warns that a restart fails if not).
    """

    pull_at_episode_end: ClassVar[bool] = False   # also pull when an episode ends (SAC)

    def __init__(self, index: int, cfg: DistributedConfig, prefix: str, seed: int):
        torch.set_num_threads(1)
        self.restarts = restart_count()
        self.restarted = self.restarts > 0
        if self.restarted:                    # a new process: new episodes, new exploration
            seed = derive_seed(seed, "restart", self.restarts)
        self.seed = seed
        torch.manual_seed(seed)
        self.cfg, self.index, self.rng = cfg, index, np.random.default_rng(seed)
        self.replay = ray.get_actor(f"{prefix}-replay")
        self.params = ray.get_actor(f"{prefix}-params")
        self.env = make_env(cfg.env_id, latency_ms=cfg.env_latency_ms)
        self.obs, _ = self.env.reset(seed=seed)
        self.episode_return, self.steps, self.since_pull = 0.0, 0, 0
        self.outbox: list[dict] = []          # transitions not sent yet
        self.adding = None                    # the replay add still in flight (at most one)
        self.net = self.make_net(*env_dims(self.env))
        self.version = pull_into(self.params, POLICY, self.net)
        if self.version < 0:
            raise RuntimeError("a worker started before the learner published its weights")

    def pid(self) -> int:
        """This worker's process id (a new one after a restart)."""
        return os.getpid()

    def node_id(self) -> str:
        """The Ray node this worker runs on (on a cluster: which machine)."""
        return ray.get_runtime_context().get_node_id()

    def seeded_with(self) -> int:
        """The seed this process started from (a restarted worker draws a new one)."""
        return self.seed

    def run(self, num_steps: int) -> dict[str, Any]:
        cfg, returns, inserted = self.cfg, [], None
        for _ in range(num_steps):
            action = self.act(self.obs)
            next_obs, reward, terminated, truncated, _ = self.env.step(self.env_action(action))
            check_finite(next_obs, "observation", cfg.env_id, self.steps)
            self.outbox += self.transitions(self.obs, action, reward, next_obs, terminated,
                                            truncated)
            self.episode_return += float(reward)
            self.obs = next_obs                   # carry the next observation over
            self.steps += 1
            self.since_pull += 1
            if terminated or truncated:
                returns.append(self.episode_return)
                self.obs, _ = self.env.reset()
                self.episode_return = 0.0
            if len(self.outbox) >= cfg.send_every:
                sent = self.send()
                inserted = inserted if sent is None else sent
            if self.since_pull >= cfg.pull_every or (
                    self.pull_at_episode_end and (terminated or truncated)):
                self.version = pull_into(self.params, POLICY, self.net, self.version)
                self.since_pull = 0
        if self.adding is not None:               # what we report is really stored
            inserted = get_result(self.adding)
            self.adding = None
        return {"env_steps": num_steps, "episode_returns": returns, "pid": os.getpid(),
                "restarts": self.restarts, "replay_inserted": inserted}

    def send(self) -> int | None:
        """The outbox to the replay actor (with initial priorities if the algorithm has them).
        At most one add is in flight: waiting for the previous one is the back-pressure that
        keeps a fast worker from flooding a busy replay actor. Returns the replay actor's count
        after the previous add, if there was one."""
        batch = stack_transitions(self.outbox)
        self.outbox = []
        priorities = self.priorities(batch)
        inserted = get_result(self.adding) if self.adding is not None else None
        self.adding = self.replay.add.remote(batch, priorities)
        return inserted

    # -- what an algorithm writes -----------------------------------------------------------

    @abstractmethod
    def make_net(self, obs_dim: int, action_dim: int) -> torch.nn.Module:
        """The acting network (weights arrive from the parameter server)."""

    @abstractmethod
    def act(self, obs: np.ndarray):
        """The action to take in `obs` (exploration included)."""

    @abstractmethod
    def transitions(self, obs, action, reward, next_obs, terminated, truncated) -> list[dict]:
        """The transitions that are complete after this step (a time-limit end is not
        terminal: only `terminated` may stop the bootstrap)."""

    def env_action(self, action):
        """The action as the env takes it (SAC scales [-1, 1] to the env's bounds)."""
        return action

    def priorities(self, batch: dict[str, np.ndarray]) -> np.ndarray | None:
        """Initial priorities of a batch (Ape-X); None: the replay samples uniformly."""
        return None


# ---------------------------------------------------------------------------------------------
# The learner: samples from the replay actor, updates, publishes
# ---------------------------------------------------------------------------------------------

class LearnerActor(ABC):
    """A learner (DQNLearner, SACLearner) fed by the replay actor.

    `train(num_updates)` runs that many updates and returns the mean of each scalar the
    updates report, plus the update count. Sampling is pipelined: `prefetch` sample requests
    stay in flight, `ray.wait` takes the first one ready and a new request replaces it at once,
    so the replay actor samples while the learner trains. Each request fetches
    `sample_batches` batches in one round trip: Ray calls, not maths, are the cost here. Each
    batch is drawn on its own (its importance weights normalised by its own largest), so the
    learner can start as soon as the buffer holds one batch.
    `snapshot()` is the learner's state now, for the driver to evaluate and save.

    Calls the learner does not wait for (`publish`, Ape-X's `update_priorities`) go through
    `send_unawaited`: their refs are kept and the finished ones checked without blocking, so
    an error of one surfaces at the next call or at the end of the `train` task
    (`UnawaitedCallError`, one line naming the call) instead of never.
    """

    def __init__(self, cfg: DistributedConfig, dims: tuple[int, int], prefix: str,
                 state: dict | None, seed: int):
        torch.set_num_threads(1)
        torch.manual_seed(seed)
        self.cfg = cfg
        self.replay = ray.get_actor(f"{prefix}-replay")
        self.params = ray.get_actor(f"{prefix}-params")
        self.learner = self.make_learner(cfg, *dims)
        if state is not None:
            self.learner.load_state_dict(state)
        self.in_flight: list = []             # sample requests sent to the replay actor
        self.unawaited: list[tuple[str, ray.ObjectRef]] = []   # (call, ref) not checked yet
        self.batches: list[dict] = []         # fetched batches not trained on yet
        ray.get(self.publish())               # awaited once: workers start after this

    def ready(self) -> str:
        """Returns once the first weights are published; the device the learner trains on."""
        return str(self.learner.device)

    def publish(self) -> ray.ObjectRef:
        """Weights to the parameter server, which puts each version in the object store once
        for every reader. Not awaited: the learner goes straight back to training."""
        return self.params.push.remote(POLICY, self.learner.get_weights())

    def next_batch(self) -> dict[str, np.ndarray]:
        """The next batch to train on, keeping `prefetch` sample requests in flight."""
        cfg = self.cfg
        if not self.batches:
            while len(self.in_flight) < cfg.prefetch:
                self.in_flight.append(self.replay.sample_batches.remote(*self.sample_args()))
            [ready], self.in_flight = ray.wait(self.in_flight, num_returns=1)
            self.in_flight.append(self.replay.sample_batches.remote(*self.sample_args()))
            self.batches = get_result(ready)
        return self.batches.pop()

    def train(self, num_updates: int) -> dict[str, Any]:
        infos = []
        for _ in range(num_updates):
            batch = self.next_batch()
            info = self.learner.update(batch)
            self.after_update(batch, info)
            infos.append(info)
            if self.learner.updates % self.cfg.publish_every == 0:
                self.send_unawaited("params.push (publish)", self.publish())
        self.check_unawaited()
        means = {k: float(np.mean([i[k] for i in infos])) for k, v in infos[0].items()
                 if isinstance(v, float)}
        return {**means, "updates": self.learner.updates}

    def send_unawaited(self, call: str, ref: ray.ObjectRef) -> None:
        """Keep the ref of a call not waited for (named `call` in errors); check the others."""
        self.check_unawaited()
        self.unawaited.append((call, ref))

    def check_unawaited(self) -> None:
        """Raise the error of a finished unawaited call, without waiting for any: a dead actor's
        RayActorError as itself (the driver names that actor), any other error as an
        `UnawaitedCallError` naming the call."""
        if not self.unawaited:
            return
        done, _ = ray.wait([ref for _, ref in self.unawaited], num_returns=len(self.unawaited),
                           timeout=0)
        done = set(done)
        for call, ref in self.unawaited:
            if ref in done:
                try:
                    get_result(ref)
                except ray.exceptions.RayActorError:
                    raise
                except Exception as err:
                    raise UnawaitedCallError(f"{call}, not awaited, failed: "
                                             f"{first_line(err)}") from None
        self.unawaited = [(call, ref) for call, ref in self.unawaited if ref not in done]

    def snapshot(self) -> dict[str, Any]:
        return {"state": self.learner.state_dict(), "weights": self.learner.get_weights(),
                "updates": self.learner.updates}

    # -- what an algorithm writes -----------------------------------------------------------

    @abstractmethod
    def make_learner(self, cfg, obs_dim: int, action_dim: int):
        """The plain learner (DQNLearner, SACLearner) this actor feeds."""

    def sample_args(self) -> tuple:
        """The arguments of one `replay.sample_batches` request."""
        return (self.cfg.batch_size, self.cfg.sample_batches)

    def after_update(self, batch: dict[str, np.ndarray], info: dict[str, Any]) -> None:
        """Anything to do with an update's result (Ape-X: send the new priorities); by
        default, nothing."""
        return None


@ray.remote
class Evaluator:
    """Plays the weights it is given (a snapshot's) on fresh episodes; returns the returns.
    `make_net()` builds the network and `score(net, episodes=, seed=)` plays it."""

    def __init__(self, make_net, score):
        torch.set_num_threads(1)
        self.net, self.score = make_net(), score

    def evaluate(self, weights: dict[str, np.ndarray], episodes: int, seed: int) -> list[float]:
        set_weights(self.net, weights)
        return self.score(self.net, episodes=episodes, seed=seed).tolist()
