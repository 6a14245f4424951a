"""Predictions that are not spoiled: every "Predict, then run" prompt sits right before a cell
tagged `prediction`, notebooks 02 to 08 ask at least one, and the attendee edition shows no
output (and no execution count) in a tagged cell, so the answer appears only when the attendee
runs it."""

import nbformat
import pytest

import scripts.notebooks as nbtools

NOTEBOOKS = nbtools.all_notebooks()
PROMPT = "**Predict, then run.**"


def tagged(cell, tag):
    return tag in cell.metadata.get("tags", [])


def measuring_cells(nb):
    """For each prediction prompt, the first code cell after it that the attendee runs."""
    cells = nb.cells
    for i, cell in enumerate(cells):
        if cell.cell_type == "markdown" and PROMPT in cell.source:
            yield cell, next(c for c in cells[i + 1:]
                             if c.cell_type == "code" and not tagged(c, "ci"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_prediction_prompt_precedes_a_tagged_cell(path):
    nb = nbformat.read(path, as_version=4)
    pairs = list(measuring_cells(nb))
    if path.name[:2] >= "02":
        assert pairs, f"{path.name}: no {PROMPT!r} prompt"
    for prompt, cell in pairs:
        assert tagged(cell, "prediction"), (
            f"the cell after the prompt {prompt.source[:60]!r} is not tagged prediction:\n"
            f"{cell.source[:200]}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_attendee_edition_hides_the_measured_answers(path):
    instructor = nbformat.read(path, as_version=4)
    attendee = nbtools.student_version(nbformat.read(path, as_version=4))
    shown = {c.id: c for c in attendee.cells}
    predictions = [c for c in instructor.cells if tagged(c, "prediction")]
    assert all(c.cell_type == "code" for c in predictions)
    for cell in predictions:
        copy = shown[cell.id]
        assert copy.outputs == [] and copy.execution_count is None, cell.source[:200]
        assert copy.source == cell.source
    others = [c for c in instructor.cells if c.cell_type == "code" and c.outputs
              and not {"prediction", "exercise", "check", "ci", "solution"}
              & set(c.metadata.get("tags", []))]
    assert all(shown[c.id].outputs == c.outputs for c in others), "other outputs are kept"


def test_a_prediction_cell_loses_its_output_in_the_attendee_edition():
    """The rule itself, on a two-cell notebook."""
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell(f"{PROMPT} Faster or slower?"),
        nbformat.v4.new_code_cell("print(42)", execution_count=3, metadata={
            "tags": ["prediction"]}, outputs=[nbformat.v4.new_output(
                "stream", name="stdout", text="42\n")])])
    cell = nbtools.student_version(nb).cells[1]
    assert cell.outputs == [] and cell.execution_count is None
