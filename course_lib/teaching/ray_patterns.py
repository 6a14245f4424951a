"""Ray core patterns, measured: the three classic anti-patterns and a task timeline.

Every `measure_*` function runs the slow way and the fast way on the same work and returns
{variant: wall-clock seconds}, slow first, ready for `plotting.plot_comparison`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import ray

from course_lib.config import Config


@dataclass
class PatternsConfig(Config):
    QUICK: ClassVar[dict] = {"n_sleep_tasks": 6, "n_items": 2_000, "array_mb": 16, "n_readers": 6}
    n_sleep_tasks: int = 16      # tasks of `sleep_s` each in the ray.get-in-a-loop demo
    sleep_s: float = 0.1
    n_items: int = 20_000        # items in the task-granularity demo
    chunk: int = 1_000           # items per task when batched
    array_mb: int = 80           # size of the large argument
    n_readers: int = 16          # tasks reading the large argument


@ray.remote
def sleepy(seconds: float, value):
    """Stands in for real work: waits `seconds`, returns `value`."""
    time.sleep(seconds)
    return value


@ray.remote
def square_items(xs):
    """Tiny work per item: the overhead of a task dominates when it gets one item."""
    return [x * x for x in xs]


@ray.remote
def array_sum(array: np.ndarray) -> float:
    return float(array.sum())


def measure_get_in_loop(cfg: PatternsConfig) -> dict[str, float]:
    """`ray.get` right after each `.remote()` serialises the tasks; submit all, then get once."""
    start = time.perf_counter()
    for i in range(cfg.n_sleep_tasks):
        ray.get(sleepy.remote(cfg.sleep_s, i))                   # waits for each task in turn
    in_loop = time.perf_counter() - start

    start = time.perf_counter()
    refs = [sleepy.remote(cfg.sleep_s, i) for i in range(cfg.n_sleep_tasks)]
    ray.get(refs)                                                # all run in parallel
    batched = time.perf_counter() - start
    return {"ray.get in a loop": in_loop, "submit all, then one ray.get": batched}


def measure_task_granularity(cfg: PatternsConfig) -> dict[str, float]:
    """One task per item pays a task's fixed overhead per item; one task per chunk does not."""
    items = list(range(cfg.n_items))
    start = time.perf_counter()
    ray.get([square_items.remote([x]) for x in items])
    fine = time.perf_counter() - start

    start = time.perf_counter()
    chunks = [items[i:i + cfg.chunk] for i in range(0, len(items), cfg.chunk)]
    ray.get([square_items.remote(chunk) for chunk in chunks])
    batched = time.perf_counter() - start
    return {"one task per item": fine, f"one task per {cfg.chunk} items": batched}


def measure_large_argument(cfg: PatternsConfig) -> dict[str, float]:
    """A large array passed by value is copied into the object store on every call;
    `ray.put` stores it once and every task reads that one copy (zero-copy for numpy)."""
    array = np.ones(cfg.array_mb * 2**20 // 8)
    start = time.perf_counter()
    ray.get([array_sum.remote(array) for _ in range(cfg.n_readers)])
    by_value = time.perf_counter() - start

    start = time.perf_counter()
    array_ref = ray.put(array)
    ray.get([array_sum.remote(array_ref) for _ in range(cfg.n_readers)])
    put_once = time.perf_counter() - start
    return {"passed by value each call": by_value, "ray.put once, pass the ref": put_once}


@ray.remote
def timed_sleep(seconds: float) -> tuple[str, float, float]:
    """Sleep, and report which worker process ran it and when (for a timeline)."""
    start = time.time()
    time.sleep(seconds)
    return f"worker pid {os.getpid()}", start, time.time()
