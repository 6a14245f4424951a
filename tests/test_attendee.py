"""The attendee edition, run as an attendee who has typed nothing: every notebook goes top to
bottom in quick mode (Run All), every check shows ❌ with a hint, and no solution is executable.

Slow (the notebooks take about 6 minutes in quick mode); each notebook runs in its own kernel,
in the attendee folder, with its own RAY_TMPDIR and HOME, and this checkout first on PYTHONPATH.
"""

import os
import tempfile
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

import scripts.notebooks as nbtools

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = nbtools.all_notebooks()
CELL_TIMEOUT_S = 900


def tagged(cell, tag):
    return tag in cell.metadata.get("tags", [])


def solution_lines(instructor):
    """Lines that only the notebook's solution cells contain (not a stub, not the lesson)."""
    solutions, others = set(), set()
    for cell in instructor.cells:
        if cell.cell_type == "code":
            lines = {line.strip() for line in cell.source.splitlines() if len(line.strip()) > 8}
            (solutions if tagged(cell, "solution") else others).update(lines)
    return solutions - others


@pytest.fixture(scope="module")
def attendee_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("attendee") / "workshop"
    nbtools.workshop(folder)
    return folder


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_no_solution_code_in_an_executable_cell(attendee_dir, path):
    secret = solution_lines(nbformat.read(path, as_version=4))
    attendee = nbformat.read(attendee_dir / path.name, as_version=4)
    for cell in attendee.cells:
        if cell.cell_type == "code":
            assert not tagged(cell, "solution")
            leaked = secret & {line.strip() for line in cell.source.splitlines()}
            assert not leaked, f"solution code in an executable cell: {sorted(leaked)[:3]}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_run_all_with_blank_exercises(attendee_dir, path, tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_QUICK", "1")
    monkeypatch.setenv("RAY_TMPDIR", tempfile.mkdtemp(prefix="rt-att-", dir="/tmp"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    nb = nbformat.read(attendee_dir / path.name, as_version=4)
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(attendee_dir)}})
    try:
        client.execute()
    except CellExecutionError as err:
        pytest.fail(f"Run All stopped in {path.name}: {str(err)[-1500:]}")
    for cell in nb.cells:
        if tagged(cell, "check"):
            text = "".join(out.get("text", "") + out.get("data", {}).get("text/plain", "")
                           for out in cell.outputs)
            assert "❌" in text and "Hint:" in text, f"check without ❌ and hint:\n{cell.source}"
