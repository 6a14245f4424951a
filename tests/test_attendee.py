"""The attendee edition, run as an attendee who has typed nothing: every notebook with an
exercise goes top to bottom in quick mode (Run All), every check shows ❌ with a hint, and no
solution is executable.

The Run All runs every cell that blank exercises can change, and every cell those need. A cell
that is the instructor edition's own, cell for cell, and that nothing an exercise defines
reaches, is left to nbval, which runs the same code in the same order in `notebooks/` (CI runs
both): running it twice tested nothing more and was a third of CI's time (`left_to_nbval` says
which cells, and why the others run).

Slow (the notebooks take a few minutes in quick mode); each notebook runs in its own kernel,
in the attendee folder, with its own RAY_TMPDIR and HOME, and this checkout first on PYTHONPATH.
"""

import ast
import os
import re
import tempfile
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

import scripts.notebooks as nbtools
from course_lib import quick_mode

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


# ---------------------------------------------------------------------------------------------
# The cells nbval runs as they are: a blank exercise cannot reach them
# ---------------------------------------------------------------------------------------------

OWN_TAGS = {"exercise", "check", "yours"}       # the attendee's cells, their checks and runs
LIFECYCLE = {"init_ray", "init", "shutdown", "start", "stop", "close", "kill", "terminate"}
FILE_NAME = re.compile(r"\.(json|csv|svg|png|ipynb|ya?ml|txt|pt|npz|log)$")


def statements(source: str) -> list[ast.stmt]:
    """The cell's Python statements (its IPython `%` and `!` lines left out)."""
    return ast.parse("\n".join(line for line in source.splitlines()
                               if not line.lstrip().startswith(("%", "!")))).body


def reads_writes(node) -> tuple[set, set]:
    """The names `node` reads and binds (functions, classes and imports included)."""
    reads, writes = set(), set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            (reads if isinstance(n.ctx, ast.Load) else writes).add(n.id)
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            writes.add(n.name)
        elif isinstance(n, ast.Import | ast.ImportFrom):
            writes |= {(alias.asname or alias.name).split(".")[0] for alias in n.names}
    return reads, writes


def bound_inside(stmt) -> set:
    """The names a statement binds for its own use: loop, comprehension and `with` targets,
    exception names, parameters."""
    names, targets = set(), []
    for n in ast.walk(stmt):
        if isinstance(n, ast.For | ast.AsyncFor | ast.comprehension):
            targets.append(n.target)
        elif isinstance(n, ast.withitem) and n.optional_vars is not None:
            targets.append(n.optional_vars)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
        elif isinstance(n, ast.arguments):
            names |= {a.arg for a in (*n.posonlyargs, *n.args, *n.kwonlyargs, n.vararg, n.kwarg)
                      if a is not None}
    return names | {m.id for t in targets for m in ast.walk(t) if isinstance(m, ast.Name)}


def acts_on_the_session(body: list[ast.stmt]) -> bool:
    """Ray started or shut down anywhere in the cell, or a top-level call that starts or stops
    something the cell did not make itself (a cluster, a server): later cells run in what it
    leaves."""
    for call in (n for n in ast.walk(ast.Module(body, type_ignores=[])) if isinstance(n, ast.Call)):
        if ast.unparse(call.func) in ("init_ray", "ray.init", "ray.shutdown"):
            return True
    made = set()
    for stmt in body:
        if isinstance(stmt, ast.Expr | ast.Assign):
            for call in (n for n in ast.walk(stmt.value) if isinstance(n, ast.Call)):
                func = call.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(
                    func.value, ast.Name) else None
                if name in LIFECYCLE and owner not in made:
                    return True
        made |= reads_writes(stmt)[1]
    return False


def names_a_file(body: list[ast.stmt]) -> bool:
    """A file name or a path the cell opens: the attendee folder holds only the notebooks."""
    for n in ast.walk(ast.Module(body, type_ignores=[])):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and FILE_NAME.search(n.value):
            return True
        if isinstance(n, ast.Call) and getattr(n.func, "id", None) in ("Path", "open") and (
                n.args and isinstance(n.args[0], ast.Constant)):
            return True
    return False


def same_in_this_run(source: str) -> bool:
    """Whether each `NAME = value  # attendee edition: other` line of an instructor cell gives
    NAME the same value in both editions in this run (07's race: `not quick_mode()` and `False`
    in quick mode), so that its attendee edition runs what nbval runs."""
    lines = list(nbtools.ATTENDEE_LINE.finditer(source))
    try:
        return bool(lines) and all(eval(m["value"], {"quick_mode": quick_mode}) ==
                                   eval(m["other"], {"quick_mode": quick_mode}) for m in lines)
    except Exception:              # a value that needs the notebook's names: not the same
        return False


