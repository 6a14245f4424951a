"""Every docstring example in course_lib runs and prints what it shows (notebooks display
some of them through `show_source`, so a wrong example would teach a wrong number)."""

import doctest
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "course_lib"
WITH_EXAMPLES = sorted(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
                       for path in PACKAGE.rglob("*.py") if ">>> " in path.read_text())


def test_the_modules_with_examples_are_found():
    assert "course_lib.dqn.learner" in WITH_EXAMPLES


@pytest.mark.parametrize("module", WITH_EXAMPLES)
def test_docstring_examples_hold(module):
    result = doctest.testmod(importlib.import_module(module), verbose=False)
    assert result.attempted > 0 and result.failed == 0, f"{module}: {result}"
