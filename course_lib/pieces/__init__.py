"""The attendee's own pieces in the real trainer: one way to swap a piece in, by keyword.

    apex.ApexTrainer.train(cfg, pieces={"outbox": Outbox})                   # notebook 05's
    apex.ApexTrainer.train(cfg, pieces={"find_prefix_sum": find_prefix_sum})  # notebook 04's
    sac.SACTrainer.train(cfg, pieces={"weights_follower": WeightsFollower})   # notebook 06's

| key                | the exercise (notebook)                              | replaces          |
| ------------------ | ---------------------------------------------------- | ----------------- |
| `outbox`           | `Outbox(replay, send_every, priorities)` (05)        | `Worker.send`     |
| `weights_follower` | `WeightsFollower(ps, name, module, pull_every)` (06) | a worker's pulls  |
| `find_prefix_sum`  | `find_prefix_sum(sums, first_leaf, target)` (04)     | the learner's     |
|                    |                                                      | sum-tree descent  |
| `stratified_targets` | `stratified_targets(total, k, rng)` (04)           | its replay's draw |
| `importance_weights` | `importance_weights(probs, beta)` (04)             | its batch weights |
| `prioritized_sample` | `prioritized_sample(tree, batch_size, beta, rng)` (04): | its replay's  |
|                    | the three above assembled; replaces them all         | whole draw        |
| `explorer_epsilons`| `explorer_epsilons(n, eps, alpha)` (05)              | each explorer's   |
|                    |                                                      | epsilon           |
| `updates_allowed`  | `updates_allowed(inserted, replay_ratio, batch)` (05) | the driver's    |
|                    |                                                      | throttle          |
| `learner_chunks`   | `learner_chunks(due, submitted, in_flight, chunk)`   | the driver's      |
|                    | (05, find the bug)                                   | learner calls     |
| `drive`            | `drive(explorers, learner, allowed, chunks,          | the driver's      |
|                    | env_steps)` (05, assemble)                           | `ray.wait` loop   |
| `versioned_weights`| `VersionedWeights` actor (03), `train_with_param_server` | its server     |
| `cached_weights`   | `CachedWeights().get(ps, name)` (03)                 | a worker's pull   |
| `prefetched_weights`| `PrefetchedWeights(ps, name).latest()` (03)         | a worker's pull   |
| `average_gradients`| `average_gradients(grads_list)` (03), `sync_sgd`     | the mean          |
| `worker_step`      | `worker_step(ps, cache, compute_gradients, lr)` (03), | the driver's loop |
|                    | `async_sgd`: each data worker pulls, computes, pushes |                   |
| `squashed_log_prob` | `squashed_log_prob(u, mean, log_std)` (06)          | the SAC learner's |
| `soft_target`      | `soft_target(reward, terminated, ...)` (06)          | its `q_target`    |
| `polyak`           | `polyak(target, source, tau)` (06)                   | its Polyak update |
| `rollout`          | `rollout(env, actor, follower, send, num_steps,      | a SAC rollout     |
|                    | send_every, seed)` (06, assemble)                    | worker's loop     |

The driver hands the pieces to its workers and its learner (Ray pickles a class or function
defined in a notebook by value); each worker builds its own from them. Without `pieces` every
actor runs exactly as before. The notebooks pick the pieces with `exercises.yours(outbox=Outbox,
...)` (`course_lib.teaching.exercises`), which keeps those that pass their exercise's check
(`check_<key>`), so an attendee with a blank exercise still gets a working run, on
`course_lib`'s piece.

A wrong piece ends the run with one line naming it, never a hang: every call of the piece runs
on a thread of its own and is given `piece_timeout_s` seconds (`PieceError`: "your Outbox did
not return from flush() within 30 s in explorer 0"); what it raises becomes "your Outbox failed
in explorer 0, in add(): ValueError: ..."; and what it must do is checked as the actor goes (an
outbox's
`flush()` has sent every transition it was given; a follower pulled when created, at each
episode end and at least every `pull_every` steps; a descent found the slot the tree's own
descent finds; a batch has one slot per segment of the prefix sums, and its weights are
(P / P_min)^-beta; SAC's maths agrees with `course_lib`'s on the same tensors; a rollout played
the steps asked and sent every transition, `pieces.sac`).
"""

from __future__ import annotations

