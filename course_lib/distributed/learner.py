"""A distributed run's learner actor, which holds the replay buffer, and its evaluator.

    workers --add(batch, priorities)--> LearnerActor: replay buffer (its own thread)
                                          train(n): n x [draw -> update], and after each
                                            batches_per_draw of them: after_updates
                                          publish every publish_every updates --> parameter server
    driver --snapshot()--> state + weights --> Evaluator.evaluate(weights, episodes, seed)

An algorithm subclasses `LearnerActor`, decorates it with `remote_learner` and writes
`make_learner` (and `after_updates`, `sample_args`, `replay_draw` if it needs them).
"""

from __future__ import annotations

import dataclasses
import threading
from abc import ABC, abstractmethod
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np
import ray
import torch

from course_lib.distributed.worker import POLICY, pin_this_process
from course_lib.errors import UnawaitedCallError, first_line
from course_lib.nets import set_weights
from course_lib.ray_tools import get_result, reserved_device
from course_lib.replay.server import ReplayStore

if TYPE_CHECKING:
    from course_lib.distributed.config import DistributedConfig, Slots


@dataclasses.dataclass
class TrainReport:
    """What one `LearnerActor.train` call did: the driver books it."""

    updates: int                      # the learner's update count after the call
    means: dict[str, float]           # the mean of each scalar the updates reported


@dataclasses.dataclass
class LearnerSnapshot:
    """The learner at one moment, for the driver to evaluate and save."""

    state: dict[str, Any]             # the learner's state_dict (what a checkpoint holds)
    weights: dict[str, np.ndarray]    # the policy's weights (what evaluation plays)
    updates: int                      # the updates behind them


#: the decorator of a learner actor class: Ray runs its `add` calls on a second thread (the
#: "replay" concurrency group), so workers' batches land while `train` runs on the main one
remote_learner = ray.remote(concurrency_groups={"replay": 1})


