"""Where a distributed run spends its time: one row per actor, one bar per method call.

`ray.timeline()` returns Ray's own record of every task and actor call as Chrome-trace events
(the format chrome://tracing and Perfetto read). An actor call is one complete event (`"ph":
"X"`) whose category is `task::Class.method` (the first call, `__init__`, also carries the
actor's name: `task::name:Class.__init__`), whose thread id is the worker process that ran it
(`worker:<id>`), and whose start and duration are in microseconds since the epoch. Ray also
records the phases of each call (`task:deserialize_arguments`, `task:execute`, ...) and the
driver's submissions; those are left out here: one bar per call is what the picture needs.

    spans = timeline.actor_spans(timeline.collect(), since=start)  # start = time.time() before
    timeline.plot_timeline(spans)
    timeline.busy_fractions(spans)                               # {row: share of the window}

The same picture serves tasks timed by hand (notebook 01): `task_spans` turns (worker, start,
end) triples into rows of the same kind, one colour per task.

A bar is a whole method call, waits inside it included (a `ray.get` on a sample request counts
as busy); a gap is time the actor had no call to run, because nobody sent one yet.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

#: rows of a distributed run, in the order of the data's path through it
ROLE_ORDER = ("Explorer", "RolloutWorker", "ReplayStore", "ApexLearnerActor", "SACLearnerActor",
              "ParameterStoreActor", "Evaluator")   # ReplayStore: behind replay.ReplayStoreActor


@dataclasses.dataclass(frozen=True, order=True)
class Span:
    """One method call of one actor, in seconds from the start of the picture."""

    start: float
    duration: float
    method: str

    @property
    def end(self) -> float:
        return self.start + self.duration


def collect(flush_s: float = 2.0) -> list[dict]:
    """`ray.timeline()`'s events, after `flush_s` seconds for the workers to report their last
    calls (they send task events about once a second). Call it while the actors are alive: a
    killed actor's unreported calls are lost. Ray's notice that the timeline will move to the
    dashboard is not for attendees, so it is kept quiet."""
    import logging
    import time

    import ray

    time.sleep(flush_s)
    logger = logging.getLogger("ray._private.state")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        return ray.timeline()
    finally:
        logger.setLevel(level)


def _actor_call(event: dict) -> tuple[str, str] | None:
    """(class, method) of an actor call's event, or None for every other kind of event."""
    category = event.get("cat", "")
    if (event.get("ph") != "X" or not category.startswith("task::")
            or not str(event.get("tid", "")).startswith("worker:")):
        return None
    qualified = category[len("task::"):].rsplit(":", 1)[-1]    # drop "actor-name:"
    if "." not in qualified:
        return None                                             # a plain task, not an actor
    cls, method = qualified.rsplit(".", 1)
    return cls, method


def actor_spans(events: Iterable[dict], since: float | None = None,
                skip: tuple[str, ...] = ("__init__",)) -> dict[str, list[Span]]:
    """{row: calls} from Chrome-trace `events` (`ray.timeline()`): one row per actor process.

    Rows are named by class, numbered when a class has several processes ("Explorer 1",
    "Explorer 2", in the order of their first call), and sorted along `ROLE_ORDER`. Calls that
    ended before `since` (seconds since the epoch, e.g. `time.time()` before the run) are left
    out and calls under way at `since` are cut to start there, so the picture begins at
    `since`; the methods in `skip` are left out too. Times are seconds from the first call kept.
    """
    calls: dict[str, list[tuple[float, float, str]]] = {}
    classes: dict[str, str] = {}
    for event in events:
        parsed = _actor_call(event)
        if parsed is None or parsed[1] in skip:
            continue
        start, duration = float(event["ts"]) / 1e6, float(event.get("dur", 0.0)) / 1e6
        if since is not None:
            if start + duration < since:
                continue
            start, duration = max(start, since), start + duration - max(start, since)
        classes.setdefault(event["tid"], parsed[0])
        calls.setdefault(event["tid"], []).append((start, duration, parsed[1]))
    if not calls:
        return {}
    origin = min(start for row in calls.values() for start, _, _ in row)
    first = {tid: min(start for start, _, _ in row) for tid, row in calls.items()}
    rank = {cls: i for i, cls in enumerate(ROLE_ORDER)}
    tids = sorted(calls, key=lambda t: (rank.get(classes[t], len(rank)), classes[t], first[t]))
    counts = {cls: sum(1 for t in tids if classes[t] == cls) for cls in set(classes.values())}
    spans, numbered = {}, {}
    for tid in tids:
        cls = classes[tid]
        numbered[cls] = numbered.get(cls, 0) + 1
        label = f"{cls} {numbered[cls]}" if counts[cls] > 1 else cls
        spans[label] = sorted(Span(start - origin, duration, method)
                              for start, duration, method in calls[tid])
    return spans


