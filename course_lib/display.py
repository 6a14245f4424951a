"""Showing the real code in a notebook: `show_source(obj)` renders what `inspect` finds.

Notebooks never paste copies of `course_lib` code (they drift); they show the source itself.
"""

from __future__ import annotations

import inspect


def _unwrap(obj):
    """The class or function behind a Ray actor class or remote function."""
    return getattr(obj, "__ray_actor_class__", None) or getattr(obj, "_function", None) or obj


class Source:
    """Source code that renders as a highlighted block in Jupyter and as plain text elsewhere."""

    def __init__(self, *objects):
        self.text = "\n\n".join(inspect.getsource(_unwrap(obj)).rstrip() for obj in objects)

    def __repr__(self) -> str:
        return self.text

    def _repr_markdown_(self) -> str:
        return f"```python\n{self.text}\n```"


def in_notebook() -> bool:
    """True inside a Jupyter kernel (where display handles work)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def show_source(*objects) -> Source:
    """The source of one or more functions, classes or modules, ready to display."""
    return Source(*objects)
