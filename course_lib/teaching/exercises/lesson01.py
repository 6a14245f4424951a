"""Checkers for notebook 01, Ray core."""

from __future__ import annotations

import itertools
import time

import ray

from course_lib.teaching.exercises.core import _Failed, _forbid_ray_get, _watch_waits, checker


@checker(1, "tree_sum",
         "one future for the whole sum, no waiting in between.")
def check_tree_sum(tree_sum):
    """tree_sum(refs) must return ONE ObjectRef of the sum, built from add tasks, no ray.get."""
    for n in (1, 2, 5, 8):
        refs = [ray.put(i) for i in range(n)]
        with _forbid_ray_get("Pass ObjectRefs straight into add.remote(...): Ray resolves "
                             "them for you, and only the final ray.get waits."):
            out = tree_sum(refs)
        if not isinstance(out, ray.ObjectRef):
            raise _Failed(f"for {n} inputs it returned {type(out).__name__}, not an ObjectRef.",
                          "Return the last reference itself; the caller calls ray.get.")
        if ray.get(out) != sum(range(n)):
            raise _Failed(f"for inputs 0..{n - 1} the sum came out as {ray.get(out)}, "
                          f"expected {sum(range(n))}.",
                          "With an odd count, carry the last reference to the next round.")
    refs = [ray.put(_Leveled(i)) for i in range(8)]
    with _forbid_ray_get("Pass ObjectRefs straight into add.remote(...)."):
        out = tree_sum(refs)
    total = ray.get(out)
    if getattr(total, "levels", 0) > 3:
        raise _Failed(f"for 8 inputs the sum went through {total.levels} additions in a row, "
                      "each waiting for the one before: a chain, where a tree needs 3.",
                      "Add the inputs in pairs, then the pairs' sums in pairs: 8 inputs need "
                      "3 rounds.")


class _Leveled:
    """A number that counts the levels of additions that built it: `a + b` is one level above
    the deeper of `a` and `b`. Summed by add tasks, it measures the depth of their tree."""

    def __init__(self, value, levels: int = 0):
        self.value, self.levels = value, levels

    def __add__(self, other):
        if isinstance(other, _Leveled):
            return _Leveled(self.value + other.value, max(self.levels, other.levels) + 1)
        return _Leveled(self.value + other, self.levels)     # sum()'s start value: no level

    __radd__ = __add__

    def __eq__(self, other):
        return self.value == getattr(other, "value", other)

    def __repr__(self) -> str:
        return repr(self.value)


@ray.remote(num_cpus=0)
class _Gate:
    """Holds a value back until opened (an asyncio actor: a waiting `hold` does not block
    `open`)."""

    def __init__(self):
        import asyncio

        self.opened = asyncio.Event()

    async def open(self) -> None:
        self.opened.set()

    async def hold(self, value):
        await self.opened.wait()
        return value


class _HeldTask:
    """A task that finishes only when the checker releases it, after the answer has taken the
    results that were ready: finish order is then certain, not a race of sleeps. `held(ref)`,
    given to `_watch_waits`, sees an answer wait for it sooner, and releases it then."""

    def __init__(self, value):
        self.gate, self.released = _Gate.remote(), False
        self.ref = self.gate.hold.remote(value)

    def held(self, ref) -> bool:
        if ref != self.ref or self.released:
            return False
        self.release()
        return True

    def release(self) -> None:
        if not self.released:
            self.released = True
            ray.get(self.gate.open.remote())

    def take(self, results, waited: list) -> list:
        """Every item of the iterable `results()` returns, its waits watched from the call on;
        the held task is released once three items have come (the three quick tasks')."""
        got = []
        try:
            with _watch_waits(waited, self.held, waits=True):
                for item in results():
                    got.append(item)
                    if len(got) == 3:
                        self.release()
        finally:
            self.release()
            ray.kill(self.gate)
        return got


@checker(1, "as_completed",
         "results arrive in the order tasks finish.")