import queue
import threading
import weakref
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from course_lib.errors import first_line
from course_lib.failures import PieceError

#: key -> (the exercise's name, what it is)
PIECES: dict[str, tuple[str, str]] = {
    "outbox": ("Outbox", "explorer send step"),
    "weights_follower": ("WeightsFollower", "weights follower"),
    "find_prefix_sum": ("find_prefix_sum", "sum-tree descent"),
    "stratified_targets": ("stratified_targets", "stratified targets"),
    "importance_weights": ("importance_weights", "importance weights"),
    "prioritized_sample": ("prioritized_sample", "prioritized sample"),
    "explorer_epsilons": ("explorer_epsilons", "explorers' epsilons"),
    "updates_allowed": ("updates_allowed", "driver's throttle"),
    "learner_chunks": ("learner_chunks", "driver's learner calls"),
    "versioned_weights": ("VersionedWeights", "parameter server"),
    "cached_weights": ("CachedWeights", "pull if newer"),
    "prefetched_weights": ("PrefetchedWeights", "prefetched pull"),
    "average_gradients": ("average_gradients", "gradient average"),
    "worker_step": ("worker_step", "asynchronous worker step"),
    "squashed_log_prob": ("squashed_log_prob", "squashed log-prob"),
    "soft_target": ("soft_target", "soft Bellman target"),
    "polyak": ("polyak", "Polyak target update"),
    "rollout": ("rollout", "rollout worker's loop"),
    "drive": ("drive", "driver's loop"),
}


def check_keys(pieces: dict[str, Any]) -> None:
    """ValueError (one line) for a key that names no piece."""
    for key in pieces:
        if key not in PIECES:
            raise ValueError(f"pieces: unknown piece {key!r}; the pieces are "
                             f"{', '.join(map(repr, PIECES))}")


@dataclass
class Given:
    """The attendee's pieces, as one actor gets them, and its name in messages ("explorer 0",
    "the learner"); each method builds the actor's piece from them, or None if not given."""

    pieces: dict[str, Any]
    where: str
    timeout_s: float

    def outbox(self, replay, send_every: int, priorities) -> SentOutbox | None:
        if "outbox" not in self.pieces:
            return None
        return SentOutbox(Guarded("outbox", self), replay, send_every, priorities)

    def follower(self, ps, name: str, module, pull_every: int) -> Follower | None:
        if "weights_follower" not in self.pieces:
            return None
        return Follower(Guarded("weights_follower", self), ps, name, module, pull_every)

    def sampling(self, replay) -> None:
        """Make the prioritized buffer of the `ReplayStore` `replay` draw its batches through
        the attendee's replay pieces (`course_lib.pieces.replay`; nothing without any)."""
        from course_lib.pieces.replay import install

        install(self, replay.buffer)

    def epsilon(self, index: int, n: int, eps: float, alpha: float) -> float | None:
        """Explorer `index`'s epsilon from the attendee's `explorer_epsilons` (05), if given."""
        if "explorer_epsilons" not in self.pieces:
            return None
        return explorer_epsilon(Guarded("explorer_epsilons", self), index, n, eps, alpha)

    def throttle(self, cfg) -> Throttle | None:
        """The driver's throttle from the attendee's `updates_allowed` (05), if given."""
        if "updates_allowed" not in self.pieces:
            return None
        if not hasattr(cfg, "replay_ratio"):
            raise ValueError("pieces: updates_allowed needs a replay ratio (Ape-X); this "
                             "trainer sets updates per transition (utd_ratio)")
        return Throttle(Guarded("updates_allowed", self), cfg.replay_ratio, cfg.batch_size)

    def drive(self):
        """The driver's loop from the attendee's `drive` (05), or None: see
        `course_lib.pieces.drive.Drive`."""
        if "drive" not in self.pieces:
            return None
        from course_lib.pieces.drive import Drive

        return Drive(Guarded("drive", self))

    def chunks(self, chunk: int, most: int) -> Chunks | None:
        """The driver's learner calls from the attendee's `learner_chunks` (05), if given."""
        if "learner_chunks" not in self.pieces:
            return None
        return Chunks(Guarded("learner_chunks", self), chunk, most)

    def worker_pull(self, ps, index: int):
        """Rollout worker `index`'s pull-if-newer from the attendee's `CachedWeights` or
        `PrefetchedWeights` (notebook 03), or None: see `course_lib.pieces.param`."""
        from course_lib.pieces.param import worker_pull

        return worker_pull(self, ps, index)

    def average(self):
        """The attendee's `average_gradients` (notebook 03), checked, or None."""
        from course_lib.pieces.param import Averaged

        return Averaged(Guarded("average_gradients", self)) if (
            "average_gradients" in self.pieces) else None

    def worker_step(self, ps, compute_gradients, lr: float):
        """A data worker's step from the attendee's `worker_step` (notebook 03), or None."""
        from course_lib.pieces.param import stepper

        return stepper(self, ps, compute_gradients, lr) if "worker_step" in self.pieces else None

    def rollout(self, worker):
        """A SAC rollout worker's loop from the attendee's `rollout` (06), or None: see
        `course_lib.pieces.sac.Rollout`."""
        if "rollout" not in self.pieces:
            return None
        from course_lib.pieces.sac import Rollout

        return Rollout(Guarded("rollout", self), worker)

    def sac_maths(self, learner) -> None:
        """Make the `SACLearner` `learner` call the attendee's `squashed_log_prob`,
        `soft_target` and `polyak`, those given, each checked at every call (nothing without)."""
        if {"squashed_log_prob", "soft_target", "polyak"} & set(self.pieces):
            from course_lib.pieces.sac import guard_sac_maths

            guard_sac_maths(self, learner)


