"""Showing the real code in a notebook: `show_source(obj)` renders what `inspect` finds.

Notebooks never paste copies of `course_lib` code (they drift); they show the source itself,
and the decks' diagrams with `show_diagram(name)`.
"""

from __future__ import annotations

import base64
import html
import importlib
import inspect
from pathlib import Path

DIAGRAM_WIDTH = 860      # px: a diagram's width in a notebook (it shrinks with a narrow window)


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


def show_source(*objects) -> Source:
    """The source of one or more functions, classes or modules, ready to display."""
    return Source(*objects)


class SvgPicture:
    """An SVG file for display as an HTML `<img>` holding the file as a data URI.

    Why not IPython's `SVG`: JupyterLab renders an `image/svg+xml` output only in a notebook it
    trusts, and it trusts none it did not execute itself (a fresh clone, the attendee edition
    `make lab` writes); there the reader sees `<IPython.core.display.SVG object>` until the cell
    runs. An `<img>` in sanitized HTML renders trusted or not. The file's text goes in as
    written, so the output is the same on every machine and Python version."""

    def __init__(self, path: Path, width: int | None = None):
        self.path, self.width = path, width
        self.svg = path.read_text(encoding="utf-8").strip()

    def __repr__(self) -> str:
        return f"[picture {self._name()}]"

    def _name(self) -> str:
        from course_lib.workspace import REPO

        return (self.path.relative_to(REPO) if self.path.is_relative_to(REPO)
                else self.path).as_posix()

    def _repr_html_(self) -> str:
        data = base64.b64encode(self.svg.encode("utf-8")).decode("ascii")
        width = f' width="{self.width}"' if self.width else ""
        return (f'<img src="data:image/svg+xml;base64,{data}"{width} '
                f'alt="{html.escape(self._name())}">')


def show_svg(path, width: int | None = None) -> SvgPicture:
    """The SVG file `path` for display, `width` pixels wide (default: the file's own width),
    never wider than the notebook."""
    return SvgPicture(Path(path).resolve(), width)


def show_diagram(name: str) -> SvgPicture:
    """The diagram `slides/diagrams/<name>.svg`, the same picture the decks show, for display.

    Read from the repository (found from this package, so it works from notebooks/, from an
    attendee's workshop/ folder and offline); a missing name fails with the list of diagrams.
    The diagrams have no size of their own (a viewBox 1000 units wide): they are shown
    DIAGRAM_WIDTH pixels wide, where their 20-unit text reads at about 17 px.
    """
    from course_lib.workspace import REPO

    folder = REPO / "slides" / "diagrams"
    path = folder / f"{name}.svg"
    if not path.is_file():
        known = sorted(p.stem for p in folder.glob("*.svg"))
        raise FileNotFoundError(f"no diagram slides/diagrams/{name}.svg; known: {known}")
    return show_svg(path, width=DIAGRAM_WIDTH)
