"""What every guard of an attendee's piece stands on: `PieceError`, the table of pieces
(`PIECES`), `Guarded` (a piece's calls on a thread of their own, with a time limit) and
`Factory` (a slot's factory, pickled to the actor that fills the slot). See
`course_lib.teaching.pieces`.
"""

from __future__ import annotations

import queue
import threading
import weakref
from concurrent.futures import Future
from dataclasses import dataclass

import ray

from course_lib.errors import OneLineError, first_line


class PieceError(OneLineError):
    """An attendee's piece failed, hung or broke its contract; the message names the piece
    and where it ran, and is the run's one line."""


@dataclass(frozen=True)
class Piece:
    """One exercise's piece: the name the notebook gives it, what it is, and its slot."""

    name: str                         # the class or function the attendee writes
    what: str                         # what it is, in the line `yours` prints
    slots: tuple[str, ...]            # the slot (or keyword) it fills, in whichever trainer


#: key -> the piece (its slot is a field of the trainer's Slots, or a keyword of a function)
PIECES: dict[str, Piece] = {
    "outbox": Piece("Outbox", "explorer send step", ("outbox",)),
    "weights_follower": Piece("WeightsFollower", "weights follower", ("follower",)),
    "explorer_epsilons": Piece("explorer_epsilons", "explorers' epsilons", ("epsilons",)),
    "updates_allowed": Piece("updates_allowed", "driver's throttle", ("updates_due",)),
    "learner_chunks": Piece("learner_chunks", "driver's learner calls", ("learner_chunks",)),
    "drive": Piece("drive", "driver's loop", ("round",)),
    "find_prefix_sum": Piece("find_prefix_sum", "sum-tree descent", ("draw",)),
    "stratified_targets": Piece("stratified_targets", "stratified targets", ("draw",)),
    "importance_weights": Piece("importance_weights", "importance weights", ("draw",)),
    "prioritized_sample": Piece("prioritized_sample", "prioritized sample", ("draw",)),
    "squashed_log_prob": Piece("squashed_log_prob", "squashed log-prob", ("squashed_log_prob",)),
    "soft_target": Piece("soft_target", "soft Bellman target", ("q_target",)),
    "polyak": Piece("polyak", "Polyak target update", ("polyak_update",)),
    "actor_step": Piece("actor_step", "actor's gradient step", ("actor_step",)),
    "rollout": Piece("rollout", "rollout worker's loop", ("rollout",)),
    "versioned_weights": Piece("VersionedWeights", "parameter server", ("ps",)),
    "cached_weights": Piece("CachedWeights", "pull if newer", ("make_pull", "make_step")),
    "prefetched_weights": Piece("PrefetchedWeights", "prefetched pull", ("make_pull",)),
    "average_gradients": Piece("average_gradients", "gradient average", ("average",)),
    "worker_step": Piece("worker_step", "asynchronous worker step", ("make_step",)),
}


def check_keys(pieces) -> None:
    """ValueError (one line) for a key that names no piece."""
    for key in pieces:
        if key not in PIECES:
            raise ValueError(f"pieces: unknown piece {key!r}; the pieces are "
                             f"{', '.join(map(repr, PIECES))}")


def here() -> str:
    """Where this code runs, as messages name it: "explorer 0", "the learner", "the driver".
    A run's actors are named `prefix:part` (`distributed.run_actors.RunActors`)."""
    context = ray.get_runtime_context() if ray.is_initialized() else None
    if context is None or context.get_actor_id() is None:
        return "the driver"
    name = context.get_actor_name()
    if not name:                         # an actor of notebook 02-03's trainers
        cls = context.current_actor._ray_actor_creation_function_descriptor.class_name
        return f"a {cls} actor"
    part = name.partition(":")[2] or name
    return part if any(ch.isdigit() for ch in part) else f"the {part}"


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
    """Builds and calls the attendee's piece `key` (`piece`: their class or function), each
    call on one thread of its own with a time limit, so that a failure or a hang becomes a
    `PieceError` naming the piece and where it ran (`here()` unless `where` is given)."""

    def __init__(self, key: str, piece, timeout_s: float, where: str | None = None):
        self.cls, self.timeout_s = piece, timeout_s
        self.name, self.where = PIECES[key].name, where or here()
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
            return future.result(timeout=self.timeout_s)
        except TimeoutError:
            raise PieceError(f"your {self.name} did not return from {what} within "
                             f"{self.timeout_s:g} s in {self.where} (timeout_s)") from None
        except (PieceError, *passthrough):
            raise
        except Exception as err:
            raise PieceError(f"your {self.name} failed in {self.where}, in {what}: "
                             f"{first_line(err)}") from None

    def broke(self, contract: str) -> PieceError:
        return PieceError(f"your {self.name} broke its contract in {self.where}: {contract}")


@dataclass(frozen=True)
class Factory:
    """A slot's factory: Ray pickles it to the actor that fills the slot (the attendee's class
    or function travels by value), where `build(Guarded(...), *args)` makes the part."""

    key: str
    piece: object
    timeout_s: float
    build: object                    # (guarded, *args) -> the part

    def __call__(self, *args):
        return self.build(Guarded(self.key, self.piece, self.timeout_s), *args)