def check_as_completed(as_completed):
    """as_completed(refs) must yield every value in the order the tasks finish: of four
    tasks, one is held back until the three others' values have been yielded, and an answer
    that waits for it before then is seen waiting (ray.get or ray.wait), not timed."""
    slow, waited = _HeldTask("slow"), []
    refs = [ray.put(0), ray.put(1), slow.ref, ray.put(2)]
    got = slow.take(lambda: as_completed(refs), waited)
    if sorted(map(str, got)) != sorted(["slow", "0", "1", "2"]):
        raise _Failed(f"it yielded {got!r}; expected each of 'slow', 0, 1, 2 exactly once.",
                      "Remove each finished reference from the pending list.")
    if waited or got[-1] != "slow":
        raise _Failed(f"it yielded {got!r}: it waited for the third task, still running, "
                      "while the other three had finished. Results must come in the order "
                      "the tasks finish, not in the order of the list.",
                      "Use ready, pending = ray.wait(pending, num_returns=1), then ray.get only "
                      "the ready one.")


@checker(1, "RunningMean",
         "each actor keeps its own state, calls run in order.")
def check_running_mean(actor_class):
    """RunningMean must be a Ray actor whose add(x) calls update a private mean."""
    if not hasattr(actor_class, "remote"):
        raise _Failed("it is a plain class, not a Ray actor.",
                      "Decorate the class with @ray.remote and create it with .remote().")
    first, second = actor_class.remote(), actor_class.remote()
    for x in range(1, 11):
        first.add.remote(x)
    second.add.remote(100.0)
    means = ray.get([first.mean.remote(), second.mean.remote()])
    if means != [5.5, 100.0]:
        raise _Failed(f"after adding 1..10 to one actor and 100 to another, the means were "
                      f"{means}, expected [5.5, 100.0].",
                      "Keep the count and the total in self, set in __init__.")


@ray.remote(num_cpus=0)
class _SpanLog:
    """When each checked task ran, (start, end) by its own clock, in the order they finished."""

    def __init__(self):
        self.spans: list[tuple[float, float] | None] = []

    def record(self, span: tuple[float, float] | None) -> None:
        self.spans.append(span)

    def all(self) -> list[tuple[float, float] | None]:
        return self.spans


@ray.remote
def _logged_sleep(log, seconds: float, value):
    start = time.time()
    time.sleep(seconds)
    ray.get(log.record.remote((start, time.time())))     # logged before it returns
    return value


class _LoggedTask:
    """A stand-in for a remote function: `.remote(x)` starts a task that sleeps `seconds` and
    returns `fn(x)`. It logs when each task ran (their own clocks) and, in `events`, each
    submission ("submit") and, inside `watching()`, each wait for an unfinished task (a
    number), in order: whether the tasks ran at all, side by side, and all started before the
    caller first waited."""

    def __init__(self, fn, seconds: float):
        self.fn, self.seconds, self.log = fn, seconds, _SpanLog.remote()
        self.events: list = []
        ray.get([_logged_sleep.remote(self.log, 0.2, None) for _ in range(2)])  # warm workers
        ray.get(self.log.record.remote(None))                  # marks the warm-up's end

    def remote(self, x):
        self.events.append("submit")
        return _logged_sleep.remote(self.log, self.seconds, self.fn(x))

    def watching(self):
        return _watch_waits(self.events, waits=True)

    def spans(self) -> list[tuple[float, float]]:
        logged = ray.get(self.log.all.remote())
        ray.kill(self.log)
        return logged[logged.index(None) + 1:]


def _require_side_by_side(task: _LoggedTask, count: int, what: str, hint: str,
                          line: str | None = None) -> None:
    """_Failed unless `count` tasks of `task` ran, at least two of them at the same time when
    Ray has two CPUs or more (evidence from the tasks' own clocks, not from how long the
    caller took, so a busy machine cannot fail a right answer), and all were submitted before
    the caller first waited for one (observed order: so it does not matter how it waits)."""
    spans = sorted(task.spans())
    if len(spans) < count:
        raise _Failed(f"{len(spans)} of the {count} {what} ran as Ray tasks; the others were "
                      "computed without Ray.",
                      "Call the remote function's .remote(...) once per item, so that each "
                      "runs as a task.")
    overlapped = any(later[0] < earlier[1] for earlier, later in itertools.pairwise(spans))
    if int(ray.cluster_resources().get("CPU", 1)) >= 2 and not overlapped:
        raise _Failed(f"the {count} {what} ran one after the other: each started only after "
                      "the one before it had finished.", hint, line)
    first_wait = next((i for i, e in enumerate(task.events) if e != "submit"), len(task.events))
    if (started := task.events[:first_wait].count("submit")) < count:
        raise _Failed(f"it waited for a result when only {started} of the {count} {what} had "
                      "been submitted: the others could not start until that wait was over.",
                      hint, line)


