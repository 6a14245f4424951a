"""Predictions that are not spoiled: every "Predict, then run" prompt sits right before a cell
tagged `prediction`, notebooks 02 to 08 ask at least one, and the attendee edition shows no
output (and no execution count) in a tagged cell, so the answer appears only when the attendee
runs it."""

import re

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
    pieces = nbtools.exercise_names(instructor)
    yours = [c for c in instructor.cells if c.id in shown and c.cell_type == "code" and (
        nbtools.runs_attendee_code(c, pieces) or "yours" in c.metadata.get("tags", []))]
    assert all(shown[c.id].outputs == [] for c in yours), "a run of the attendee's pieces shows"
    others = [c for c in instructor.cells if c.cell_type == "code" and c.outputs
              and not {"prediction", "exercise", "check", "ci", "solution", "yours"}
              & set(c.metadata.get("tags", [])) and not nbtools.runs_attendee_code(c, pieces)
              and not nbtools.ATTENDEE_LINE.search(c.source)]
    assert all(shown[c.id].outputs == c.outputs for c in others), "other outputs are kept"


#: what a run of the attendee's pieces prints ("gradient average: yours; ...", "course_lib's (yours:
#: ...)", "your learner_loop (fixed)"), not a docstring that names a slot ("a slot: yours in 03")
SPEAKS_OF_YOURS = re.compile(r":\s*yours(?:;|\s*$)|\(yours:|\bby your \w+|"
                             r"\byour \w+ \((?:fixed|not fixed)", re.MULTILINE)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_attendee_edition_shows_no_run_of_the_attendees_pieces(path):
    """Issue 38: "sum-tree descent: yours" is never on screen before the attendee has written
    a line. Every cell that runs the attendee's pieces loses its output, and no output left
    in the attendee edition speaks of their pieces."""
    attendee = nbtools.student_version(nbformat.read(path, as_version=4))
    for cell in attendee.cells:
        text = "".join(out.get("text", "") + str(out.get("data", {}).get("text/plain", ""))
                       for out in cell.get("outputs", []))
        assert not (said := SPEAKS_OF_YOURS.search(text)), f"{cell.id}: {said[0]!r} is on screen"


def test_a_cell_that_runs_the_attendees_piece_loses_its_output():
    """The rule itself: a cell naming a function an exercise cell defines, or calling
    `exercises.yours`, is cleared; a cell that does neither keeps its output."""
    def ran(source):
        return nbformat.v4.new_code_cell(source, execution_count=1, outputs=[
            nbformat.v4.new_output("stream", name="stdout", text="42\n")])

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("def mine(x):\n    raise NotImplementedError",
                                  metadata={"tags": ["exercise"]}),
        ran("print(mine(2))"), ran("slots, said = exercises.yours(Trainer, piece=f)"),
        ran("print(mine_too(2), other.mine)")])
    cells = nbtools.student_version(nb).cells
    assert [bool(c.outputs) for c in cells[1:]] == [False, False, True]


def test_a_prediction_cell_loses_its_output_in_the_attendee_edition():
    """The rule itself, on a two-cell notebook."""
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell(f"{PROMPT} Faster or slower?"),
        nbformat.v4.new_code_cell("print(42)", execution_count=3, metadata={
            "tags": ["prediction"]}, outputs=[nbformat.v4.new_output(
                "stream", name="stdout", text="42\n")])])
    cell = nbtools.student_version(nb).cells[1]
    assert cell.outputs == [] and cell.execution_count is None


def test_the_attendee_edition_clears_runs_of_the_attendees_pieces_and_swaps_its_lines():
    """A cell that calls `exercises.yours(` (or is tagged `yours`) loses its output: the
    committed "yours" is course_lib's solutions; `NAME = value  # attendee edition: other`
    becomes `NAME = other`, its output cleared."""
    out = [nbformat.v4.new_output("stream", name="stdout", text="explorer send step: yours\n")]
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("own, said = exercises.yours(T, outbox=Outbox)",
                                  execution_count=1, outputs=out),
        nbformat.v4.new_code_cell("rollout(env)", execution_count=2, outputs=out,
                                  metadata={"tags": ["yours"]}),
        nbformat.v4.new_code_cell("FULL = not quick_mode()  # attendee edition: False\nx = 1",
                                  execution_count=3, outputs=out),
        nbformat.v4.new_code_cell("print(1)", execution_count=4, outputs=out)])
    cells = nbtools.student_version(nb).cells
    assert [c.outputs for c in cells] == [[], [], [], out]
    assert cells[2].source == "FULL = False  # instructor edition: not quick_mode()\nx = 1"


# A prediction's reading, right under the cell that measures it, is folded (`<details>`) in
# every lesson notebook, so the answer is not on screen before the run.
FOLDED_FROM = "01"


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.name[:2] >= FOLDED_FROM],
                         ids=lambda p: p.stem)
def test_a_reading_right_under_a_prediction_is_folded(path):
    cells = [c for c in nbformat.read(path, as_version=4).cells if not tagged(c, "ci")]
    for cell, after in zip(cells, cells[1:], strict=False):
        if tagged(cell, "prediction") and after.cell_type == "markdown":
            text = after.source.lstrip()
            assert text.startswith(("#", "<details>")), (
                f"{path.name}: the prose right under the prediction cell {cell.id} reads its "
                f"result on screen: fold it in <details> or start a new section:\n{text[:200]}")
