"""The guards around notebook 03's pieces, in the keyword slots of its trainers: the
parameter server's core (`VersionedWeights`) behind course_lib's `ParameterStoreActor`
interface (`pg.train_with_param_server(ps=)`), a rollout worker's pull (`CachedWeights` or
`PrefetchedWeights`: its `make_pull=`), the synchronous average (`average_gradients`:
`data_parallel.sync_sgd(average=)`) and an asynchronous data-parallel worker's step
(`worker_step`, with the attendee's `CachedWeights` as its cache if given:
`data_parallel.async_sgd(make_step=)`). Each checks its piece's contract as the trainer goes;
a failure reaches the driver as the run's one line (`ray_tools.one_line_errors`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import ray

from course_lib.errors import UnknownNameError
from course_lib.param_server import CachedWeights
from course_lib.teaching.pieces.apex import DriverSlot
from course_lib.teaching.pieces.guard import Guarded

# -- the parameter server: the attendee's VersionedWeights ------------------------------------

@ray.remote(num_cpus=0)
class VersionedServer:
    """The attendee's `VersionedWeights` actor (`handle`) behind `ParameterStoreActor`'s interface,
    for one name: every push and pull goes to their actor, and each answer is checked (a push
    returns the next version; a pull sends the weights exactly when the caller is behind). Each
    version is `ray.put` once, as `ParameterStoreActor` does, so callers get an ObjectRef."""

    def __init__(self, handle, timeout_s: float):
        self.piece = Guarded("versioned_weights", handle, timeout_s,
                             where="the parameter server")
        self.name, self.latest, self.ref = None, 0, None

    def _ask(self, method: str, *args):
        remote = getattr(self.piece.cls, method).remote
        return self.piece.call(f"{method}()", lambda: ray.get(remote(*args)))

    def push(self, name: str, weights) -> int:
        if self.name not in (None, name):
            raise ValueError(f"pieces: versioned_weights holds one network ({self.name!r}), "
                             f"not {name!r}")
        version = self._ask("push", weights)
        if version != self.latest + 1:
            raise self.piece.broke(f"push number {self.latest + 1} returned version "
                                   f"{version!r} (each push counts the version up by one)")
        self.name, self.latest, self.ref = name, version, None
        return version

    def pull(self, name: str, known_version: int = -1):
        if name != self.name:
            raise UnknownNameError(f"no parameters named {name!r} (push first)")
        answer = self._ask("pull", known_version)
        version, weights = answer if isinstance(answer, tuple) and len(answer) == 2 else (
            None, None)
        if version != self.latest:
            raise self.piece.broke(f"pull({known_version}) returned {answer!r:.60}, not "
                                   f"(version, weights) with the newest version {self.latest}")
        if (weights is None) != (known_version == version):
            raise self.piece.broke(
                f"pull({known_version}) at version {version} sent the weights again "
                "(the caller has them: send None)" if weights is not None else
                f"pull({known_version}) at version {version} sent no weights (the caller "
                "is behind)")
        if weights is None:
            return version, None
        if self.ref is None:
            self.ref = ray.put(weights)
        return version, self.ref

    def version(self, name: str) -> int:
        return self.latest


def server(cls, timeout_s: float):
    """The `ps` of `pg.train_with_param_server`: the attendee's `VersionedWeights` actor class
    `cls`, started, behind a `VersionedServer` (both end when the last handle is dropped)."""
    if not hasattr(cls, "remote"):
        raise ValueError("pieces: versioned_weights must be a Ray actor class "
                         "(decorate VersionedWeights with @ray.remote)")
    return VersionedServer.remote(cls.remote(), timeout_s)


# -- a worker's pull: CachedWeights or PrefetchedWeights --------------------------------------

class _TracedPull:
    """The server handle a worker's pull piece is given: forwards `pull.remote` and reads the
    answers the piece was sent, in order (`newest`), keeping the weights of the newest few
    versions only (what it holds stays pinned in the object store)."""

    KEEP = 4

    def __init__(self, ps):
        self.ps, self.unread, self.last, self.sent = ps, [], None, 0
        self.copied: list[int | None] = []      # per answer read: its version if it copied
        self.copies: dict[int, dict] = {}       # version -> weights, the newest KEEP
        self.pull = self

    def remote(self, name, known_version=-1):
        self.last = self.ps.pull.remote(name, known_version)
        self.unread.append(self.last)
        self.sent += 1
        return self.last

    def newest(self) -> tuple[int, dict | None]:
        """(version, weights) of the newest answer that carried weights so far, (-1, None)."""
        while self.unread and ray.wait(self.unread[:1], timeout=0)[0]:
            version, ref = ray.get(self.unread.pop(0))
            self.copied.append(None if ref is None else version)
            if ref is not None:
                self.copies[version] = ray.get(ref)
                for old in sorted(self.copies)[:-self.KEEP]:
                    del self.copies[old]
        version = max(self.copies, default=-1)
        return version, self.copies.get(version)

    def last_ready(self) -> bool:
        return self.last is not None and bool(ray.wait([self.last], timeout=0)[0])


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[key], b[key]) for key in a)


class Cached:
    """A worker's pull built from the attendee's `CachedWeights`: `pull(ps, name, known)` (as
    `pull_weights`, for the server and name it was built with) returns (version, weights) or
    (version, None) when unchanged; checks that `get` returned the newest
    weights it was sent and never had a version it held copied again."""

    def __init__(self, piece: Guarded, ps, name: str):
        self.piece, self.ps, self.name, self.held = piece, _TracedPull(ps), name, -1
        piece.build()

    def pull(self, ps, name: str, known_version: int) -> tuple[int, dict | None]:
        asked, read = self.ps.sent, len(self.ps.copied)
        weights = self.piece.method("get", self.ps, self.name)
        if self.ps.sent == asked:
            raise self.piece.broke("get() did not ask the server (it would keep old weights)")
        version, newest = self.ps.newest()
        if self.held in self.ps.copied[read:]:
            raise self.piece.broke(f"version {self.held} was copied again although it held "
                                   "it (pull with the version you hold)")
        if weights is None or not _same(weights, newest):
            raise self.piece.broke(f"get() did not return the newest weights (version "
                                   f"{version})")
        changed, self.held = version != self.held, version
        return version, (weights if changed else None)


class Prefetched:
    """A worker's pull built from the attendee's `PrefetchedWeights`: `pull(ps, name, known)`
    calls
    `latest()` and checks that, once the last pull sent was answered, `latest()` sent a new one
    (else no newer weights can ever arrive); (version, weights) of what it returned."""

    def __init__(self, piece: Guarded, ps, name: str):
        self.piece, self.ps, self.held = piece, _TracedPull(ps), -1
        piece.build(self.ps, name)

    def pull(self, ps, name: str, known_version: int) -> tuple[int, dict | None]:
        answered, asked = self.ps.last_ready(), self.ps.sent
        weights = self.piece.method("latest")
        if answered and self.ps.sent == asked:
            raise self.piece.broke("its pull was answered and latest() sent no new one: no "
                                   "newer weights can arrive (weights stop arriving)")
        if weights is None:
            return known_version, None
        version, newest = self.ps.newest()
        matches = [v for v, w in self.ps.copies.items() if _same(weights, w)]
        if not matches:
            raise self.piece.broke("latest() returned weights the server never sent")
        changed, self.held = max(matches) != self.held, max(matches)
        return self.held, (weights if changed else None)


@dataclass(frozen=True)
class PullFactory:
    """The `make_pull(ps, index)` slot of `pg.train_with_param_server`, built in each rollout
    worker from the attendee's `CachedWeights` and/or `PrefetchedWeights`: with both, the
    workers take turns (even ones cached, odd ones prefetched). Returns a drop-in for
    `pull_weights`."""

    pieces: dict
    timeout_s: float

    def __call__(self, ps, index: int):
        kinds = [key for key in ("cached_weights", "prefetched_weights") if key in self.pieces]
        key = kinds[index % len(kinds)]
        piece = Guarded(key, self.pieces[key], self.timeout_s, where=f"rollout worker {index}")
        return (Cached if key == "cached_weights" else Prefetched)(piece, ps, "policy").pull


def make_pull(pieces: dict, timeout_s: float) -> PullFactory:
    return PullFactory({k: v for k, v in pieces.items()
                        if k in ("cached_weights", "prefetched_weights")}, timeout_s)


# -- data parallel: the average, and an asynchronous worker's step ----------------------------

class Averaged(DriverSlot):
    """The synchronous loop's average built from the attendee's `average_gradients`; checks
    each result against the element-wise mean."""

    def __call__(self, grads_list: list[dict]) -> dict:
        mean = self.piece.call("average_gradients()", self.piece.cls, grads_list)
        for name in grads_list[0]:
            expected = np.mean([grads[name] for grads in grads_list], axis=0)
            got = mean.get(name) if isinstance(mean, dict) else None
            if got is None or np.shape(got) != expected.shape or not np.allclose(got, expected):
                raise self.piece.broke(f"entry {name!r} is not the element-wise mean of the "
                                       f"{len(grads_list)} workers' gradients")
        return mean


class _TracedServer(_TracedPull):
    """`_TracedPull` that also forwards and counts `push_gradients.remote`."""

    def __init__(self, ps):
        super().__init__(ps)
        self.push_gradients, self.pushes = _Pusher(self), 0


class _Pusher:
    def __init__(self, traced: _TracedServer):
        self.traced = traced

    def remote(self, name, grads, lr):
        self.traced.pushes += 1
        self.traced.pushed = self.traced.ps.push_gradients.remote(name, grads, lr)
        return self.traced.pushed


class Stepper:
    """An asynchronous data-parallel worker's step built from the attendee's `worker_step(ps,
    cache, compute_gradients, lr)`; each call checks that the step computed one gradient, on the
    newest weights it pulled, and pushed it once; returns the gradient's staleness (updates
    applied by others while it was computed)."""

    def __init__(self, piece: Guarded, ps, cache, compute_gradients, lr: float):
        self.piece, self.ps, self.cache = piece, _TracedServer(ps), cache
        self.compute, self.lr, self.seen = compute_gradients, lr, []

    def _gradients(self, weights):
        self.seen.append(weights)
        return self.compute(weights)

    def __call__(self) -> int:
        pushes, self.seen = self.ps.pushes, []
        self.piece.call("worker_step()", self.piece.cls, self.ps, self.cache, self._gradients,
                        self.lr)
        version, newest = self.ps.newest()
        if len(self.seen) != 1 or self.ps.pushes != pushes + 1:
            raise self.piece.broke(f"one step computed {len(self.seen)} gradient(s) and pushed "
                                   f"{self.ps.pushes - pushes} (one of each)")
        if newest is None or not _same(self.seen[0], newest):
            raise self.piece.broke("the gradient was not computed on the newest weights pulled")
        return ray.get(self.ps.pushed) - 1 - version


def average(fn, timeout_s: float) -> Averaged:
    return Averaged("average_gradients", fn, timeout_s)


@dataclass(frozen=True)
class StepFactory:
    """The `make_step(ps, compute_gradients, lr)` slot of `data_parallel.async_sgd`, built in
    each data worker: the attendee's `worker_step` (or course_lib's), with their
    `CachedWeights` as its cache if given (course_lib's otherwise)."""

    pieces: dict
    timeout_s: float

    def __call__(self, ps, compute_gradients, lr: float) -> Stepper:
        from course_lib.data_parallel import worker_step

        cache = CachedWeights()
        if "cached_weights" in self.pieces:
            piece = Guarded("cached_weights", self.pieces["cached_weights"], self.timeout_s)
            piece.build()
            cache = piece.obj
        step = Guarded("worker_step", self.pieces.get("worker_step", worker_step),
                       self.timeout_s)
        return Stepper(step, ps, cache, compute_gradients, lr)


def make_step(pieces: dict, timeout_s: float) -> StepFactory:
    return StepFactory({k: v for k, v in pieces.items()
                        if k in ("worker_step", "cached_weights")}, timeout_s)