class LearnerActor(ABC):
    """A learner (DQNLearner, SACLearner) with the replay buffer in its own process.

    Workers send their batches straight here (`add`); `train(num_updates)` draws its batches
    locally, runs that many updates and reports the mean of each scalar they return. Keeping
    the buffer beside the learner is what RLlib's Ape-X did (replay shards on the learner's
    node) and what SEED RL and TorchRL do: a sample or a priority update is a function call,
    not a Ray round trip and a copy through the object store, and no separate replay process
    competes for the cores. A lock keeps the two threads from touching the buffer at once;
    torch releases the GIL while it computes, so an add rarely waits for an update.

    The learner trains on the device it reserved (`ray_tools.reserved_device`): a GPU only if
    the driver asked Ray for one (`learner_gpus`).

    Calls the learner does not wait for (`publish`) go through `send_unawaited`: their refs
    are kept and the finished ones checked without blocking, so an error of one surfaces at
    the next call or at the end of the `train` task (`UnawaitedCallError`, one line naming
    the call) instead of never.
    """

    def __init__(self, cfg: DistributedConfig, dims: tuple[int, int], prefix: str,
                 state: dict | None, seed: int, replay: dict[str, Any], slots: Slots):
        torch.set_num_threads(1)
        torch.manual_seed(seed)
        if cfg.pin_learner:
            pin_this_process(learner=True)
        self.cfg = cfg
        self.replay = ReplayStore(**replay, draw=self.replay_draw(slots))
        self.lock = threading.Lock()             # adds (replay thread) against samples
        self.params = ray.get_actor(f"{prefix}:parameter server")
        self.learner = self.make_learner(cfg, *dims, slots, reserved_device())
        if state is not None:
            self.learner.load_state_dict(state)
        self.unawaited: list[tuple[str, ray.ObjectRef]] = []   # (call, ref) not checked yet
        # sample_ahead: one thread draws the next batches and writes priorities back, in the
        # order asked, while torch computes the updates; on 2 cores it measured slower than
        # drawing in turn (the thread and the update share the cores and the GIL:
        # bench/learner_feed.py)
        self.sampler = ThreadPoolExecutor(1, "sampler") if cfg.sample_ahead else None
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

    def draw_batches(self, count: int) -> list[dict[str, np.ndarray]]:
        """The next `count` batches to train on, drawn from the local buffer at once."""
        with self.lock:
            return self.replay.sample_many(count, *self.sample_args())

    def train(self, num_updates: int) -> TrainReport:
        """`num_updates` updates, each on a fresh batch; publishes every `publish_every`.

        The batches are drawn `batches_per_draw` at a time, and what the updates return is
        handed back for all of them at once (`after_updates`): one pass over the buffer per
        group instead of one per update. Per update, a draw or a write-back is a few numpy
        calls on 64 rows, and their fixed cost, with the buffer's memory pushing the network's
        out of the core's cache, made the learner's loop markedly slower than its updates
        alone (`bench/overhead.py` times both; `bench/learner_feed.py`, the system). The
        price, for a prioritized buffer: an update's new priorities reach the buffer up to
        `batches_per_draw - 1` updates late, and until then a transition whose priority is
        high stays as likely to be drawn again, so a large count can cost Ape-X more env steps
        to its goal than the draws save. The default is a few, untested against env steps to
        the goal by any benchmark here (`bench/learner_feed.py` measures only the speed).

        With `sample_ahead`, the next group is drawn on the sampler thread while this one's
        updates run, and the priorities are written back there too: a draw then sees them one
        group later still (up to `2 * batches_per_draw - 1` updates late).
        """
        infos: list[dict[str, Any]] = []
        sizes = [min(self.cfg.batches_per_draw, num_updates - done)
                 for done in range(0, num_updates, self.cfg.batches_per_draw)]
        ahead: Future | None = None
        written: list[Future] = []
        for i, size in enumerate(sizes):
            batches = ahead.result() if ahead is not None else self.draw_batches(size)
            if self.sampler is not None and i + 1 < len(sizes):   # drawn while these train
                ahead = self.sampler.submit(self.draw_batches, sizes[i + 1])
            for batch in batches:
                infos.append(self.learner.update(batch))
                if self.learner.updates % self.cfg.publish_every == 0:
                    self.send_unawaited("params.push (publish)", self.publish())
            if self.sampler is not None:
                written.append(self.sampler.submit(self.after_updates, batches, infos[-size:]))
            else:
                self.after_updates(batches, infos[-size:])
        for future in written:          # every write-back done (or its error raised) before
            future.result()             # the driver books this call
        self.check_unawaited()
        means = {k: float(np.mean([i[k] for i in infos])) for k, v in
                 (infos[0].items() if infos else ()) if isinstance(v, float)}
        return TrainReport(self.learner.updates, means)

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

    def snapshot(self) -> LearnerSnapshot:
        """The learner now, for the driver; its weights are published again too, so that a
        parameter server Ray restarted holds them within one iteration, due updates or not."""
        self.send_unawaited("params.push (publish)", self.publish())
        return LearnerSnapshot(self.learner.state_dict(), self.learner.get_weights(),
                               self.learner.updates)

    def replay_stats(self) -> dict[str, Any]:
        """The buffer's size, inserted, sampled and their ratio (`ReplayStore.stats`)."""
        with self.lock:
            return self.replay.stats()

    # -- what an algorithm writes -----------------------------------------------------------

    @abstractmethod
    def make_learner(self, cfg, obs_dim: int, action_dim: int, slots: Slots, device: str):
        """The plain learner (DQNLearner, SACLearner) this actor feeds, on `device`, with the
        algorithm's slots of the learner filled from `slots`."""

    def replay_draw(self, slots: Slots):
        """The prioritized replay's draw from `slots` (Ape-X), or None: the buffer's own."""
        return None

    def sample_args(self) -> tuple:
        """The arguments of one `ReplayStore.sample` call (Ape-X adds beta)."""
        return (self.cfg.batch_size,)

    def after_updates(self, batches: list[dict[str, np.ndarray]],
                      infos: list[dict[str, Any]]) -> None:
        """Anything to do with the results of the updates on one draw's `batches` (Ape-X:
        write their new priorities back); by default, nothing."""
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