def window(spans: dict[str, list[Span]]) -> tuple[float, float]:
    """(first start, last end) over all rows."""
    every = [s for row in spans.values() for s in row]
    if not every:
        raise ValueError("no actor calls in the timeline: run something first")
    return min(s.start for s in every), max(s.end for s in every)


def busy_fractions(spans: dict[str, list[Span]],
                   between: tuple[float, float] | None = None) -> dict[str, float]:
    """{row: share of the window in which the actor was running a call}, overlaps merged."""
    lo, hi = between or window(spans)
    out = {}
    for label, row in spans.items():
        busy, reach = 0.0, lo
        for span in sorted(row):
            start, end = max(span.start, reach), min(span.end, hi)
            if end > start:
                busy += end - start
                reach = end
        out[label] = busy / (hi - lo) if hi > lo else 0.0
    return out


def task_spans(tasks: Iterable[tuple[str, float, float]]) -> dict[str, list[Span]]:
    """{worker: spans} from (worker label, start s, end s) triples, one per task, for
    `plot_timeline`: rows sorted by label, times from the first start, each task its own
    "method" ("task 1", "task 2", ... in the order given), so each bar gets its own colour.

    >>> task_spans([("w2", 10.0, 10.5), ("w1", 10.25, 11.0)])["w1"]
    [Span(start=0.25, duration=0.75, method='task 2')]
    """
    tasks = list(tasks)
    if not tasks:
        return {}
    origin = min(start for _, start, _ in tasks)
    rows: dict[str, list[Span]] = {label: [] for label in sorted({w for w, _, _ in tasks})}
    for i, (worker, start, end) in enumerate(tasks):
        rows[worker].append(Span(start - origin, end - start, f"task {i + 1}"))
    return {label: sorted(row) for label, row in rows.items()}


def plot_timeline(spans: dict[str, list[Span]], ax=None, title: str | None = None):
    """One row per actor (or worker), one bar per call, coloured by method; the axes.

    The one Gantt chart of the workbook: Ray's timeline of a distributed run (`actor_spans`)
    and tasks timed by hand (`task_spans`) both draw through it."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(11, 0.45 * len(spans) + 1.2))
    methods = sorted({s.method for row in spans.values() for s in row},
                     key=lambda m: [int(t) if t.isdigit() else t     # "task 2" before "task 10"
                                    for t in re.split(r"(\d+)", m)])
    colours = {m: plt.get_cmap("tab10")(i % 10) for i, m in enumerate(methods)}
    labels = list(spans)
    for y, label in enumerate(reversed(labels)):
        for method in methods:
            bars = [(s.start, s.duration) for s in spans[label] if s.method == method]
            if bars:
                ax.broken_barh(bars, (y - 0.4, 0.8), color=colours[method], linewidth=0)
    ax.set_yticks(range(len(labels)), list(reversed(labels)))
    ax.set_xlabel("seconds")
    ax.set_xlim(*window(spans))
    ax.grid(axis="x", alpha=0.3)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[m]) for m in methods]
    ax.legend(handles, methods, title="method", fontsize="small", loc="upper left",
              bbox_to_anchor=(1.0, 1.0))
    if title:
        ax.set_title(title)
    return ax
