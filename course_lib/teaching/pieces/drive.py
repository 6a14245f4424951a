"""Notebook 05's assembled driver loop in the real Ape-X driver: the attendee's
`drive(explorers, learner, allowed, chunks, env_steps)` fills the driver's `round` slot.

The notebook's stand-ins return a number from each call: an explorer's `run.remote()` the
transitions it played, the learner's `train.remote(n)` the n updates it did. The real actors
return whole reports (episode returns, restarts, losses), which the driver books. So the
attendee's loop gets handles whose calls run the real method inside the actor
(`__ray_call__`) and return a `Counted`: an int, which their loop adds up, that carries the
report and answers for it. What the loop is given:

| argument    | what it is in the real run                                                 |
| ----------- | -------------------------------------------------------------------------- |
| `explorers` | handles of the explorers: `run.remote()` plays `worker_chunk` env steps    |
| `learner`   | a handle of the learner: `train.remote(n)` does n updates on its replay    |
| `allowed`   | inserted -> the updates they pay for (the attendee's throttle if given)    |
| `chunks`    | the learner calls to send (the attendee's `learner_chunks` if given)       |
| `env_steps` | one round: `worker_chunk` env steps per explorer, `ROUNDS_PER_CHUNK` times |

The driver calls `drive` round after round until the iteration's snapshot is scored; between
rounds it books every call the loop made and the evaluations. What the guard checks: each
`train.remote(n)` asks for 1 or more updates, and no more than the transitions in so far pay
for; the explorers played side by side (with two or more, at least two calls in flight at
once); no call left in flight when it returns; the (inserted, updates) it returns are what
its calls did. A call that failed because an actor died ends the run naming that actor.
"""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace

import ray

from course_lib.distributed import Call, Role
from course_lib.teaching.pieces.guard import Guarded

#: a round asks every explorer for this many chunks of `worker_chunk` env steps
ROUNDS_PER_CHUNK = 2


class Counted(int):
    """The number a call of the attendee's loop returns (env steps played, updates done),
    carrying the call's whole `report` for the driver's books: an attribute it does not have
    is the report's."""

    def __new__(cls, value: int, report):
        counted = super().__new__(cls, value)
        counted.report = report
        return counted

    def __getattr__(self, name):
        return getattr(self.__dict__["report"], name)

    def __reduce__(self):                   # Ray pickles it: keep the report
        return Counted, (int(self), self.report)


def counted_run(worker, num_steps: int) -> Counted:
    """Inside a worker: `run`, counted in env steps played."""
    report = worker.run(num_steps)
    return Counted(report.env_steps, report)


def counted_train(learner, num_updates: int) -> Counted:
    """Inside the learner actor: `train`, counted in updates done."""
    return Counted(num_updates, learner.train(num_updates))


class DriveRound:
    """The driver's round from the attendee's `drive`: one call of their loop, then their
    calls booked as the driver's own."""

    def __init__(self, piece: Guarded, driver):
        self.piece, self.driver = piece, driver

    def run(self, wait_s: float) -> None:
        driver, cfg, calls = self.driver, self.driver.cfg, []
        stored, submitted = driver.stored_now, driver.updates_submitted
        self.asked = self.most_in_flight = 0

        def allowed(inserted: int) -> int:
            return max(0, driver.updates_due(stored + inserted) - submitted)

        def run(i: int) -> ray.ObjectRef:
            ref = driver.workers[i].__ray_call__.remote(counted_run, cfg.worker_chunk)
            calls.append((ref, Call(Role.COLLECT, i)))
            collects = [r for r, call in calls if call.role is Role.COLLECT]
            _, pending = ray.wait(collects, num_returns=len(collects), timeout=0)
            self.most_in_flight = max(self.most_in_flight, len(pending))
            return ref

        def train(n) -> ray.ObjectRef:
            self.check_train(n, calls, allowed)
            ref = driver.learner_actor.__ray_call__.remote(counted_train, n)
            calls.append((ref, Call(Role.LEARN)))
            driver.updates_submitted += n
            return ref

        explorers = [SimpleNamespace(run=SimpleNamespace(remote=partial(run, i)))
                     for i in range(len(driver.workers))]
        learner = SimpleNamespace(train=SimpleNamespace(remote=train))
        budget = ROUNDS_PER_CHUNK * cfg.worker_chunk * len(explorers)
        try:
            got = self.piece.call(
                "drive()", self.piece.cls, explorers, learner, allowed,
                partial(driver.chunks, chunk=cfg.learner_chunk), budget,
                passthrough=(ray.exceptions.RayError,))
        except ray.exceptions.RayError as err:       # another part failed under its call
            raise self._failure(calls, err) from None
        self._check(got, calls, budget)
        for ref, call in calls:                      # booked as the driver's own loop does
            driver.submit(ref, call)
            driver.book(ref)
        done, _ = ray.wait(list(driver.tasks), num_returns=len(driver.tasks), timeout=0)
        for ref in done:                             # the snapshot, the evaluations
            driver.book(ref)

    def check_train(self, n, calls: list, allowed) -> None:
        """A learner call the attendee's loop makes: a whole number of updates, at least one,
        no more than the transitions in so far pay for."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise self.piece.broke(f"it asked the learner for train.remote({n!r}): ask for 1 "
                                   "or more updates (the sizes chunks() gives)")
        collects = [r for r, call in calls if call.role is Role.COLLECT]
        done, _ = ray.wait(collects, num_returns=len(collects), timeout=0) if collects else (
            [], [])
        payable = allowed(sum(int(ray.get(r)) for r in done))
        self.asked += n
        if self.asked > payable:
            raise self.piece.broke(f"it asked the learner for {self.asked:,} updates in all "
                                   f"when the transitions in so far pay for {payable:,}: ask "
                                   "for chunks(allowed(inserted), ...) only")

    def _check(self, got, calls: list, budget: int) -> None:
        refs = [ref for ref, _ in calls]
        _, pending = ray.wait(refs, num_returns=len(refs), timeout=0) if refs else ([], [])
        if pending:
            raise self.piece.broke(f"it returned with {len(pending)} call(s) still in flight: "
                                   "loop until every call is booked")
        played = sum(int(ray.get(r)) for r, call in calls if call.role is Role.COLLECT)
        done = sum(int(ray.get(r)) for r, call in calls if call.role is Role.LEARN)
        if not (isinstance(got, tuple) and len(got) == 2):
            raise self.piece.broke(f"it returned {got!r}, not (inserted, updates)")
        if tuple(got) != (played, done):
            raise self.piece.broke(f"it returned {tuple(got)}; its calls played {played:,} "
                                   f"transitions and did {done:,} updates: book every call's "
                                   "result before returning")
        if played < budget:
            raise self.piece.broke(f"its explorers played {played:,} of the {budget:,} env "
                                   "steps asked for")
        if len(self.driver.workers) > 1 and self.most_in_flight < 2:
            raise self.piece.broke("its explorers never played at the same time: each "
                                   "run.remote() went out only after the previous one "
                                   "finished (send one to every idle explorer, then wait)")

    def _failure(self, calls: list, err: BaseException) -> BaseException:
        """The error that names the actor whose call failed (the first one that did)."""
        driver = self.driver
        for ref, call in calls:
            ready, _ = ray.wait([ref], timeout=0)
            if ready:
                part = (f"{driver.worker_name} {call.worker}" if call.role is Role.COLLECT
                        else "learner")
                try:
                    driver.result(ref, part)
                except Exception as failure:         # noqa: BLE001  (the actor's own error)
                    return failure
        return driver.actors.failure(err, "the driver")
