"""Quick mode, the config pattern used by every lesson, and `TrainerConfig`, the settings every
trainer has.

Quick mode is how CI (and an impatient attendee) runs the notebooks in seconds instead of
minutes: the same code, smaller numbers. It is read from one environment variable, here and
nowhere else.

A config is a dataclass that subclasses `Config`; its `QUICK` class attribute holds the
overrides for quick mode, and `Config.preset()` returns the one to use now::

    @dataclass
    class TrainConfig(Config):
        QUICK: ClassVar[dict] = {"total_steps": 2_000}
        total_steps: int = 100_000
        lr: float = 1e-3

    cfg = TrainConfig.preset()              # quick or full, from COURSE_QUICK
    cfg = cfg.updated({"lr": 5e-4})         # checked: unknown keys and wrong types are refused
    cfg.check()                             # checked: values outside their LIMITS are refused

`LIMITS` maps a key to its allowed values, written as the message shows them: "> 0", ">= 1",
"[0, 1]", "(0, 1]". A subclass adds its own; `check()` applies those of every class above it.
"""

from __future__ import annotations

import dataclasses
import operator
import os
import re
import types
import typing
from typing import Any, ClassVar

QUICK_ENV_VAR = "COURSE_QUICK"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def quick_mode() -> bool:
    """True when COURSE_QUICK asks for the small, fast version of every run."""
    value = os.environ.get(QUICK_ENV_VAR, "0").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"{QUICK_ENV_VAR}={value!r} is not understood: "
                     "set it to 1 (quick) or 0 (full).")


def mode_name() -> str:
    """'quick' or 'full', for titles and logs."""
    return "quick" if quick_mode() else "full"


