"""The three kinds of actor a distributed trainer starts, as base classes an algorithm fills in.

| class          | job                                               | an algorithm writes      |
| -------------- | ------------------------------------------------- | ------------------------ |
| `Worker`       | plays its env, sends batches to the learner's     | `make_net`, `act`,       |
|                | replay, pulls weights (Ape-X: *explorers*)        | `transitions`            |
| `LearnerActor` | holds the replay, samples, updates, publishes     | `make_learner`           |
| `Evaluator`    | plays a snapshot's weights on fresh episodes      | nothing: it is given a   |
|                |                                                   | net factory and a scorer |

`course_lib.distributed.DistributedTrainer` starts them and hands out their work.
"""

from __future__ import annotations

import os
import threading
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import ray
import torch

from course_lib.envs import EnvBatch, check_finite, env_dims
from course_lib.errors import first_line
from course_lib.nets import set_weights
from course_lib.param_server import get_result, pull_into
from course_lib.pieces import Given, steps_per_pull
from course_lib.pieces.drive import Counted
from course_lib.replay.nstep import stack_transitions
from course_lib.replay.server import ReplayStore
from course_lib.trainer import derive_seed

if TYPE_CHECKING:
    from course_lib.distributed import DistributedConfig


class UnawaitedCallError(RuntimeError):
    """A call the learner sent without waiting for it (`publish`) failed."""


POLICY = "policy"   # the name the learner publishes the acting network's weights under


# ---------------------------------------------------------------------------------------------
# Workers: play, send batches to the learner's replay, pull weights
# ---------------------------------------------------------------------------------------------

def pin_this_process(learner: bool) -> None:
    """`pin_learner`: the learner's process alone on the last core, a worker's on the others
    (Linux; every thread of the process, Ray's included). Ray's CPUs are logical: without
    this, the operating system moves the learner between the cores the workers also use."""
    last = os.cpu_count() - 1
    cores = {last} if learner else set(range(last))
    for tid in os.listdir("/proc/self/task"):
        os.sched_setaffinity(int(tid), cores)


def restart_count() -> int:
    """How often Ray has restarted the actor this runs in (0 outside an actor), from Ray's own
    actor table: the number `was_current_actor_reconstructed` reads (Ray is pinned)."""
    from ray._private.state import actors

    actor_id = ray.get_runtime_context().get_actor_id()
    info = actors(actor_id=actor_id) if actor_id else None
    return int(info["NumRestarts"]) if info else 0