def left_to_nbval(instructor, attendee) -> dict[int, str]:
    """Of the attendee edition's code cells, by index: the reason each one runs; the cells
    without one are left to nbval.

    A cell runs when it differs from every code cell of the instructor edition (nbval never
    runs it; an attendee-edition line that gives its name the same value in this run is no
    difference: `same_in_this_run`); is the attendee's, or runs their pieces; reads a name that
    such a cell's statements bound (or a name bound from those, and so on); starts or stops
    what later cells run in; names a file; has an IPython `%` or `!` line; or binds a name that
    a running cell reads. Every other cell reads only what the instructor edition's own cells
    made, so nbval's run of it in `notebooks/` is this run: the set-up before the first
    exercise too (05's DQN run and 08's check of the AWS file are nbval's alone)."""
    shared = {c.source for c in instructor.cells if c.cell_type == "code"}
    shared |= {nbtools.attendee_lines(c.source) for c in instructor.cells
               if c.cell_type == "code" and same_in_this_run(c.source)}
    code = [c for c in attendee.cells if c.cell_type == "code"]
    why, reached = {}, set()       # reached: names bound from what an exercise defines
    for i, cell in enumerate(code):
        tags = set(cell.metadata.get("tags", []))
        magic = re.search(r"^\s*[%!]", cell.source, re.MULTILINE)
        body = statements(cell.source)
        attendees = tags & OWN_TAGS or nbtools.ATTENDEE_CALLS.search(cell.source)
        own = cell.source not in shared or attendees
        for stmt in body:
            if isinstance(stmt, ast.Import | ast.ImportFrom):
                continue
            reads, writes = reads_writes(stmt)
            touched = (reads - bound_inside(stmt)) & reached
            if own or touched:
                reached |= writes
                if touched and not own:
                    why.setdefault(i, f"reads {', '.join(sorted(touched))}, which an "
                                      f"exercise reaches")
        if cell.source not in shared:
            why[i] = "the attendee edition's own code"
        elif attendees:
            why[i] = "an exercise, its check, or a run of the attendee's pieces"
        elif magic:
            why[i] = "an IPython % or ! line"
        elif acts_on_the_session(body):
            why[i] = "starts or stops what later cells run in"
        elif names_a_file(body):
            why[i] = "names a file"
    needed = set()                 # names the running cells read before binding them
    for i in reversed(range(len(code))):
        bound, reads = set(), set()
        for stmt in statements(code[i].source):
            stmt_reads, stmt_writes = reads_writes(stmt)
            reads |= stmt_reads - bound - bound_inside(stmt)
            bound |= stmt_writes
        if i not in why and bound & needed:
            why[i] = f"binds {', '.join(sorted(bound & needed))}, which a running cell reads"
        if i in why:
            needed |= reads
    return why


def attendee_and_instructor(source_cells: list[tuple[str, list]], differs: dict[int, str]):
    """Two toy editions from (source, tags) pairs; `differs` gives the instructor edition's
    source where the attendee edition has its own."""
    cells = [nbformat.v4.new_code_cell(src, metadata={"tags": tags}) for src, tags in source_cells]
    instructor = [nbformat.v4.new_code_cell(differs.get(i, src)) for i, (src, _) in
                  enumerate(source_cells)]
    return nbformat.v4.new_notebook(cells=instructor), nbformat.v4.new_notebook(cells=cells)


def test_only_cells_no_exercise_reaches_are_left_to_nbval():
    instructor, attendee = attendee_and_instructor([
        ("import numpy as np\nx = 1", []),                          # 0 set-up a cell reads
        ("shown = np.ones(3)\nprint(shown)", []),                   # 1 set-up no cell reads
        ("def piece():\n    raise NotImplementedError", ["exercise"]),   # 2 the attendee's
        ("y = piece", []),                                           # 3 reads piece
        ("z = [v for v in (y, 2)]", []),                             # 4 reads y, bound from it
        ("cost = np.sqrt(x)\nfor r in range(3):\n    cost += r", []),   # 5 left to nbval
        ("print(cost)", []),                                         # 6 left to nbval
        ("w = x + 1", []),                                           # 7 a running cell reads w
        ("print(w, z)", []),                                         # 8 reads z
        ("local.stop()", []),                                        # 9 stops what others use
        ("run = make()\nrun.close()", []),                           # 10 closes its own: left
        ("data = load('figures/x.json')", []),                       # 11 names a file
        ("v = 2", []),                                               # 12 differs
        ("%matplotlib inline\nprint(x)", []),                        # 13 a magic line
        ("if x:\n    ray.shutdown()", []),                           # 14 Ray, however deep
        ("FULL = False  # instructor edition: not quick_mode()", []),   # 15 the same in quick mode
        ("BIG = 1  # instructor edition: 2", []),                      # 16 not the same
    ], differs={12: "v = 3", 15: "FULL = not quick_mode()  # attendee edition: False",
                16: "BIG = 2  # attendee edition: 1"})
    assert quick_mode()                                            # conftest.py's default
    why = left_to_nbval(instructor, attendee)
    assert sorted(set(range(17)) - set(why)) == [1, 5, 6, 10, 15]
    assert why[0] == "binds x, which a running cell reads" and why[2].startswith("an exercise")
    assert why[3].startswith("reads piece") and why[4].startswith("reads y")
    assert why[7].startswith("binds w") and why[8].startswith("reads z")
    assert why[9].startswith("starts or stops") and why[11] == "names a file"
    assert why[12] == "the attendee edition's own code" and why[13] == "an IPython % or ! line"
    assert why[14].startswith("starts or stops")
    assert why[16] == "the attendee edition's own code"


@pytest.mark.parametrize("path", WITH_EXERCISES, ids=lambda p: p.stem)
def test_run_all_with_blank_exercises(attendee_dir, path, tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_QUICK", "1")
    monkeypatch.setenv("RAY_TMPDIR", tempfile.mkdtemp(prefix="rt-att-", dir="/tmp"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    nb = nbformat.read(attendee_dir / path.name, as_version=4)
    why = left_to_nbval(nbformat.read(path, as_version=4), nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    for i in set(range(len(code))) - set(why):
        code[i].source = "# left to nbval: notebooks/ has this cell, and no exercise reaches it"
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
