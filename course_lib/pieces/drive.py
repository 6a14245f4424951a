"""Notebook 05's assembled driver loop in the real Ape-X driver: the attendee's
`drive(explorers, learner, allowed, chunks, env_steps)` runs the training of every iteration.

The notebook's stand-ins return a number from each call: an explorer's `run.remote()` the
transitions it played, the learner's `train.remote(n)` the n updates it did. The real actors
return their whole result (episode returns, restarts, losses), which the driver books. So the
driver lends the attendee's loop handles whose calls return a `Counted`: an int, which their
loop adds up, that also carries the call's whole result. What the loop is given:

| argument    | what it is in the real run                                                 |
| ----------- | -------------------------------------------------------------------------- |
| `explorers` | handles of the explorers: `run.remote()` plays `worker_chunk` env steps    |
| `learner`   | a handle of the learner: `train.remote(n)` does n updates on its replay    |
| `allowed`   | inserted -> the updates they pay for (the attendee's throttle if given)    |
| `chunks`    | the learner calls to send (the attendee's `learner_chunks` if given)       |
| `env_steps` | one round: `worker_chunk` env steps per explorer, `ROUNDS_PER_CHUNK` times |

The driver calls `drive` round after round until the iteration's snapshot is scored; between
rounds it books every call the loop made (counters, episode returns, learner means) and the
evaluations. What the guard checks after each round: no call left in flight, and the
(inserted, updates) it returned are what its calls did. A call that failed because an actor
died ends the run naming that actor, as the driver's own loop would (`failures.Parts`);
Ray's restarts of a dead explorer happen inside its call, so the loop only sees it take longer.
"""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace

import ray

from course_lib.pieces import Guarded

#: a round asks every explorer for this many chunks of `worker_chunk` env steps
ROUNDS_PER_CHUNK = 2


class Counted(int):
    """The number a call of the attendee's loop returns (env steps played, updates done),
    carrying the call's whole `result` for the driver's books."""

    def __new__(cls, value: int, result: dict):
        counted = super().__new__(cls, value)
        counted.result = result
        return counted

    def __reduce__(self):                   # Ray pickles it: keep the result
        return Counted, (int(self), self.result)


class Drive:
    """Runs the attendee's `drive` for one round of a `DistributedTrainer`'s iteration."""

    def __init__(self, piece: Guarded):
        self.piece = piece

    def round(self, trainer) -> None:
        """One call of the attendee's loop, then its calls booked as the driver's own."""
        cfg, calls = trainer.cfg, []
        stored, submitted = trainer.stored_now, trainer.updates_submitted

        def run(i: int) -> ray.ObjectRef:
            ref = trainer.workers[i].run_counted.remote(cfg.worker_chunk)
            calls.append((ref, "collect", i))
            return ref

        def train(n: int) -> ray.ObjectRef:
            ref = trainer.learner.train_counted.remote(n)
            calls.append((ref, "learn", 0))
            trainer.updates_submitted += n
            return ref

        explorers = [SimpleNamespace(run=SimpleNamespace(remote=partial(run, i)))
                     for i in range(len(trainer.workers))]
        learner = SimpleNamespace(train=SimpleNamespace(remote=train))
        chunks = trainer.chunks                      # the attendee's learner_chunks, or ours
        budget = ROUNDS_PER_CHUNK * cfg.worker_chunk * len(explorers)
        try:
            got = self.piece.call(
                "drive()", self.piece.cls, explorers, learner,
                lambda inserted: max(0, trainer.updates_due(stored + inserted) - submitted),
                chunks, budget, passthrough=(ray.exceptions.RayError,))
        except ray.exceptions.RayError as err:       # another part failed under its call
            raise self._failure(trainer, calls, err) from None
        self._check(got, calls, budget)
        for ref, role, i in calls:                   # booked as the driver's own loop does
            trainer.tasks[ref] = (role, i)
            trainer._book(ref)

    def _check(self, got, calls: list, budget: int) -> None:
        refs = [ref for ref, _, _ in calls]
        _, pending = ray.wait(refs, num_returns=len(refs), timeout=0) if refs else ([], [])
        if pending:
            raise self.piece.broke(f"it returned with {len(pending)} call(s) still in flight: "
                                   "loop until every call is booked")
        played = sum(int(ray.get(r)) for r, role, _ in calls if role == "collect")
        done = sum(int(ray.get(r)) for r, role, _ in calls if role == "learn")
        if not (isinstance(got, tuple) and len(got) == 2):
            raise self.piece.broke(f"it returned {got!r}, not (inserted, updates)")
        if tuple(got) != (played, done):
            raise self.piece.broke(f"it returned {tuple(got)}; its calls played {played:,} "
                                   f"transitions and did {done:,} updates: book every call's "
                                   "result before returning")
        if played < budget:
            raise self.piece.broke(f"its explorers played {played:,} of the {budget:,} env "
                                   "steps asked for")

    @staticmethod
    def _failure(trainer, calls: list, err: BaseException) -> BaseException:
        """The error that names the part whose call failed (the first one that did)."""
        for ref, role, i in calls:
            ready, _ = ray.wait([ref], timeout=0)
            if ready:
                try:
                    trainer._result(ref, f"{trainer.worker_name} {i}" if role == "collect"
                                    else "learner")
                except Exception as failure:         # noqa: BLE001  (the part's own error)
                    return failure
        return trainer.parts.failure(err, "the driver")
