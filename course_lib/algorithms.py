"""The algorithms the command line knows, by name, and what it needs from each.

    python -m course_lib train --algo apex      ->  course_lib.apex.SPEC

Adding an algorithm: end its module with `SPEC = AlgoSpec(its trainer class, its policy
function)` and name the module in `ALGORITHMS`. The module is imported only when used, so that
a typo on the command line is reported before torch and Ray load.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import NamedTuple

#: algorithm name -> the module whose `SPEC` describes it
ALGORITHMS: dict[str, str] = {
    "apex": "course_lib.apex",
    "dqn": "course_lib.dqn",
    "sac": "course_lib.sac",
}


class AlgoSpec(NamedTuple):
    """What the command line needs to know about an algorithm (see `course_lib.cli`): its
    trainer class (which brings the config class, the env check and `train`) and its policy."""

    trainer: type                         # a `trainer.Trainer` subclass
    policy: Callable                      # checkpoint dict -> act(obs) -> action (greedy)

    @property
    def config(self) -> type:
        """The Config dataclass of the trainer."""
        return self.trainer.config_class

    def check_env(self, env) -> None:
        """ValueError (one line) if the algorithm cannot train on `env`."""
        self.trainer.check_env(env)

    def train(self, config, **kwargs):
        """`trainer.train(config, progress=, run=, restore=)` -> a TrainResult."""
        return self.trainer.train(config, **kwargs)


def load_algorithm(name: str) -> AlgoSpec:
    """The `SPEC` of algorithm `name` (a key of `ALGORITHMS`), importing its module."""
    return importlib.import_module(ALGORITHMS[name]).SPEC
