"""Hygiene of every committed notebook: run top to bottom in full mode, no errors, a title."""

import ast
import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_notebooks_are_numbered_in_sequence():
    numbers = [int(p.name[:2]) for p in NOTEBOOKS]
    assert numbers == list(range(len(numbers))), numbers


@pytest.fixture(params=NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def nb(request):
    return nbformat.read(request.param, as_version=4)


def test_executed_in_full_mode(nb):
    assert nb.metadata.get("course", {}).get("mode") == "full", \
        "re-run it with `make notebooks` (records the mode in the metadata)"


def test_kernel_is_python3(nb):
    assert nb.metadata["kernelspec"]["name"] == "python3"


def test_cells_ran_top_to_bottom(nb):
    counts = [c.execution_count for c in nb.cells if c.cell_type == "code"]
    assert counts == list(range(1, len(counts) + 1)), counts


def test_no_error_outputs(nb):
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            assert out.output_type != "error", \
                f"stored error: {out.get('ename')}: {out.get('evalue')}"
            assert out.get("name") != "stderr" or "Traceback" not in out.get("text", "")


def test_first_cell_has_title_and_learning_goals(nb):
    first = nb.cells[0]
    assert first.cell_type == "markdown"
    assert re.match(r"# \d\d · \S", first.source), first.source[:60]
    assert "**Learning goals**" in first.source


def test_plots_are_stored_as_images(nb):
    """A plain viewer (GitHub, nbviewer) shows the PNGs; a cell that plots must have one."""
    draws = re.compile(r"\bplot_\w+\(|plt\.(subplots|show)")
    for cell in nb.cells:
        if cell.cell_type == "code" and draws.search(cell.source):
            kinds = {k for out in cell.outputs for k in out.get("data", {})}
            assert "image/png" in kinds, f"no image stored for:\n{cell.source[:120]}"


def test_exercise_groups_are_complete(nb):
    """Each exercise cell is followed by a hidden solution cell and a check cell."""
    tagged = [(set(c.metadata.get("tags", [])), c) for c in nb.cells if c.cell_type == "code"]
    for i, (tags, _) in enumerate(tagged):
        if "exercise" in tags:
            (sol_tags, sol), (check_tags, check) = tagged[i + 1], tagged[i + 2]
            assert "solution" in sol_tags and sol.metadata["jupyter"]["source_hidden"]
            assert "check" in check_tags and "exercises.check_" in check.source


def test_lessons_free_of_test_scaffolding(nb):
    """nbval markers are cell tags, and asserts live in cells tagged `ci` (which the attendee
    edition leaves out), never in a lesson cell."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        assert "# NBVAL_" not in cell.source, "use the cell tag (nbval-ignore-output)"
        tags = set(cell.metadata.get("tags", []))
        if not tags & {"ci", "solution", "exercise", "check"}:
            python = "\n".join(line for line in cell.source.splitlines()
                               if not line.lstrip().startswith(("%", "!")))   # IPython magics
            asserts = [n for n in ast.walk(ast.parse(python)) if isinstance(n, ast.Assert)]
            assert not asserts, f"an assert in a lesson cell:\n{cell.source[:200]}"


GLOSSARY = "### Terms you meet here first"


def glossary_terms(nb) -> list[str]:
    """The terms of a notebook's glossary cell (the second cell), lower-cased; [] if none."""
    cell = nb.cells[1]
    if cell.cell_type != "markdown" or not cell.source.startswith(GLOSSARY):
        return []
    return [t.lower() for t in re.findall(r"^- \*\*(.+?)\*\*: \S", cell.source, flags=re.M)]


def test_each_lesson_has_a_glossary_of_its_new_terms():
    """Issue 27 item 8: right after the title cell of 01-08, 4 to 8 terms with a one-line
    definition each, and only terms met there first (none in an earlier notebook's list)."""
    seen: dict[str, str] = {}
    for path in NOTEBOOKS[1:]:
        terms = glossary_terms(nbformat.read(path, as_version=4))
        assert 4 <= len(terms) <= 8, f"{path.name}: the second cell must be '{GLOSSARY}' " \
                                     f"with 4-8 lines '- **term**: definition'"
        again = {t: seen[t] for t in terms if t in seen}
        assert not again, f"{path.name} repeats terms of earlier notebooks: {again}"
        seen |= dict.fromkeys(terms, path.name)
