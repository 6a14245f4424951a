"""Notebook maintenance: re-execute them in full mode, or write the attendee edition.

    python scripts/notebooks.py execute [NOTEBOOK ...]     # in place, full mode (make notebooks)
    python scripts/notebooks.py student [--out build/student]   # make student
    python scripts/notebooks.py workshop [--dir workshop] [--refresh]   # make lab / refresh

`execute` records the mode, date, duration, machine and the commit it ran (`course.commit`) in the
notebook's metadata under "course", and a fingerprint of each data file it prints (a benchmark
result, notebooks/figures data: `course.data`; `make fresh` lists it when that data changes),
and prints the run-time banner (`bench_results.runtime`) from that record into its cell; a
notebook with cells tagged `quick-by-default` (07's race) is then run once more, as its attendee
edition, and those cells' times there are recorded too (`course.attendee_s`: the day counts them);
tests/test_notebooks.py checks that every committed notebook was run in full mode. It runs
committed code only: it refuses when course_lib/, bench/ or the notebook has uncommitted
changes, unless `--allow-dirty` (the commit is then recorded as `<commit>-dirty`, which
`make fresh` lists as stale).

The attendee edition (`student_version`) is what attendees open. Each solution cell becomes a
collapsed Markdown block placed after its check, so neither Shift+Enter nor Run All executes it;
outputs of exercise and check cells are cleared, and so are those of the cells tagged
`prediction` (they measure what a "Predict, then run" prompt asks the attendee to guess, so
their full-run outputs would spoil it) and `yours`, and of every cell that runs the attendee's
pieces (`runs_attendee_code`: it calls `exercises.yours(` or `from_notebook(`, or names a
function an exercise cell defines; "sum-tree descent: yours" must not be on screen before the
attendee has written a line, and the committed run's "yours" is course_lib's solutions, not
theirs); a code line `NAME = value  # attendee edition: other` reads `NAME = other` there, its
output cleared (07 runs its race in quick mode by default); cells tagged `ci` (the asserts that
keep the test run
honest) are left out; the first cell says how to reveal a solution.

`workshop` writes the attendee edition into an attendee's own folder once and never overwrites
it (their edits are theirs); `--refresh` moves the old folder to a timestamped backup first.
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import os
import platform
import re
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from course_lib.teaching.bench_results import QUICK_BY_DEFAULT, cell_seconds, runtime

if __package__:          # `python -m scripts.notebooks`, or imported (the tests)
    from scripts.fresh import results_loaded
    from scripts.provenance import CODE, fingerprint, stamp
else:                    # `python scripts/notebooks.py`: Python puts this folder first on sys.path
    from fresh import results_loaded
    from provenance import CODE, fingerprint, stamp

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def all_notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def code_stamp(path: Path, allow_dirty: bool = False, root: Path = ROOT) -> str:
    """The commit a run of notebook `path` records; a one-line RuntimeError when course_lib/,
    bench/ or the notebook has uncommitted changes (unless `allow_dirty`: then "<commit>-dirty")."""
    recorded = stamp((*CODE, path.resolve().relative_to(root.resolve())), root)
    if recorded["uncommitted"] and not allow_dirty:
        shown = ", ".join(recorded["uncommitted"][:3])
        raise RuntimeError(f"uncommitted changes ({shown}): commit them first, so that "
                           f"{path.name} records the code it ran (or pass --allow-dirty)")
    return recorded["commit"]


def execute(path: Path, timeout_s: int = 3600, allow_dirty: bool = False) -> float:
    """Run `path` top to bottom in full mode in a fresh kernel and save it in place, recording
    the commit it ran (see `code_stamp`)."""
    from nbclient import NotebookClient

    commit = code_stamp(path, allow_dirty)
    read = {name: fingerprint(ROOT / name) for name in results_loaded(path.read_text(), ROOT)}
    os.environ["COURSE_QUICK"] = "0"
    os.environ["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="rt-nb-")
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=timeout_s, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    seconds = time.perf_counter() - start
    nb.metadata["course"] = {
        "mode": "full",
        "commit": commit,
        "executed": dt.date.today().isoformat(),
        "duration_s": round(seconds, 1),
        "machine": f"{os.cpu_count()} CPUs, {platform.machine()}, "
                   f"Python {platform.python_version()}",
        **({"data": read} if read else {}),     # the benchmark results it printed, hashed
    }
    if any(QUICK_BY_DEFAULT in c.metadata.get("tags", []) for c in nb.cells):
        nb.metadata["course"]["attendee_s"] = attendee_seconds(path, timeout_s)
    for cell in nb.cells:                       # the banner, from the run just recorded
        if cell.cell_type == "code" and "runtime(" in cell.source:
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout",
                                                   text=runtime(path.stem, nb) + "\n")]
    nbformat.write(nb, path)
    return seconds


def attendee_seconds(path: Path, timeout_s: int) -> dict[str, float]:
    """{cell id: seconds} of the cells tagged `quick-by-default` (07's race), timed in the
    attendee edition as an attendee runs it: Run All in full mode, exercises blank, those cells
    in quick mode. The day (scripts/day.py) counts them with this time, not the full run's."""
    from nbclient import NotebookClient

    with tempfile.TemporaryDirectory(prefix="attendee-") as folder:
        workshop(Path(folder) / "workshop")
        copy = Path(folder) / "workshop" / path.name
        nb = nbformat.read(copy, as_version=4)
        NotebookClient(nb, timeout=timeout_s, kernel_name="python3",
                       resources={"metadata": {"path": str(copy.parent)}}).execute()
    return {c.id: round(cell_seconds(c), 1) for c in nb.cells
            if QUICK_BY_DEFAULT in c.metadata.get("tags", []) and cell_seconds(c) is not None}


REVEAL_NOTE = """

> **Attendee edition.** Each exercise is a cell with a `TODO` (in a "Find the bug" exercise, code
> with one planted fault to find and fix), followed by a check cell that shows
> ✅, or ❌ with what is wrong and a hint; the cells after it use `course_lib`'s own version, so
> Run All goes on past an unfinished exercise. Stuck? Under each check, click **▶ Solution** to
> unfold the worked answer, then type or copy it into the exercise cell and run the check again."""


# Code cells whose outputs the attendee edition clears: the attendee's own work, its check, the
# measurements that answer a prediction, and the runs of the attendee's own pieces (also found by
# their code: `runs_attendee_code`).
CLEARED_TAGS = {"exercise", "check", "prediction", "yours"}
ATTENDEE_CALLS = re.compile(r"\b(yours|from_notebook)\(")
#: `NAME = value  # attendee edition: other`: the line the attendee edition has instead
ATTENDEE_LINE = re.compile(r"^(?P<lead>\s*\w+\s*=\s*)(?P<value>.*?)\s*#\s*attendee edition:\s*"
                           r"(?P<other>.+)$", re.MULTILINE)


def exercise_names(nb) -> set[str]:
    """The functions and classes the notebook's exercise cells define: the attendee's pieces."""
    names = set()
    for cell in nb.cells:
        if cell.cell_type == "code" and "exercise" in cell.metadata.get("tags", []):
            names |= {node.name for node in ast.parse(cell.source).body
                      if isinstance(node, ast.FunctionDef | ast.ClassDef)}
    return names


def runs_attendee_code(cell, pieces: set[str]) -> bool:
    """Whether a code cell runs the attendee's pieces: it calls `exercises.yours(...)` or
    `from_notebook(...)`, or names one of `pieces` (`exercise_names`)."""
    if cell.cell_type != "code" or ATTENDEE_CALLS.search(cell.source):
        return cell.cell_type == "code"
    try:
        tree = ast.parse(cell.source)
    except SyntaxError:                        # a %magic line
        return False
    return any(isinstance(node, ast.Name) and node.id in pieces for node in ast.walk(tree))


def solution_markdown(solution):
    """A collapsed Markdown block with the solution's code: readable, never executed."""
    text = (f"<details><summary><b>Solution</b> (open once you have tried)</summary>\n\n"
            f"```python\n{solution.source.strip()}\n```\n\n</details>")
    return nbformat.v4.new_markdown_cell(text, id=f"{solution.id}-md"[:64],
                                         metadata={"tags": ["solution-reveal"]})


def attendee_lines(source: str) -> str:
    """`source` with each `NAME = value  # attendee edition: other` line as `NAME = other`."""
    return ATTENDEE_LINE.sub(lambda m: f"{m['lead']}{m['other'].strip()}  # instructor "
                                       f"edition: {m['value']}", source)


def student_version(nb):
    """The attendee edition of notebook `nb` (changed in place and returned).

    A solution cell moves after the check that follows it, as collapsed Markdown; exercise,
    check, prediction and yours cells, and those that run the attendee's pieces, lose their
    outputs; an attendee edition line replaces its instructor line; `ci` cells go; the first
    cell gets the note on solutions.
    """
    cells, pending, pieces = [], [], exercise_names(nb)
    for cell in nb.cells:
        tags = set(cell.metadata.get("tags", []))
        if "ci" in tags:
            continue
        if "solution" in tags:
            pending.append(solution_markdown(cell))
            continue
        if cell.cell_type == "code" and (tags & CLEARED_TAGS or runs_attendee_code(cell, pieces)):
            cell.outputs, cell.execution_count = [], None
        if cell.cell_type == "code" and ATTENDEE_LINE.search(cell.source):
            cell.source = attendee_lines(cell.source)
            cell.outputs, cell.execution_count = [], None
        cells.append(cell)
        if "check" in tags:
            cells += pending
            pending = []
    if pending:
        raise ValueError(f"a solution without a check after it: {pending[0].source[:80]!r}")
    if any("solution-reveal" in c.metadata.get("tags", []) for c in cells):
        cells[0].source += REVEAL_NOTE
    nb.cells = cells
    return nb


def write_student(out: Path) -> list[Path]:
    """Write the attendee edition of every notebook into `out`; returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in all_notebooks():
        nb = student_version(nbformat.read(path, as_version=4))
        nbformat.write(nb, out / path.name)
        written.append(out / path.name)
    return written


def workshop(folder: Path, refresh: bool = False) -> str:
    """Create the attendee workspace `folder` unless it exists; with `refresh`, move an existing
    one to `<folder>.backup-<UTC time>` first. Returns what happened, for the terminal."""
    if folder.exists() and not refresh:
        return f"{folder} exists: opening it as it is (make workshop-refresh starts afresh)"
    note = ""
    if folder.exists():
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
        backup = folder.with_name(f"{folder.name}.backup-{stamp}")
        folder.rename(backup)
        note = f"; your previous edits are in {backup}"
    write_student(folder)
    return f"attendee notebooks written to {folder}{note}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("execute", help="re-execute notebooks in full mode, in place")
    run.add_argument("notebooks", nargs="*", type=Path)
    run.add_argument("--allow-dirty", action="store_true",
                     help="run with uncommitted changes (recorded as <commit>-dirty)")
    stu = sub.add_parser("student", help="write attendee versions without solutions")
    stu.add_argument("--out", type=Path, default=ROOT / "build" / "student")
    ws = sub.add_parser("workshop", help="create the attendee workspace if it does not exist")
    ws.add_argument("--dir", type=Path, default=ROOT / "workshop")
    ws.add_argument("--refresh", action="store_true",
                    help="regenerate it, moving the existing folder to a timestamped backup")
    args = parser.parse_args(argv)

    if args.command == "execute":
        for path in args.notebooks or all_notebooks():
            if not path.exists():
                print(f"error: no notebook at {path}", file=sys.stderr)
                return 2
            print(f"executing {path.name} in full mode ...", flush=True)
            try:
                print(f"  done in {execute(path, allow_dirty=args.allow_dirty):.0f} s",
                      flush=True)
            except RuntimeError as err:
                print(f"error: {err}", file=sys.stderr)
                return 2
    elif args.command == "student":
        write_student(args.out)
        print(f"attendee notebooks written to {args.out}")
    else:
        print(workshop(args.dir, args.refresh))
    return 0


if __name__ == "__main__":
    sys.exit(main())