class PieceThread:
    """One daemon thread that runs a piece's calls in order. Not a ThreadPoolExecutor: Python
    joins an executor's threads when it exits, so one hung piece would keep the process (a
    kernel, a test run, an actor) from ever exiting; a daemon thread is left behind instead."""

    def __init__(self, name: str):
        calls: queue.SimpleQueue = queue.SimpleQueue()
        self.calls = calls
        threading.Thread(target=self._serve, args=(calls,), name=name, daemon=True).start()
        # the thread ends with its owner; not at exit, when waking it would free objects
        # (torch tensors) while the interpreter shuts down
        weakref.finalize(self, calls.put, None).atexit = False

    @staticmethod
    def _serve(calls: queue.SimpleQueue) -> None:
        while (call := calls.get()) is not None:
            future, fn, args = call
            call = None                                  # hold nothing between calls
            try:
                future.set_result(fn(*args))
            except BaseException as err:                 # handed to the caller, as a pool does
                future.set_exception(err)
            future = fn = args = None

    def submit(self, fn, *args) -> Future:
        future: Future = Future()
        self.calls.put((future, fn, args))
        return future


class Guarded:
    """Builds and calls the attendee's piece `key`, each call on one thread of its own with a
    time limit, so that a failure or a hang becomes a `PieceError` naming the piece."""

    def __init__(self, key: str, given: Given):
        self.cls, self.given = given.pieces[key], given   # a class, or a function
        self.name = PIECES[key][0]
        self.pool = PieceThread(self.name)
        self.obj = None

    def build(self, *args) -> None:
        self.obj = self.call("__init__", self.cls, *args)

    def method(self, name: str, *args):
        return self.call(f"{name}()", getattr(self.obj, name), *args)

    def call(self, what: str, fn, *args, passthrough: tuple[type, ...] = ()):
        """fn(*args) on the piece's thread, within the time limit; what it raises becomes a
        `PieceError` naming the piece, but for `passthrough` errors (not the piece's fault:
        a Ray call it made failed because another part did), raised as they are."""
        future = self.pool.submit(fn, *args)
        try:
            return future.result(timeout=self.given.timeout_s)
        except TimeoutError:
            raise PieceError(f"your {self.name} did not return from {what} within "
                             f"{self.given.timeout_s:g} s in {self.given.where} "
                             "(piece_timeout_s)") from None
        except (PieceError, *passthrough):
            raise
        except Exception as err:
            raise PieceError(f"your {self.name} failed in {self.given.where}, in {what}: "
                             f"{first_line(err)}") from None

    def broke(self, contract: str) -> PieceError:
        return PieceError(f"your {self.name} broke its contract in {self.given.where}: "
                          f"{contract}")


from course_lib.pieces.apex import Chunks, Throttle, explorer_epsilon  # noqa: E402
from course_lib.pieces.guards import Follower, SentOutbox, steps_per_pull  # noqa: E402,F401
