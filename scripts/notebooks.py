"""Notebook maintenance: re-execute them in full mode, or write the attendee versions.

    python scripts/notebooks.py execute [NOTEBOOK ...]   # in place, full mode (make notebooks)
    python scripts/notebooks.py student [--out build/student]   # make student

`execute` records the mode, date, duration and machine in the notebook's metadata under
"course"; tests/test_notebooks.py checks that every committed notebook was run in full mode.
`student` drops the cells tagged `solution` and clears the outputs of `exercise` and `check`
cells, so attendees start from the TODO stubs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def all_notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def execute(path: Path, timeout_s: int = 3600) -> float:
    """Run `path` top to bottom in full mode in a fresh kernel and save it in place."""
    from nbclient import NotebookClient

    os.environ["COURSE_QUICK"] = "0"
    os.environ["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="rt-nb-")
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=timeout_s, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    seconds = time.perf_counter() - start
    nb.metadata["course"] = {
        "mode": "full",
        "executed": dt.date.today().isoformat(),
        "duration_s": round(seconds, 1),
        "machine": f"{os.cpu_count()} CPUs, {platform.machine()}, "
                   f"Python {platform.python_version()}",
    }
    nbformat.write(nb, path)
    return seconds


def student_version(nb):
    """The attendee copy: no solution cells, no outputs on exercise and check cells."""
    cells = []
    for cell in nb.cells:
        tags = set(cell.metadata.get("tags", []))
        if "solution" in tags:
            continue
        if cell.cell_type == "code" and tags & {"exercise", "check"}:
            cell.outputs, cell.execution_count = [], None
        cells.append(cell)
    nb.cells = cells
    return nb


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("execute", help="re-execute notebooks in full mode, in place")
    run.add_argument("notebooks", nargs="*", type=Path)
    stu = sub.add_parser("student", help="write attendee versions without solutions")
    stu.add_argument("--out", type=Path, default=ROOT / "build" / "student")
    args = parser.parse_args(argv)

    if args.command == "execute":
        for path in args.notebooks or all_notebooks():
            if not path.exists():
                print(f"error: no notebook at {path}", file=sys.stderr)
                return 2
            print(f"executing {path.name} in full mode ...", flush=True)
            print(f"  done in {execute(path):.0f} s", flush=True)
    else:
        args.out.mkdir(parents=True, exist_ok=True)
        for path in all_notebooks():
            nb = student_version(nbformat.read(path, as_version=4))
            nbformat.write(nb, args.out / path.name)
        print(f"attendee notebooks written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
