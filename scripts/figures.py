"""Numbers in the documents, filled from the outputs that measured them.

    python scripts/figures.py fill     # write the current values (make slides / notebooks / bench)
    python scripts/figures.py check    # list the values that are not current (exit 1 if any)

A measured number is never typed into a deck, `slides/FAQ.md`, `slides/INSTRUCTOR.md` or the
README: it is a marker that names its source, and `fill` writes the value between the marks.
The source stays readable in the Markdown; GitHub and the decks show only the value:

    <!--fig nb:07_rllib duration_s .0f-->780<!--/fig--> s
    <!--fig bench:scaling summary[latency_ms=2,variant=apex-2].seconds_vs_dqn .2f-->0.22<!--/fig-->

A source is `nb:<notebook stem> <key>` (the notebook's metadata `course.<key>`, written by
`scripts/notebooks.py execute`) or `bench:<name> <path>` (`bench/results/<name>.json`; a path
is dot-separated keys, and `[k=v,...]` picks the one list item whose fields match). The last
word is a format spec. A whole table is a generated block, rewritten by `fill` too:

    <!-- generated: agenda -->...<!-- end generated: agenda -->

`agenda` (slides/INSTRUCTOR.md): per notebook, its "Your turn" and demo minutes (summed from
its deck's slide titles), its run time in the day (scripts/day.py's) and the minutes left for
slides in its slot; `day` (the same guide): each notebook's material against its slot
(scripts/day.py).
tests/test_narrative.py checks that every value is current and that no measured-looking
number stands outside a marker.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: every document whose numbers come from outputs (the notebooks have their own check)
DOCUMENTS = (sorted((ROOT / "slides").glob("*.md")) + [ROOT / "README.md"])
MARKER = re.compile(r"<!--fig (?P<source>[^>]*?)-->(?P<value>.*?)<!--/fig-->")
BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)"
                   r"(<!-- end generated: (?P=name) -->)", re.DOTALL)
#: a deck's slide title that gives minutes: "## Your turn: the driver (18 min)", "## Demos (9 min)"
ALLOTTED = re.compile(r"^##\s+.*\((\d+) min\)\s*$", re.MULTILINE)
#: the minutes of slides and discussion a slot must keep beside its exercises and its run
SLIDES_MIN = 5


class FigureError(Exception):
    """A marker names a source that does not exist: the message says which and where."""


def _select(value, step: str, source: str):
    name, _, where = step.partition("[")
    if name:
        if not isinstance(value, dict) or name not in value:
            raise FigureError(f"{source}: no key {name!r}")
        value = value[name]
    if where:
        wanted = dict(pair.split("=", 1) for pair in where.rstrip("]").split(","))
        found = [item for item in value
                 if all(str(item.get(k)) == v or _same_number(item.get(k), v)
                        for k, v in wanted.items())]
        if len(found) != 1:
            raise FigureError(f"{source}: [{where} matches {len(found)} items, not one")
        value = found[0]
    return value


def _same_number(a, b: str) -> bool:
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return False


def notebook_meta(stem: str) -> dict:
    """The `course` metadata of notebooks/<stem>.ipynb (mode, commit, duration_s, ...)."""
    path = ROOT / "notebooks" / f"{stem}.ipynb"
    if not path.exists():
        raise FigureError(f"nb:{stem}: no notebook {path.relative_to(ROOT)}")
    return json.loads(path.read_text())["metadata"].get("course", {})


def value_of(source: str) -> str:
    """The formatted current value of one marker's source ("nb:07_rllib duration_s .0f")."""
    words = source.split()
    if len(words) != 3:
        raise FigureError(f"{source!r}: write '<kind>:<name> <key or path> <format>'")
    origin, path, spec = words
    kind, _, name = origin.partition(":")
    if kind == "nb":
        value = notebook_meta(name)
    elif kind == "bench":
        file = ROOT / "bench" / "results" / f"{name}.json"
        if not file.exists():
            raise FigureError(f"{source}: no {file.relative_to(ROOT)}")
        value = json.loads(file.read_text())
    else:
        raise FigureError(f"{source!r}: the kind is nb: or bench:, not {kind!r}")
    for step in path.split("."):
        value = _select(value, step, source)
    try:
        return format(value, spec)
    except (TypeError, ValueError) as exc:
        raise FigureError(f"{source}: cannot format {value!r} as {spec!r}") from exc


def agenda_rows() -> list[tuple[str, int, int, float, int]]:
    """(notebook, slot, exercise minutes, run minutes in the day, slide minutes left) per deck.
    The run is the day's (scripts/day.py): the appendix left out, a cell the attendee edition
    runs in quick mode by default counted with its time there."""
    day = _day()
    rows = []
    for deck in sorted((ROOT / "slides").glob("[0-9][0-9]_*.md")):
        text = deck.read_text()
        slot = int(re.search(r"^minutes:\s*(\d+)", text, re.MULTILINE).group(1))
        exercises = sum(int(m) for m in ALLOTTED.findall(text))
        run_min = day.material(ROOT / "notebooks" / f"{deck.stem}.ipynb").run
        rows.append((deck.stem, slot, exercises, run_min,
                     slot - exercises - math.ceil(run_min)))
    return rows


def agenda_block() -> str:
    lines = ["| notebook | slot (min) | exercises and demos (min) | run in the day (min) "
             "| left for slides (min) |",
             "| --- | --- | --- | --- | --- |"]
    lines += [f"| {nb} | {slot} | {ex} | {run:.1f} | {left} |"
              for nb, slot, ex, run, left in agenda_rows()]
    return "\n".join(lines) + "\n"


def _day():
    if __package__:
        import scripts.day as day
    else:                                   # run as a file: its folder is first on sys.path
        import day
    return day


def _day_block() -> str:
    return _day().day_block()


BLOCKS = {"agenda": agenda_block, "day": _day_block}


def filled(text: str) -> str:
    """`text` with every marker's value and every generated block current."""
    text = MARKER.sub(lambda m: f"<!--fig {m['source']}-->{value_of(m['source'])}<!--/fig-->",
                      text)

    def block(m: re.Match) -> str:
        if m["name"] not in BLOCKS:
            raise FigureError(f"generated block {m['name']!r}: known are {sorted(BLOCKS)}")
        return m.group(1) + BLOCKS[m["name"]]() + m.group(4)
    return BLOCK.sub(block, text)


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def stale(paths=DOCUMENTS) -> list[str]:
    """One line per document whose markers or blocks are not current."""
    out = []
    for path in paths:
        text = path.read_text()
        try:
            new = filled(text)
        except FigureError as exc:
            out.append(f"{_shown(path)}: {exc}")
            continue
        if new != text:
            old = {m["source"]: m["value"] for m in MARKER.finditer(text)}
            changed = [f"{s} ({old[s]} -> {m['value']})" for m in MARKER.finditer(new)
                       if old.get(s := m["source"]) != m["value"]]
            out.append(f"{_shown(path)}: " + ("; ".join(changed) or "a generated block"))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("fill", "check"))
    args = parser.parse_args(argv)
    if args.command == "check":
        lines = stale()
        print("\n".join(lines) if lines else "every figure in the documents is current")
        return 1 if lines else 0
    for path in DOCUMENTS:
        text = path.read_text()
        new = filled(text)
        if new != text:
            path.write_text(new)
            print(f"filled {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except FigureError as exc:
        sys.exit(f"figures: {exc}")