class Worker(ABC):
    """`num_envs` envs stepped as one batch (`envs.EnvBatch`) and a copy of the acting network.
    `run(num_steps)` plays that many env steps and returns {"env_steps", "episode_returns",
    "pid", "restarts", "replay_inserted"}: `restarts` is how often Ray has restarted this
    worker (two restarts between two results count two), `replay_inserted` the replay
    buffer's own count of stored transitions after this worker's last add, or None if it sent
    nothing.

    `given`: the attendee's pieces this worker uses (`course_lib.pieces`): their outbox
    instead of `send`'s, flushed at the end of each `run`; their weights follower instead of
    the pulls below. None: the worker's own.

    Several envs per worker is how Sample Factory and EnvPool make acting cheap: one forward
    pass chooses the actions of all of them, and an env whose step waits on something remote
    (`env_latency_ms`) waits once for all of them.

    The learner actor (which holds the replay buffer) and the parameter server are found by
    name: when Ray restarts a worker it runs `__init__` again with the same arguments, and
    handles passed as arguments would have to outlive the original call in the object store
    (Ray warns that a restart fails if not).
    """

    pull_at_episode_end: ClassVar[bool] = False   # also pull when an episode ends (SAC)

    def __init__(self, index: int, cfg: DistributedConfig, prefix: str, seed: int,
                 given: Given | None = None):
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
        self.replay = ray.get_actor(f"{prefix}-learner")   # it holds the replay buffer
        self.params = ray.get_actor(f"{prefix}-params")
        self.envs = EnvBatch(cfg.env_id, cfg.num_envs, cfg.env_latency_ms, seed)
        self.episode_returns = np.zeros(cfg.num_envs)     # of the episode under way, per env
        self.steps, self.since_pull = 0, 0
        self.outbox: list[dict] = []          # transitions not sent yet
        self.adding = None                    # the replay add still in flight (at most one)
        self.net = self.make_net(*env_dims(self.envs.envs[0]))
        given = given or Given({}, "", 0.0)
        self.own_outbox = given.outbox(self.replay, cfg.send_every, self.priorities)
        self.follower = given.follower(self.params, POLICY, self.net,
                                       steps_per_pull(cfg.pull_every, cfg.num_envs))
        if self.follower is None:
            self.version = pull_into(self.params, POLICY, self.net)
            if self.version < 0:
                raise RuntimeError("a worker started before the learner published its weights")

    def pid(self) -> int:
        """This worker's process id (a new one after a restart)."""
        return os.getpid()

    def node_id(self) -> str:
        """The Ray node this worker runs on (on a cluster: which machine)."""
        return ray.get_runtime_context().get_node_id()

    def run(self, num_steps: int) -> dict[str, Any]:
        """Play `num_steps` env steps (rounded up to whole steps of all `num_envs` envs)."""
        cfg, returns, inserted, played = self.cfg, [], None, 0
        while played < num_steps:
            obs = self.envs.obs
            actions = self.act(obs)                      # one forward pass for every env
            next_obs, rewards, terminated, truncated = self.envs.step(
                [self.env_action(a) for a in actions])   # obs moves on; resets where ended
            check_finite(next_obs, "observation", cfg.env_id, self.steps)
            for i in range(len(actions)):
                self.outbox += self.transitions(i, obs[i], actions[i], rewards[i], next_obs[i],
                                                terminated[i], truncated[i])
            self.episode_returns += rewards
            ended = terminated | truncated
            returns += self.episode_returns[ended].tolist()
            self.episode_returns[ended] = 0.0
            self.steps += len(actions)
            self.since_pull += len(actions)
            played += len(actions)
            if len(self.outbox) >= cfg.send_every:
                sent = self.send()
                inserted = inserted if sent is None else sent
            self.follow(ended.any())
        return self.result(played, returns, inserted)

    def run_counted(self, num_steps: int) -> Counted:
        """`run`, as the attendee's driver loop (pieces=, notebook 05) adds it up: the env
        steps played, carrying the whole result."""
        out = self.run(num_steps)
        return Counted(out["env_steps"], out)

    def follow(self, episode_ended: bool) -> None:
        """After a step of every env: the attendee's follower is told; or this worker pulls the
        newest weights if `pull_every` steps went by (or an episode ended, for SAC)."""
        if self.follower is not None:
            self.follower.step(episode_ended)
        elif self.since_pull >= self.cfg.pull_every or (self.pull_at_episode_end and
                                                        episode_ended):
            self.version = pull_into(self.params, POLICY, self.net, self.version)
            self.since_pull = 0

    def result(self, played: int, returns: list[float], inserted: int | None) -> dict[str, Any]:
        """What `run` returns, once everything it played is stored (the attendee's outbox
        flushed, the last add waited for)."""
        if self.own_outbox is not None:           # the attendee's: everything given is stored
            self.send()
            inserted = self.own_outbox.flush()
        if self.adding is not None:               # what we report is really stored
            inserted = get_result(self.adding)
            self.adding = None
        return {"env_steps": played, "episode_returns": returns, "pid": os.getpid(),
                "restarts": self.restarts, "replay_inserted": inserted}

    def send(self) -> int | None:
        """The outbox to the learner's replay (with initial priorities if the algorithm has
        them). At most one add is in flight: waiting for the previous one is the back-pressure
        that keeps a fast worker from flooding a busy learner. Returns the replay's count
        after the previous add, if there was one. With the attendee's outbox: the transitions
        go to it, and it sends them (None)."""
        if self.own_outbox is not None:
            self.own_outbox.add(self.outbox)
            self.outbox = []
            return None
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


# ---------------------------------------------------------------------------------------------
# The learner: holds the replay buffer, samples from it, updates, publishes
# ---------------------------------------------------------------------------------------------

#: the decorator of a learner actor class: Ray runs its `add` calls on a second thread (the
#: "replay" concurrency group), so workers' batches land while `train` runs on the main one
remote_learner = ray.remote(concurrency_groups={"replay": 1})


