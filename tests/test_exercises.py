"""Every exercise checker accepts the notebook's solution and rejects its TODO stub with a hint.

The cells are read from the committed notebooks, so a checker and its exercise cannot drift.
"""

import ast
from pathlib import Path

import nbformat
import pytest

import scripts.notebooks as nbtools
from course_lib import exercises

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def exercise_groups():
    for path in NOTEBOOKS:
        code = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
        for i, cell in enumerate(code):
            if "exercise" in cell.metadata.get("tags", []):
                yield pytest.param(cell.source, code[i + 1].source, code[i + 2].source,
                                   id=f"{path.stem}-{i}")


def run_check(check_source: str, namespace: dict):
    """Execute the check cell; return the value of its last expression (the CheckResult)."""
    tree = ast.parse(check_source)
    *body, last = tree.body
    exec(compile(ast.Module(body, type_ignores=[]), "<check>", "exec"), namespace)
    return eval(compile(ast.Expression(last.value), "<check>", "eval"), namespace)


@pytest.mark.parametrize("stub,solution,check", list(exercise_groups()))
def test_checker_rejects_stub_and_accepts_solution(ray_local, stub, solution, check):
    namespace: dict = {"exercises": exercises}
    exec(stub, namespace)
    result = run_check(check, namespace)
    assert not result.passed, "the checker accepted the TODO stub"
    assert result.hint and "Hint:" in repr(result)

    exec(solution, namespace)
    result = run_check(check, namespace)
    assert result.passed, repr(result)
    assert repr(result).startswith("✅")


def test_there_are_exercises():
    assert len(list(exercise_groups())) >= 3


def test_student_version_drops_solutions_and_clears_exercise_outputs():
    nb = nbformat.read(NOTEBOOKS[1], as_version=4)
    student = nbtools.student_version(nb)
    tags = [set(c.metadata.get("tags", [])) for c in student.cells]
    assert not any("solution" in t for t in tags)
    exercise_cells = [c for c, t in zip(student.cells, tags, strict=True)
                      if t & {"exercise", "check"}]
    assert exercise_cells and all(c.outputs == [] for c in exercise_cells)
    assert any("raise NotImplementedError" in c.source for c in exercise_cells)
