"""Checkers for notebook 01, Ray core."""

from __future__ import annotations

import time

import ray

from course_lib.exercises.core import _Failed, _forbid_ray_get, checker


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


@ray.remote
def _sleep_then_return(seconds: float, value):
    time.sleep(seconds)
    return value


@checker(1, "as_completed",
         "results arrive in the order tasks finish.")
def check_as_completed(as_completed):
    """as_completed(refs) must yield every value, fastest first (ray.wait, not list order)."""
    slow = _sleep_then_return.remote(1.5, "slow")
    fast = [ray.put(i) for i in range(3)]
    got = list(as_completed([slow, *fast]))
    if sorted(map(str, got)) != sorted(["slow", "0", "1", "2"]):
        raise _Failed(f"it yielded {got!r}; expected each of 'slow', 0, 1, 2 exactly once.",
                      "Remove each finished reference from the pending list.")
    if got[0] == "slow":
        raise _Failed("it waited for the slow task first, in list order.",
                      "Use ready, pending = ray.wait(pending, num_returns=1).")


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


@ray.remote
def _slow_square(x: int) -> int:
    time.sleep(0.4)
    return x * x


@checker(1, "fast_sum_of_squares",
         "every task submitted before one ray.get: they ran side by side.")
def check_fast_sum_of_squares(fast_sum_of_squares):
    """fast_sum_of_squares(square, xs) must give sum(x^2) with one ray.get, and be measurably
    faster than submitting and waiting one task at a time (the time is measured, with a margin
    for a busy machine)."""
    xs = list(range(6))
    gets, original_get = [], ray.get

    def counting_get(*args, **kwargs):
        gets.append(args)
        return original_get(*args, **kwargs)

    original_get([_slow_square.remote(0) for _ in range(2)])       # start the workers first
    ray.get = counting_get
    try:
        start = time.perf_counter()
        total = fast_sum_of_squares(_slow_square, xs)
        seconds = time.perf_counter() - start
    finally:
        ray.get = original_get
    if total != sum(x * x for x in xs):
        raise _Failed(f"for xs = 0..5 it returned {total!r}, expected {sum(x * x for x in xs)}.",
                      "Sum the values that ray.get returns, not the ObjectRefs.")
    if len(gets) > 1:
        raise _Failed(f"it called ray.get {len(gets)} times: a ray.get in a loop.",
                      "Submit every task first (a list of square.remote(x)), then call ray.get "
                      "once on the whole list.")
    sequential = 0.4 * len(xs)
    cpus = int(ray.cluster_resources().get("CPU", 1))
    if cpus >= 2 and seconds > 0.75 * sequential:
        raise _Failed(f"it took {seconds:.1f} s for six 0.4-second tasks on {cpus} CPUs: one "
                      f"after the other ({sequential:.1f} s).",
                      "Create all the futures before you wait for any of them.")
