"""The machinery every checker shares: the result, the decorator, the registry; `yours`,
which hands the attendee's pieces that pass their check to the real trainer; and
`from_notebook`, which brings an earlier notebook's pieces (04's `find_prefix_sum`) into a
later notebook's own-parts run (05's)."""

from __future__ import annotations

import contextlib
import functools
import html
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import ray

from course_lib.errors import first_line
from course_lib.teaching.pieces.guard import PIECES, check_keys
from course_lib.teaching.pieces.slots import slots_for


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
    """A mistake found: `message` says what the code did, `hint` where to look. A find-the-bug
    checker gives `line` too, the hint that names the faulty line: shown from the exercise's
    second failed check on, so that the first one leaves the attendee the symptom to chase."""

    def __init__(self, message: str, hint: str, line: str | None = None):
        super().__init__(message)
        self.message, self.hint, self.line = message, hint, line


def require_close(got, expected, message: str, hint: str) -> None:
    """_Failed(message, hint) unless `got` equals `expected` up to float rounding."""
    import numpy as np

    if not np.allclose(got, expected):
        raise _Failed(message, hint)


CHECKERS: dict[str, Callable[..., CheckResult]] = {}
"""Every checker by function name, in the order the notebooks use them (notebook 01 first)."""

FAILED: Counter = Counter()
"""Failed check cells per exercise in this kernel (`checker`; `quietly` does not count)."""


def checker(notebook: int, exercise: str, success: str):
    """Declare a checker: the decorated function raises `_Failed` on the first mistake it finds
    and returns normally when the attendee's code is right.

    The wrapper turns that into a `CheckResult` and never raises, so Run All goes on past an
    unfinished exercise: `_Failed` gives its message and hint (its `line` from the exercise's
    second failure on), `NotImplementedError` (a TODO stub, also when raised inside a Ray task
    or actor) says "not implemented yet", and any other exception from the attendee's code is
    reported as one line. `check.quietly(...)` checks without counting a failure (`yours`).
    """
    def declare(body: Callable[..., None]) -> Callable[..., CheckResult]:
        def run(count: bool, *args, **kwargs) -> CheckResult:
            try:
                body(*args, **kwargs)
            except _Failed as fail:
                FAILED[exercise] += count
                again = fail.line is not None and FAILED[exercise] >= 2
                return CheckResult(exercise, False, fail.message, fail.line if again else
                                   fail.hint)
            except NotImplementedError:
                return CheckResult(exercise, False, "not implemented yet.",
                                   "Fill in the exercise cell where it says TODO, then run it "
                                   "again.")
            except Exception as err:  # the attendee's code raised: report it as one line
                cause = getattr(err, "cause", None) or err
                return CheckResult(exercise, False, f"your code raised {first_line(cause)}",
                                   "Run the exercise cell on a tiny input and read the error.")
            return CheckResult(exercise, True, success)

        @functools.wraps(body)
        def check(*args, **kwargs) -> CheckResult:
            return run(True, *args, **kwargs)

        check.quietly = functools.partial(run, False)
        check.notebook, check.exercise, check.success = notebook, exercise, success
        CHECKERS[body.__name__] = check
        return check
    return declare


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


@contextlib.contextmanager
def _watch_waits(waited: list, watched=lambda ref: True, waits: bool = False):
    """Observe waiting instead of timing it: each `ray.get` inside the block that must wait for
    an unfinished task among those `watched(ref)` picks is logged in `waited` (how many such
    refs were not ready), and with `waits=True` so is each `ray.wait` without a timeout that
    must wait for one, having fewer than `num_returns` results ready. `watched` is called
    before the call goes on, so it may let a held task finish: nothing hangs."""
    get, wait = ray.get, ray.wait

    def unready(refs) -> int:
        refs = list(dict.fromkeys(r for r in (refs if isinstance(refs, list | tuple) else [refs])
                                  if isinstance(r, ray.ObjectRef)))
        ready = set(wait(refs, num_returns=len(refs), timeout=0)[0]) if refs else set()
        return sum(1 for r in refs if r not in ready and watched(r))

    def watching_get(refs, *args, **kwargs):
        if n := unready(refs):
            waited.append(n)
        return get(refs, *args, **kwargs)

    def watching_wait(refs, *args, num_returns=1, timeout=None, **kwargs):
        refs = list(refs)
        ready = len(wait(list(dict.fromkeys(refs)), num_returns=len(set(refs)), timeout=0)[0]) \
            if refs else 0
        if timeout is None and ready < num_returns and (n := unready(refs)):
            waited.append(n)
        return wait(refs, *args, num_returns=num_returns, timeout=timeout, **kwargs)

    ray.get = watching_get
    if waits:
        ray.wait = watching_wait
    try:
        yield waited
    finally:
        ray.get, ray.wait = get, wait


