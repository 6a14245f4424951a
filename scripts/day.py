"""The day, by measurement: each notebook's material in minutes against its slot.

    python scripts/day.py          # the table (slides/INSTRUCTOR.md holds it, generated)

A notebook's material is what an attendee does in its slot, in minutes:

- reading: the words of its Markdown cells and of its quiz (questions and options), at
  `WORDS_PER_MIN`; an exercise's own prompt (the Markdown cell right before its exercise cell,
  or one tagged `prompt`: 05's capstone) is in the deck's minutes for it;
- code: the non-blank lines of the code cells the attendee runs (not the exercises' own
  cells, nor `ci` ones) and of the source `show_source` prints, at `LINES_PER_MIN`;
- exercises: the "(N min)" of its deck's slide titles (its exercises, demos, discussion);
- run: each code cell's recorded time in the notebook's last full-mode execution (nbclient's
  timing per cell; `course.duration_s` is about their sum).

The appendix (the cells from a "# Appendix" heading on, `bench_results.day_and_appendix`) is
optional and not in the day. A cell the attendee edition runs in quick mode by default (tagged
`quick-by-default`: 07's race) counts with the time it took in the attendee edition's run that
scripts/notebooks.py times after the full one (`course.attendee_s`), or, where none is
recorded, with its full-mode time, an upper bound. A code cell
written since the last full-mode run has no time yet: the table counts it as 0 and says how
many there are. The deck's slides present the notebook's sections, so they are counted by the
reading. tests/test_day.py fails when a notebook's material exceeds its slot.
"""

from __future__ import annotations

import importlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORDS_PER_MIN = 200
LINES_PER_MIN = 30
#: a deck's slide title that gives minutes: "## Your turn: the driver (18 min)", "## Demos (9 min)"
ALLOTTED = re.compile(r"^##\s+.*\((\d+) min\)\s*$", re.MULTILINE)
EXERCISE_CELLS = {"exercise", "solution", "check"}


@dataclass
class Material:
    """One notebook's material, in minutes, against its slot."""

    notebook: str
    slot: int
    reading: float
    code: float
    exercises: int
    run: float
    untimed: int                 # code cells of the day with no recorded time yet

    @property
    def total(self) -> float:
        return self.reading + self.code + self.exercises + self.run

    @property
    def left(self) -> float:
        return self.slot - self.total


def words(text: str) -> int:
    return len(text.split())


def lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip())


def shown_lines(cell) -> int:
    """The lines of source a `show_source` cell printed (its text/plain output)."""
    if "show_source(" not in "".join(cell["source"]):
        return 0
    return sum(lines("".join(out.get("data", {}).get("text/plain", "")))
               for out in cell.get("outputs", []))


def quiz_words(stem: str) -> int:
    module = importlib.import_module(f"course_lib.teaching.quizzes.lesson{stem[:2]}")
    return sum(words(q.prompt) + sum(words(o.text) for o in q.options) for q in module.QUESTIONS)


def material(path: Path) -> Material:
    """The material of notebook `path` (its deck: slides/<stem>.md)."""
    from course_lib.teaching.bench_results import attendee_cell_seconds, day_and_appendix

    deck = (ROOT / "slides" / f"{path.stem}.md").read_text()
    slot = int(re.search(r"^minutes:\s*(\d+)", deck, re.MULTILINE).group(1))
    nb = json.loads(path.read_text())
    course = nb["metadata"].get("course", {})
    cells = [c for c in nb["cells"] if "ci" not in c["metadata"].get("tags", [])]
    day, appendix = day_and_appendix(cells)
    if appendix and day[-1]["cell_type"] == "markdown":   # the appendix's closing reading (08),
        day = day[:-1]                                     # not a last `ray.shutdown()`
    said = read = 0
    run, untimed = 0.0, 0
    for cell, after in zip(day, [*day[1:], None], strict=True):
        tags, source = set(cell["metadata"].get("tags", [])), "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            prompt = "prompt" in tags or (after is not None and "exercise" in
                                          after["metadata"].get("tags", []))
            said += 0 if prompt else words(source)
            continue
        seconds = attendee_cell_seconds(cell, course)
        run += seconds or 0
        untimed += seconds is None and "solution" not in tags
        if not tags & EXERCISE_CELLS:
            read += lines(source) + shown_lines(cell)
    return Material(path.stem, slot, (said + quiz_words(path.stem)) / WORDS_PER_MIN,
                    read / LINES_PER_MIN, sum(int(m) for m in ALLOTTED.findall(deck)), run / 60,
                    untimed)


def notebooks() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def day_block() -> str:
    """The day's table, Markdown (slides/INSTRUCTOR.md's generated block `day`)."""
    rows = [material(path) for path in notebooks()]
    out = [f"| notebook | slot | reading ({WORDS_PER_MIN} words/min) | code ({LINES_PER_MIN} "
           "lines/min) | exercises and demos | run | material | left |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for m in rows:
        run = f"{m.run:.1f}" + (f" (+{m.untimed} cells not run yet)" if m.untimed else "")
        out.append(f"| {m.notebook} | {m.slot} | {m.reading:.1f} | {m.code:.1f} | "
                   f"{m.exercises} | {run} | {m.total:.1f} | {m.left:+.1f} |")
    total = sum(m.total for m in rows)
    out.append(f"| **the day** | **{sum(m.slot for m in rows)}** | | | | | **{total:.1f}** | |")
    return "\n".join(out) + "\n"


def main() -> int:
    print(day_block(), end="")
    over = [m for m in map(material, notebooks()) if m.left < 0 or math.isnan(m.total)]
    for m in over:
        print(f"{m.notebook}: {m.total:.1f} min of material for a slot of {m.slot}")
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
