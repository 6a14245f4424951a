"""What the distributed drivers (Ape-X, SAC) share: chunks of work in flight, `ray.wait` on
whichever finishes first, one evaluation per iteration, logical CPUs shared out, a clean end.

A driver subclasses `Driver`, starts its actors, and writes three methods:

| method        | does                                                                     |
| ------------- | ------------------------------------------------------------------------ |
| `_schedule()` | submits the work that may run now: `self.tasks[ref] = (role, index)`     |
| `_book(ref)`  | records a finished task; returns the result if it was the evaluation     |
| `_actors()`   | every actor it started, to kill at the end                               |

`train_with(DriverClass, config, ...)` is then the algorithm's whole `train` function.
"""

from __future__ import annotations

import math
import os
import time
from abc import ABC, abstractmethod
from typing import Any

import numpy as np
import ray

from course_lib.results import load_checkpoint, run_training


class Driver(ABC):
    """The loop of a driver that hands out work and never waits on one particular actor."""

    algo = ""
    tasks: dict[ray.ObjectRef, tuple[str, int]]   # in flight: (role, actor index)

    def _running(self, role: str, index: int = 0) -> int:
        """How many tasks of `role` (for actor `index`) are in flight."""
        return sum(1 for r, i in self.tasks.values() if (r, i) == (role, index))

    def _train_for(self, seconds: float, evaluation: ray.ObjectRef) -> tuple[Any, float]:
        """Hand out work and book what finishes for `seconds`, and at least until the
        `evaluation` task is back; returns (its result, the seconds it took)."""
        t0 = time.perf_counter()
        self.tasks[evaluation] = ("eval", 0)
        result = None
        while result is None or time.perf_counter() - t0 < seconds:
            self._schedule()
            if not self.tasks:
                break
            left = max(0.0, seconds - (time.perf_counter() - t0))
            done, _ = ray.wait(list(self.tasks), num_returns=1,
                               timeout=None if result is None else left)
            for ref in done:
                result = self._book(ref) or result
        return result, time.perf_counter() - t0

    def _drain(self, role: str = "learn") -> None:
        """Wait for (and book) every task of `role` in flight, e.g. before a checkpoint, so
        that the learner's state matches the counters."""
        for ref, (r, _) in list(self.tasks.items()):
            if r == role:
                ray.wait([ref])
                self._book(ref)

    def get_weights(self) -> dict[str, np.ndarray]:
        return ray.get(self.learner.get_weights.remote())

    def close(self, timeout_s: float = 10.0) -> None:
        """Let the calls under way finish (a second or so), then kill the actors. Killing an
        actor in the middle of a call would make Ray retry the call, and say so."""
        if self.tasks:
            ray.wait(list(self.tasks), num_returns=len(self.tasks), timeout=timeout_s)
        for actor in self._actors():
            ray.kill(actor)
        self.tasks.clear()

    # -- what a subclass writes ----------------------------------------------------------

    @abstractmethod
    def _schedule(self) -> None:
        """Submit the work that may run now: `self.tasks[ref] = (role, index)`."""

    @abstractmethod
    def _book(self, ref: ray.ObjectRef):
        """Record a finished task; return its result if it was the evaluation."""

    @abstractmethod
    def _actors(self) -> list:
        """Every actor this driver started (killed by `close`)."""

    def state(self) -> dict[str, Any]:
        """A checkpoint; first waits for the learner's queued updates, so that the learner's
        state matches the counters. Needs `algo`, `cfg`, `counters`, `learner` (an actor
        with `state_dict`) and `updates_submitted`."""
        self._drain("learn")
        self.updates_submitted = self.counters["learner_updates"]
        return {"algo": self.algo, "env_id": self.cfg.env_id, "config": self.cfg.to_dict(),
                "iteration": self.counters["iteration"], "counters": dict(self.counters),
                "learner": ray.get(self.learner.state_dict.remote())}


def share_cpus(total_cpus: float, learner_cpus: float, num_workers: int,
               max_worker_cpus: float, small: float = 0.1) -> tuple[float, float]:
    """(CPUs of each small actor, CPUs of each worker) when the learner takes `learner_cpus`,
    two small actors (replay, evaluator) take `small` each and the workers share the rest,
    at most `max_worker_cpus` each. ValueError if the learner and the small actors do not fit.

    Logical CPUs only decide where actors may run (Ray would otherwise wait forever for an
    actor it cannot place); the operating system shares the real cores between all of them,
    so fractions are how a learner, a replay actor and several workers fit on a 2-core laptop.
    """
    free = total_cpus - learner_cpus - 2 * small
    if free <= 0:
        raise ValueError(f"the Ray cluster has {total_cpus:g} CPUs: too few for the learner "
                         f"({learner_cpus:g}) and the replay and evaluation actors")
    return small, math.floor(min(max_worker_cpus, free / num_workers) * 1000) / 1000


def mean_or_nan(values) -> float:
    """The mean, or NaN for no values (a progress row's "nothing measured this time")."""
    return float(np.mean(values)) if len(values) else math.nan


def train_with(driver_class, config, progress=None, run=None, restore=None):
    """Run `driver_class(config, restore)` through `results.run_training`; a TrainResult.

    `progress`: True for a live display (notebook) or bar (terminal), or a callable given each
    row. `run`: a `results.Run` that logs rows and writes checkpoints. `restore`: a checkpoint
    (path or loaded dict) to continue from; its algorithm and env must match.
    """
    if isinstance(restore, str | os.PathLike):
        restore = load_checkpoint(restore, algo=driver_class.algo, env_id=config.env_id)
    return run_training(driver_class(config, restore), config, progress=progress, run=run)