class _Spy:
    """An actor handle whose calls of `methods` are logged in `log` as (method, args, kwargs,
    the ref it returned), in the order they were made; its other methods are the actor's."""

    def __init__(self, actor, log: list, *methods: str):
        self._actor, self._log, self._methods = actor, log, methods

    def __getattr__(self, name: str):
        method = getattr(self._actor, name)
        if name not in self._methods:
            return method
        log = self._log

        class Logged:
            @staticmethod
            def remote(*args, **kwargs):
                ref = method.remote(*args, **kwargs)
                log.append((name, args, kwargs, ref))
                return ref
        return Logged


def yours(trainer, **candidates):
    """(`trainer`'s slots filled with the pieces that pass their exercise's check, one line
    saying whose each piece is): `yours(apex.ApexTrainer, outbox=Outbox)` -> (ApexSlots with
    your outbox, "explorer send step: yours"), then `apex.ApexTrainer.train(cfg, slots=...)`;
    for notebook 03's functions a dict of keyword slots (`sync_sgd(cfg, **slots)`). A piece
    that fails its check is left out: the trainer then uses `course_lib`'s. A piece the trainer
    never calls is refused (ValueError, one line)."""
    check_keys(candidates)
    slots_for(trainer, candidates)                # refuses a piece the trainer never calls
    chosen, said = {}, []
    for key, piece in candidates.items():
        result = CHECKERS[f"check_{key}"].quietly(piece)
        if result.passed:
            chosen[key] = piece
        said.append(f"{PIECES[key].what}: " + ("yours" if result.passed else
                                                f"course_lib's (yours: {result.message})"))
    return slots_for(trainer, chosen), "; ".join(said)


def from_notebook(number: str, *names: str, folder: str | Path = ".") -> dict:
    """{name: the attendee's function or class} for each of `names` that notebook `number`
    (its .ipynb in `folder`, the attendee's own copy) defines in an exercise cell, or in a
    solution cell of the source edition; each cell is run as the notebook runs it, in a
    namespace of its own (`__main__`, so that Ray sends it by value). A name the notebook
    does not define, or whose cell fails, is left out: the run uses `course_lib`'s, and one
    printed line says so."""
    import nbformat

    paths = sorted(Path(folder).glob(f"{number}_*.ipynb"))
    if not paths:
        print(f"from notebook {number}: no {number}_*.ipynb in {Path(folder).resolve()} (save "
              f"it there): course_lib's {', '.join(names)} instead")
        return {}
    namespace: dict = {"__name__": "__main__"}
    exec("import numpy as np\nimport ray", namespace)
    found = {}
    for cell in nbformat.read(paths[0], as_version=4).cells:
        tags = cell.metadata.get("tags", [])
        if cell.cell_type != "code" or not {"exercise", "solution"} & set(tags):
            continue
        defined = [n for n in names if re.search(rf"^(def|class) {n}\b", cell.source, re.M)]
        if not defined:
            continue
        try:
            exec(cell.source, namespace)
        except Exception:                     # an unfinished cell: course_lib's piece
            continue
        found.update({n: namespace[n] for n in defined})
    missing = [n for n in names if n not in found]
    if missing:
        print(f"from notebook {number}: {paths[0].name} has no working {', '.join(missing)} "
              f"(unfinished, or not saved): course_lib's instead")
    return found
