"""Every exercise checker accepts the notebook's solution and rejects its TODO stub with a hint.

The cells are read from the committed notebooks, so a checker and its exercise cannot drift.
"""

import ast
import re
from pathlib import Path

import nbformat
import pytest
from ray.job_submission import JobSubmissionClient

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


def check_cells():
    """(notebook number, source) of every check cell, in notebook order."""
    for path in NOTEBOOKS:
        for cell in nbformat.read(path, as_version=4).cells:
            if "check" in cell.metadata.get("tags", []):
                yield int(path.name[:2]), cell.source


def run_check(check_source: str, namespace: dict):
    """Execute the check cell; return the value of its last expression (the CheckResult)."""
    tree = ast.parse(check_source)
    *body, last = tree.body
    exec(compile(ast.Module(body, type_ignores=[]), "<check>", "exec"), namespace)
    return eval(compile(ast.Expression(last.value), "<check>", "eval"), namespace)


@pytest.fixture(scope="module")
def job_client():
    """The Jobs API of a real one-node cluster, for the exercise that submits a job."""
    from course_lib.cluster import LocalCluster

    with LocalCluster(num_workers=0, cpus_per_node=1) as cluster:
        yield JobSubmissionClient(cluster.dashboard_url, headers=cluster.headers)


@pytest.mark.parametrize("stub,solution,check", list(exercise_groups()))
def test_checker_rejects_stub_and_accepts_solution(ray_local, request, stub, solution, check):
    namespace: dict = {"exercises": exercises}
    if re.search(r"\bclient\b", check):
        namespace["client"] = request.getfixturevalue("job_client")
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


def test_every_lesson_has_an_exercise():
    numbers = {number for number, _ in check_cells()}
    assert numbers == set(range(1, len(NOTEBOOKS))), numbers


def test_checkers_are_declared_in_notebook_order_and_each_is_used_once():
    """CHECKERS lists the checkers notebook by notebook, in the order the check cells call them,
    and every checker has exactly one check cell (no dead or duplicated checker)."""
    called = [(number, name) for number, source in check_cells()
              for name in re.findall(r"exercises\.(check_\w+)\(", source)]
    declared = [(check.notebook, name) for name, check in exercises.CHECKERS.items()]
    assert sorted(declared, key=lambda item: item[0]) == declared, "sections out of order"
    assert sorted(called) == sorted(declared)
    assert len(set(called)) == len(called)


def test_a_checker_reports_an_exception_in_one_line_and_never_raises():
    def broken(*args):
        raise ValueError("first line\nsecond line")

    result = exercises.check_td_target(broken)
    assert not result.passed and "ValueError: first line" in result.message
    assert "second line" not in result.message


def test_student_version_moves_solutions_after_their_check_as_markdown():
    nb = nbformat.read(NOTEBOOKS[1], as_version=4)
    solutions = [c.source for c in nb.cells if "solution" in c.metadata.get("tags", [])]
    student = nbtools.student_version(nb)
    tags = [set(c.metadata.get("tags", [])) for c in student.cells]
    assert not any(t & {"solution", "ci"} for t in tags)
    exercise_cells = [c for c, t in zip(student.cells, tags, strict=True)
                      if t & {"exercise", "check"}]
    assert exercise_cells and all(c.outputs == [] for c in exercise_cells)
    assert any("raise NotImplementedError" in c.source for c in exercise_cells)
    reveals = [i for i, t in enumerate(tags) if "solution-reveal" in t]
    assert len(reveals) == len(solutions)
    for i, source in zip(reveals, solutions, strict=True):
        cell = student.cells[i]
        assert cell.cell_type == "markdown" and source.strip() in cell.source
        assert cell.source.startswith("<details>")
        assert "check" in tags[i - 1]            # right after its check
    assert "Solution" in student.cells[0].source


def test_workshop_is_created_once_and_refreshed_with_a_backup(tmp_path):
    folder = tmp_path / "workshop"
    nbtools.workshop(folder)
    mine = folder / NOTEBOOKS[1].name
    mine.write_text(mine.read_text().replace("TODO", "MY EDIT"))
    assert "exists" in nbtools.workshop(folder)
    assert "MY EDIT" in mine.read_text()                       # a second make lab keeps it
    message = nbtools.workshop(folder, refresh=True)
    [backup] = tmp_path.glob("workshop.backup-*")
    assert str(backup) in message and "MY EDIT" in (backup / mine.name).read_text()
    assert "MY EDIT" not in mine.read_text()
    assert sorted(p.name for p in folder.glob("*.ipynb")) == [p.name for p in NOTEBOOKS]