class LearnerActor(ABC):
    """A learner (DQNLearner, SACLearner) with the replay buffer in its own process.

    Workers send their batches straight here (`add`); `train(num_updates)` samples each batch
    locally, runs that many updates and returns the mean of each scalar they report, plus the
    update count. Keeping the buffer beside the learner is what RLlib's Ape-X did (replay
    shards on the learner's node) and what SEED RL and TorchRL do: a sample or a priority
    update is a function call, not a Ray round trip and a copy through the object store, and
    no separate replay process competes for the cores. A lock keeps the two threads from
    touching the buffer at once; torch releases the GIL while it computes, so an add rarely
    waits for an update.

    `given`: the attendee's pieces (`course_lib.pieces`): their replay pieces (notebook 04)
    draw the buffer's batches, and their pieces of SAC's maths run in the SAC learner, if given.

    `snapshot()` is the learner's state now, for the driver to evaluate and save.

    Calls the learner does not wait for (`publish`) go through `send_unawaited`: their refs
    are kept and the finished ones checked without blocking, so an error of one surfaces at
    the next call or at the end of the `train` task (`UnawaitedCallError`, one line naming
    the call) instead of never.
    """

    def __init__(self, cfg: DistributedConfig, dims: tuple[int, int], prefix: str,
                 state: dict | None, seed: int, replay: dict[str, Any],
                 given: Given | None = None):
        torch.set_num_threads(1)
        torch.manual_seed(seed)
        if cfg.pin_learner:
            pin_this_process(learner=True)
        self.cfg = cfg
        self.replay = ReplayStore(**replay)     # capacity, spec, seed and its options
        if given is not None:
            given.sampling(self.replay)          # the attendee's replay pieces, if given
        self.lock = threading.Lock()             # adds (replay thread) against samples
        self.params = ray.get_actor(f"{prefix}-params")
        self.learner = self.make_learner(cfg, *dims)
        if given is not None:
            given.sac_maths(self.learner)        # the attendee's SAC maths, if given
        if state is not None:
            self.learner.load_state_dict(state)
        self.unawaited: list[tuple[str, ray.ObjectRef]] = []   # (call, ref) not checked yet
        ray.get(self.publish())               # awaited once: workers start after this

    @ray.method(concurrency_group="replay")
    def add(self, batch: dict[str, np.ndarray], priorities: np.ndarray | None = None) -> int:
        """Store a worker's batch; the number of transitions stored in all (counted where
        they land, not where they left)."""
        with self.lock:
            return self.replay.add(batch, priorities)

    def ready(self) -> str:
        """Returns once the first weights are published; the device the learner trains on."""
        return str(self.learner.device)

    def publish(self) -> ray.ObjectRef:
        """Weights to the parameter server, which puts each version in the object store once
        for every reader. Not awaited: the learner goes straight back to training."""
        return self.params.push.remote(POLICY, self.learner.get_weights())

    def sample(self) -> dict[str, np.ndarray]:
        """The next batch to train on, drawn from the local buffer."""
        with self.lock:
            return self.replay.sample(*self.sample_args())

    def train(self, num_updates: int) -> dict[str, Any]:
        infos = []
        for _ in range(num_updates):
            batch = self.sample()
            info = self.learner.update(batch)
            self.after_update(batch, info)
            infos.append(info)
            if self.learner.updates % self.cfg.publish_every == 0:
                self.send_unawaited("params.push (publish)", self.publish())
        self.check_unawaited()
        means = {k: float(np.mean([i[k] for i in infos])) for k, v in infos[0].items()
                 if isinstance(v, float)}
        return {**means, "updates": self.learner.updates}

    def train_counted(self, num_updates: int) -> Counted:
        """`train`, as the attendee's driver loop (pieces=, notebook 05) adds it up: the
        updates done, carrying the whole result."""
        return Counted(num_updates, self.train(num_updates))

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

    def replay_stats(self) -> dict[str, Any]:
        """The buffer's size, inserted, sampled and their ratio (`ReplayStore.stats`)."""
        with self.lock:
            return self.replay.stats()

    # -- what an algorithm writes -----------------------------------------------------------

    @abstractmethod
    def make_learner(self, cfg, obs_dim: int, action_dim: int):
        """The plain learner (DQNLearner, SACLearner) this actor feeds."""

    def sample_args(self) -> tuple:
        """The arguments of one `ReplayStore.sample` call (Ape-X adds beta)."""
        return (self.cfg.batch_size,)

    def after_update(self, batch: dict[str, np.ndarray], info: dict[str, Any]) -> None:
        """Anything to do with an update's result (Ape-X: write the new priorities back); by
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