class Config:
    """Base class for dataclass configs: a quick preset plus checked overrides."""

    QUICK: ClassVar[dict[str, Any]] = {}
    LIMITS: ClassVar[dict[str, str]] = {}   # key -> allowed values ("> 0", "[0, 1]", ...)

    @classmethod
    def preset(cls, quick: bool | None = None):
        """The config to run: defaults, with `QUICK` applied in quick mode."""
        quick = quick_mode() if quick is None else quick
        return cls(**cls.QUICK) if quick else cls()

    def updated(self, overrides: dict[str, Any]):
        """A copy with `overrides` applied; unknown keys or wrong types raise ValueError."""
        fields = {f.name: f for f in dataclasses.fields(self)}
        hints = typing.get_type_hints(type(self))
        clean = {}
        for key, value in overrides.items():
            if key not in fields:
                close = ", ".join(sorted(fields))
                raise ValueError(f"unknown config key {key!r} for {type(self).__name__}; "
                                 f"known keys: {close}")
            clean[key] = _coerce(key, value, hints[key])
        return dataclasses.replace(self, **clean)

    def check(self) -> None:
        """Refuse, in one line that names the key and its allowed values, a value outside the
        `LIMITS` of this class or any class above it (None passes: it switches a budget off;
        a tuple's every item is checked). Subclasses add checks that involve several keys.
        Types come first, so that a value built straight into the constructor
        (`ApexConfig(num_workers="auto")`) is refused in the same one line as `updated`'s."""
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            _coerce(f.name, getattr(self, f.name), hints[f.name])
        limits: dict[str, str] = {}
        for klass in reversed(type(self).__mro__):
            limits.update(vars(klass).get("LIMITS", {}))
        for key, allowed in limits.items():
            value = getattr(self, key)
            if isinstance(value, tuple):
                if not value or not all(within(v, allowed) for v in value):
                    raise ValueError(f"config key {key!r} must be a non-empty list of values "
                                     f"{allowed}, got {list(value)}")
            elif value is not None and not within(value, allowed):
                range_ = f"in {allowed}" if allowed[0] in "[(" else allowed
                raise ValueError(f"config key {key!r} must be {range_}, got {value!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def describe(cls) -> str:
        """Every key with its type, default and meaning (the comment beside its field), one
        line each: what `python -m course_lib train --help-config` prints."""
        helps: dict[str, str] = {}
        for klass in reversed(cls.__mro__):       # a subclass's comment wins
            if klass is not object and dataclasses.is_dataclass(klass):
                helps.update(_field_comments(klass))
        defaults = cls()
        rows = [(f.name, _type_name(f.type), repr(getattr(defaults, f.name)),
                 helps.get(f.name, "")) for f in dataclasses.fields(cls)]
        width = [max(len(row[i]) for row in rows) for i in range(3)]
        return "\n".join(f"{n:<{width[0]}}  {t:<{width[1]}}  {d:<{width[2]}}  {h}".rstrip()
                         for n, t, d, h in rows)


_COMPARE = {">": operator.gt, ">=": operator.ge, "(": operator.gt, "[": operator.ge,
            ")": operator.lt, "]": operator.le}
_LIMIT = re.compile(r"(>=?) (\S+)|([\[(])(\S+), (\S+)([\])])")


def within(value, allowed: str) -> bool:
    """Whether `value` is in `allowed` ("> 0", ">= 1", "[0, 1]", "(0, 1]"); NaN never is.

    >>> within(1.0, "(0, 1]"), within(0, "(0, 1]"), within(3, ">= 1")
    (True, False, True)
    """
    match = _LIMIT.fullmatch(allowed)
    if match is None:
        raise ValueError(f"limit {allowed!r} is not understood: write '> 0', '>= 1' or '[0, 1)'")
    op, bound, left, low, high, right = match.groups()
    if op:
        return _COMPARE[op](value, float(bound))
    return _COMPARE[left](value, float(low)) and _COMPARE[right](value, float(high))


def _field_comments(klass) -> dict[str, str]:
    """{field: its trailing comment} from the class's source (`lr: float = 1e-3  # ...`)."""
    import inspect
    import re

    try:
        source = inspect.getsource(klass)
    except (OSError, TypeError):
        return {}
    found = re.findall(r"^\s+(\w+): [^=\n]+=[^#\n]*#\s*(.+)$", source, flags=re.MULTILINE)
    return dict(found)


def _type_name(hint) -> str:
    return hint if isinstance(hint, str) else getattr(hint, "__name__", str(hint))


def _coerce(key: str, value: Any, hint: Any) -> Any:
    """Accept `value` for a field typed `hint` (ints count as floats), else ValueError."""
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    origin = typing.get_origin(hint) or hint
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        for option in options:
            if option is not type(None):
                try:
                    return _coerce(key, value, option)
                except ValueError:
                    pass
        raise ValueError(f"config key {key!r} must be {hint}, got {value!r}")
    if origin is tuple and isinstance(value, list):     # JSON has lists, not tuples
        value = tuple(value)
    if isinstance(origin, type):
        if origin is int and isinstance(value, bool):
            raise ValueError(f"config key {key!r} must be an int, got {value!r}")
        if not isinstance(value, origin):
            raise ValueError(f"config key {key!r} must be {origin.__name__}, got {value!r}")
    return value


@dataclasses.dataclass
class TrainerConfig(Config):
    """The settings every trainer has (an algorithm's config adds its own)."""

    LIMITS: ClassVar[dict[str, str]] = {
        "hidden": ">= 1", "lr": "> 0", "gamma": "[0, 1]", "batch_size": ">= 1",
        "buffer_size": ">= 1", "learning_starts": ">= 0", "eval_episodes": ">= 1",
        "confirm_episodes": ">= 0", "max_env_steps": ">= 0", "max_time_s": ">= 0",
        "env_latency_ms": "[0, inf)"}

    env_id: str = "CartPole-v1"       # the gymnasium environment to train on
    hidden: tuple[int, ...] = (128, 128)  # hidden layer sizes of the networks
    lr: float = 2e-3                  # Adam learning rate
    gamma: float = 0.99               # discount factor
    batch_size: int = 64              # transitions per gradient step
    buffer_size: int = 100_000        # replay capacity (FIFO)
    learning_starts: int = 1_000      # fresh transitions stored before the first update
    eval_episodes: int = 10           # greedy episodes per evaluation (fresh seeds each time)
    confirm_episodes: int = 20        # more fresh episodes of the same weights: the goal's test
    target_return: float | None = 475.0  # stop: the test's lower bound reached (None: no goal)
    max_env_steps: int | None = 100_000  # stop: env step budget (None: unlimited)
    max_time_s: float | None = 600.0  # stop: wall-clock budget in seconds (None: unlimited)
    seed: int = 0                     # seeds the networks, the envs and the exploration
    env_latency_ms: float = 0.0       # training env steps wait this long (a remote simulator)

    def check(self) -> None:
        """Refuse, in one line, settings that would fail later (at the first sample, say): the
        command line calls this before anything starts, and so does every trainer."""
        super().check()                   # each key within its LIMITS
        if self.buffer_size < self.batch_size:
            raise ValueError(f"buffer_size {self.buffer_size} is smaller than one sample request "
                             f"({self.batch_size} transitions): raise buffer_size or lower "
                             "batch_size")
        testing = self.confirm_episodes or self.eval_episodes      # see course_lib.scoring
        if self.target_return is not None and testing < 2:
            raise ValueError(f"a goal is tested on confirm_episodes (or on eval_episodes when "
                             f"confirm_episodes is 0), and {testing} episode bounds nothing: "
                             "set confirm_episodes >= 2, or target_return None")
