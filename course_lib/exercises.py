"""Checkers for the notebook exercises.

Convention (every notebook): an exercise cell tagged `exercise` holds a TODO stub; a hidden cell
tagged `solution` holds the worked answer; a cell tagged `check` calls one `check_...` function
below. A checker never raises: it returns a `CheckResult` that shows as a green tick, or as a red
cross with what is wrong and a hint.
"""

from __future__ import annotations

import contextlib
import html
import time
from dataclasses import dataclass

import ray


@dataclass
class CheckResult:
    exercise: str
    passed: bool
    message: str
    hint: str = ""

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        if self.passed:
            return f"✅ {self.exercise}: {self.message}"
        return f"❌ {self.exercise}: {self.message}\n   Hint: {self.hint}"

    def _repr_html_(self) -> str:
        color = "#1a7f37" if self.passed else "#cf222e"
        text = html.escape(repr(self)).replace("\n", "<br>")
        return f"<div style='color:{color};font-family:monospace'>{text}</div>"


class _Failed(Exception):
    def __init__(self, message: str, hint: str):
        super().__init__(message)
        self.message, self.hint = message, hint


def _check(exercise: str, success: str, body) -> CheckResult:
    """Run `body()`; turn a _Failed or an exception from the attendee's code into a result."""
    try:
        body()
    except _Failed as fail:
        return CheckResult(exercise, False, fail.message, fail.hint)
    except NotImplementedError:
        return CheckResult(exercise, False, "not implemented yet.",
                           "Replace the `raise NotImplementedError` in the exercise cell.")
    except Exception as err:  # the attendee's code raised: report it as one line
        cause = getattr(err, "cause", None) or err
        return CheckResult(exercise, False, f"your code raised {type(cause).__name__}: {cause}",
                           "Run the exercise cell on a tiny input and read the error.")
    return CheckResult(exercise, True, success)


@contextlib.contextmanager
def _forbid_ray_get(hint: str):
    """Make any `ray.get` inside the block fail with `hint`."""
    original = ray.get

    def refuse(*args, **kwargs):
        raise _Failed("it calls ray.get, which waits for results before it has to.", hint)

    ray.get = refuse
    try:
        yield
    finally:
        ray.get = original


# ---------------------------------------------------------------- notebook 01: Ray core

def check_tree_sum(tree_sum) -> CheckResult:
    """tree_sum(refs) must return ONE ObjectRef of the sum, built from add tasks, no ray.get."""
    def body():
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
    return _check("tree_sum", "one future for the whole sum, no waiting in between.", body)


@ray.remote
def _sleep_then_return(seconds: float, value):
    time.sleep(seconds)
    return value


def check_as_completed(as_completed) -> CheckResult:
    """as_completed(refs) must yield every value, fastest first (ray.wait, not list order)."""
    def body():
        slow = _sleep_then_return.remote(1.5, "slow")
        fast = [ray.put(i) for i in range(3)]
        got = list(as_completed([slow, *fast]))
        if sorted(map(str, got)) != sorted(["slow", "0", "1", "2"]):
            raise _Failed(f"it yielded {got!r}; expected each of 'slow', 0, 1, 2 exactly once.",
                          "Remove each finished reference from the pending list.")
        if got[0] == "slow":
            raise _Failed("it waited for the slow task first, in list order.",
                          "Use ready, pending = ray.wait(pending, num_returns=1).")
    return _check("as_completed", "results arrive in the order tasks finish.", body)


def check_running_mean(actor_class) -> CheckResult:
    """RunningMean must be a Ray actor whose add(x) calls update a private mean."""
    def body():
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
    return _check("RunningMean", "each actor keeps its own state, calls run in order.", body)