@checker(1, "fast_sum_of_squares",
         "every task submitted before the first wait: they ran side by side.")
def check_fast_sum_of_squares(fast_sum_of_squares):
    """fast_sum_of_squares(square, xs) must give sum(x^2), computed by tasks of `square` that
    ran side by side (their logged start and end times overlap), every one submitted before
    the first wait for a result: one ray.get of the list, or a ray.get per ref after all
    were submitted, both pass."""
    xs = list(range(6))
    square = _LoggedTask(lambda x: x * x, 0.4)
    with square.watching():
        total = fast_sum_of_squares(square, xs)
    if total != sum(x * x for x in xs):
        raise _Failed(f"for xs = 0..5 it returned {total!r}, expected {sum(x * x for x in xs)}.",
                      "Sum the values that ray.get returns, not the ObjectRefs.")
    _require_side_by_side(square, len(xs), "squares",
                          "Submit every task first (a list of square.remote(x)), then wait "
                          "for the results.")


@checker(1, "mean_return", "the episodes ran side by side, one ray.get for all of them.")
def check_mean_return(mean_return):
    """Find the bug: mean_return(play, seeds) must return the mean of play(seed) over the
    seeds, the episodes played as tasks that ran side by side."""
    play = _LoggedTask(lambda seed: 10.0 * seed, 0.3)
    with play.watching():
        got = mean_return(play, range(6))
    if got != 25.0:
        raise _Failed(f"for returns 0, 10, ..., 50 it gave {got!r}, expected 25.0.",
                      "Average the values that ray.get returns.")
    _require_side_by_side(play, 6, "episodes",
                          "Read it as the driver runs it: where does it wait, and how many "
                          "times? Every episode should be submitted before the first wait.",
                          "`returns = [episode_return(play, seed) for seed in seeds]`: "
                          "episode_return calls ray.get, so each episode is waited for before "
                          "the next one is submitted.")


@ray.remote(num_cpus=0)
class _RecordingMean:
    """A stand-in for the attendee's RunningMean that also says what was added, in order."""

    def __init__(self):
        self.values: list[float] = []

    def add(self, x: float) -> None:
        self.values.append(float(x))

    def mean(self) -> float:
        return sum(self.values) / len(self.values)

    def added(self) -> list[float]:
        return self.values


class _OneHeldEpisode(_HeldTask):
    """A stand-in for `play_episode`: seed 0's episode returns 100 and is held back (a
    `_HeldTask`), every other seed's is ready at once and returns the seed."""

    def __init__(self):
        super().__init__(100.0)

    def remote(self, seed):
        return self.ref if seed == 0 else ray.put(float(seed))


@checker(1, "live_mean", "episodes side by side, each return added as it finished, the mean "
         "read after each add.")
def check_live_mean(live_mean):
    """live_mean(play, seeds, tracker) must play every seed's episode side by side, add each
    return to the actor `tracker` as its episode finishes (one episode is held back until
    three means have come: waiting for it sooner is seen, not timed), and yield the
    tracker's mean after each add."""
    tracker, play, waited = _RecordingMean.remote(), _OneHeldEpisode(), []
    try:
        got = [float(m) for m in play.take(lambda: live_mean(play, [0, 1, 2, 3], tracker),
                                           waited)]
        added = ray.get(tracker.added.remote())
    finally:
        ray.kill(tracker)
    if sorted(added) != [1.0, 2.0, 3.0, 100.0]:
        raise _Failed(f"the tracker was given {added}, expected each episode's return once "
                      "(1, 2, 3 and the slow episode's 100).",
                      "Call tracker.add.remote(value) for every value your as_completed yields.")
    if waited or added[-1] != 100.0:
        raise _Failed(f"the tracker was given {added}: live_mean waited for the slow episode "
                      "before it had added the returns of the three that had finished. Each "
                      "return must be added as soon as its episode finishes.",
                      "Submit every episode first, then loop over as_completed(refs), adding "
                      "each value as it comes.")
    expected = [sum(added[:k]) / k for k in range(1, len(added) + 1)]
    if len(got) != len(expected) or not all(
            abs(a - b) < 1e-9 for a, b in zip(got, expected, strict=True)):
        raise _Failed(f"it yielded {got}; after each add the tracker's mean was {expected}.",
                      "After each add, yield ray.get(tracker.mean.remote()): calls from one "
                      "caller run in order, so the mean includes the add before it.")
