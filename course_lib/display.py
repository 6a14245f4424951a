"""Showing the real code in a notebook: `show_source(obj)` renders what `inspect` finds.

Notebooks never paste copies of `course_lib` code (they drift); they show the source itself,
and the decks' diagrams with `show_diagram(name)`.
"""

from __future__ import annotations

import importlib
import inspect


def unwrap(obj):
    """The class or function behind a Ray actor class or remote function."""
    return getattr(obj, "__ray_actor_class__", None) or getattr(obj, "_function", None) or obj


def find_object(name: str):
    """The object a dotted name such as `course_lib.apex.Explorer.run` refers to, unwrapping
    Ray actor classes and remote functions on the way (the slide decks name code this way).

    Raises LookupError naming the part that does not exist."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if err.name is not None and not module_name.startswith(err.name):
                raise                       # the module exists but one of its imports does not
            continue
        for i, attr in enumerate(parts[cut:], start=cut):
            try:
                obj = getattr(unwrap(obj), attr)
            except AttributeError:
                raise LookupError(f"{name}: {'.'.join(parts[:i])} has no attribute {attr!r}") \
                    from None
        return unwrap(obj)
    raise LookupError(f"{name}: no module {parts[0]!r}")


class Source:
    """Source code that renders as a highlighted block in Jupyter and as plain text elsewhere."""

    def __init__(self, *objects):
        self.text = "\n\n".join(inspect.getsource(unwrap(obj)).rstrip() for obj in objects)

    def __repr__(self) -> str:
        return self.text

    def _repr_markdown_(self) -> str:
        return f"```python\n{self.text}\n```"


def in_notebook() -> bool:
    """True inside a Jupyter kernel (where display handles work): JupyterLab's, VS Code's, and
    Colab's, whose shell is a subclass of ipykernel's. False in a terminal IPython or plain
    Python. ipykernel is imported only when an IPython shell is running."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    from ipykernel.zmqshell import ZMQInteractiveShell

    return isinstance(shell, ZMQInteractiveShell)


def show_source(*objects) -> Source:
    """The source of one or more functions, classes or modules, ready to display."""
    return Source(*objects)


def show_diagram(name: str):
    """The diagram `slides/diagrams/<name>.svg`, the same picture the decks show, for display.

    Read from the repository (found from this package, so it works from notebooks/, from an
    attendee's workshop/ folder and offline); a missing name fails with the list of diagrams.
    """
    from IPython.display import SVG

    from course_lib.workspace import REPO

    folder = REPO / "slides" / "diagrams"
    path = folder / f"{name}.svg"
    if not path.is_file():
        known = sorted(p.stem for p in folder.glob("*.svg"))
        raise FileNotFoundError(f"no diagram slides/diagrams/{name}.svg; known: {known}")
    svg = SVG(filename=str(path))
    # the file's text as written: IPython re-writes an SVG through minidom, whose escaping of
    # quotes changed in Python 3.13, so the same file would display differently on 3.11 and 3.13
    svg._data = path.read_text(encoding="utf-8").strip()
    return svg
