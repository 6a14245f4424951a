"""The attendee edition, run as an attendee who has typed nothing: every notebook with an
exercise goes top to bottom in quick mode (Run All), every check shows ❌ with a hint, and no
solution is executable.

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


def has_exercise(path) -> bool:
    return any(tagged(c, "exercise") or tagged(c, "check")
               for c in nbformat.read(path, as_version=4).cells)


WITH_EXERCISES = [p for p in NOTEBOOKS if has_exercise(p)]


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p not in WITH_EXERCISES],
                         ids=lambda p: p.stem)
def test_a_notebook_without_exercises_runs_as_nbval_runs_it(attendee_dir, path):
    """Its attendee edition is its instructor edition's code, cell for cell, less the cells
    tagged `ci` (asserts for the test run): nbval's run of notebooks/ runs the same code, so a
    second Run All here (half a minute in CI) would test nothing more."""
    instructor = [c.source for c in nbformat.read(path, as_version=4).cells
                  if c.cell_type == "code" and not tagged(c, "ci")]
    attendee = [c.source for c in nbformat.read(attendee_dir / path.name, as_version=4).cells
                if c.cell_type == "code"]
    assert attendee == instructor


@pytest.mark.parametrize("path", WITH_EXERCISES, ids=lambda p: p.stem)
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
