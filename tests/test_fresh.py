"""scripts/fresh.py and scripts/provenance.py on a throwaway git repository: an output is stale
when a statement of its code changed since the commit it records, not when a docstring or a
comment did; a result only when code its benchmark imports changed; outputs that record no
commit are listed as such."""

import json
import subprocess

import nbformat
import pytest

from scripts import fresh, notebooks, provenance

LIB = '"""A module."""\n\n\ndef f(x):\n    """Twice x."""\n    return 2 * x  # doubled\n'


def _git(root, *args):
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def _commit(root, message="c"):
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", message)
    return provenance.head(root)


@pytest.fixture
def repo(tmp_path):
    """A repository with one library module, one notebook and one result with its figure, the
    outputs recording the commit of the code they came from."""
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "config", "user.email", "t@example.com")
    _git(tmp_path, "config", "user.name", "t")
    (tmp_path / "course_lib").mkdir()
    (tmp_path / "course_lib" / "__init__.py").write_text("")
    (tmp_path / "course_lib" / "lib.py").write_text(LIB)
    (tmp_path / "course_lib" / "exercise.py").write_text("def check(x):\n    return x\n")
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "figures").mkdir()
    (tmp_path / "bench" / "__init__.py").write_text("")
    (tmp_path / "bench" / "speed.py").write_text("from course_lib.lib import f\nprint(f(1))\n")
    (tmp_path / "notebooks").mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("%matplotlib inline\nx = 1")])
    nbformat.write(nb, tmp_path / "notebooks" / "01_a.ipynb")
    code = _commit(tmp_path)
    nb.metadata["course"] = {"commit": code}
    nbformat.write(nb, tmp_path / "notebooks" / "01_a.ipynb")
    (tmp_path / "bench" / "results" / "speed.json").write_text(
        json.dumps({"meta": {"commit": code}, "rows": []}))
    (tmp_path / "bench" / "results" / "old.json").write_text(
        json.dumps({"meta": {"commit": "unknown: measured before provenance"}}))
    (tmp_path / "bench" / "figures" / "speed_curve.png").write_bytes(b"png")
    _commit(tmp_path, "outputs")
    return tmp_path


def _status(root) -> dict[str, str]:
    return {path: status for status, path, _ in fresh.check(root)}


def test_outputs_of_unchanged_code_are_fresh_and_unrecorded_ones_have_no_provenance(repo):
    assert _status(repo) == {"notebooks/01_a.ipynb": "fresh", "bench/results/speed.json": "fresh",
                             "bench/results/old.json": "no provenance",
                             "bench/figures/speed_curve.png": "fresh"}


def test_a_changed_docstring_or_comment_is_not_stale(repo):
    (repo / "course_lib" / "lib.py").write_text(
        LIB.replace("Twice x.", "Double x, reworded.").replace("# doubled", "# times two"))
    assert _status(repo)["bench/results/speed.json"] == "fresh"
    assert _status(repo)["notebooks/01_a.ipynb"] == "fresh"


def test_a_changed_statement_makes_every_output_of_that_code_stale(repo):
    (repo / "course_lib" / "lib.py").write_text(LIB.replace("2 * x", "3 * x"))
    status = _status(repo)
    assert status["notebooks/01_a.ipynb"] == "stale"
    assert status["bench/results/speed.json"] == "stale"
    assert status["bench/figures/speed_curve.png"] == "stale"       # drawn from speed.json
    detail = {path: d for _, path, d in fresh.check(repo)}
    assert "course_lib/lib.py" in detail["bench/results/speed.json"]


def test_bench_code_stales_results_only_and_a_notebook_its_own_cells(repo):
    (repo / "bench" / "speed.py").write_text("print(2)\n")
    assert _status(repo)["bench/results/speed.json"] == "stale"
    assert _status(repo)["notebooks/01_a.ipynb"] == "fresh"
    nb = nbformat.read(repo / "notebooks" / "01_a.ipynb", as_version=4)
    nb.cells[0].source = "%matplotlib inline\nx = 2"
    nbformat.write(nb, repo / "notebooks" / "01_a.ipynb")
    assert _status(repo)["notebooks/01_a.ipynb"] == "stale"


def test_a_result_is_stale_only_when_code_its_benchmark_imports_changed(repo):
    # course_lib/exercise.py is code no benchmark runs (a notebook's checker, say)
    (repo / "course_lib" / "exercise.py").write_text("def check(x):\n    return not x\n")
    status = _status(repo)
    assert status["notebooks/01_a.ipynb"] == "stale"                 # notebooks: all of it
    assert status["bench/results/speed.json"] == "fresh"
    assert status["bench/figures/speed_curve.png"] == "fresh"
    # once the benchmark's code imports it, the same kind of change makes its result stale
    (repo / "course_lib" / "lib.py").write_text(LIB + "from course_lib import exercise\n")
    (repo / "bench" / "results" / "speed.json").write_text(
        json.dumps({"meta": {"commit": _commit(repo, "lib imports exercise")}}))
    _commit(repo, "speed re-measured")
    assert _status(repo)["bench/results/speed.json"] == "fresh"
    (repo / "course_lib" / "exercise.py").write_text("def check(x):\n    return x + 1\n")
    assert _status(repo)["bench/results/speed.json"] == "stale"
    assert _status(repo)["bench/figures/speed_curve.png"] == "stale"


def test_data_a_notebook_reads_is_stale_when_the_code_its_command_ran_changed(repo):
    """notebooks/figures/*.json: the module its `meta.command` ran decides its code; a picture
    with its name is drawn from it, and a picture of its own (a screenshot) is no output."""
    figures = repo / "notebooks" / "figures"
    figures.mkdir()
    (repo / "bench" / "other.py").write_text("x = 1\n")
    code = _commit(repo)
    (figures / "speed_profile.json").write_text(json.dumps(
        {"meta": {"commit": code, "command": "python -m bench.speed --seconds 60"}}))
    (figures / "speed_profile.svg").write_text("<svg/>")
    (figures / "dashboard.png").write_bytes(b"png")
    _commit(repo, "data")
    assert fresh.producer({"command": "python bench/speed.py"}) == "bench.speed"
    reads = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        'profile = json.loads((FIGURES / "speed_profile.json").read_text())\n"other.json"')])
    assert fresh.results_loaded(nbformat.writes(reads), repo) == (
        "notebooks/figures/speed_profile.json",)           # a file there, not any JSON named
    status = _status(repo)
    assert status["notebooks/figures/speed_profile.json"] == "fresh"
    assert status["notebooks/figures/speed_profile.svg"] == "fresh"
    assert "notebooks/figures/dashboard.png" not in status
    (repo / "bench" / "other.py").write_text("x = 2\n")        # not imported by bench.speed
    assert _status(repo)["notebooks/figures/speed_profile.json"] == "fresh"
    (repo / "course_lib" / "lib.py").write_text(LIB.replace("2 * x", "3 * x"))
    status = _status(repo)
    assert status["notebooks/figures/speed_profile.json"] == "stale"
    assert status["notebooks/figures/speed_profile.svg"] == "stale"


def test_import_closure_follows_relative_imports_module_strings_and_f_strings(repo):
    files = {"bench/a.py": "from .b import g\n",
             "bench/b.py": "import importlib\nm = importlib.import_module('course_lib.lib')\n",
             "bench/c.py": "import subprocess\nsubprocess.run(['python', '-m', 'course_lib'])\n",
             "bench/d.py": "import importlib\nn = 'x'\n"
                           "importlib.import_module(f'course_lib.p{n}')\n",
             "course_lib/__main__.py": "from course_lib.exercise import check\n",
             "course_lib/pa.py": "", "course_lib/pb.py": "", "course_lib/q.py": ""}
    for path, text in files.items():
        (repo / path).write_text(text)
    closure = {m: fresh.import_closure(f"bench.{m}", repo) for m in "abcd"}
    assert closure["a"] == {"bench/__init__.py", "bench/a.py", "bench/b.py",
                            "course_lib/__init__.py", "course_lib/lib.py"}
    assert "course_lib/exercise.py" in closure["c"]                  # through __main__
    assert {"course_lib/pa.py", "course_lib/pb.py"} <= closure["d"]
    assert "course_lib/q.py" not in closure["d"]
    assert fresh.import_closure("bench.nothing_here", repo) is None


def test_a_command_line_the_library_only_writes_out_is_not_in_the_closure(repo):
    """course_lib's resume hint names `python -m course_lib train`: text for a person, not a
    process it starts, so a benchmark that imports it does not depend on the command line
    (and through it on every trainer); a benchmark that runs the command line does."""
    files = {"course_lib/hint.py": "def hint():\n"
                                   "    return ['python', '-m', 'course_lib', 'train']\n",
             "course_lib/__main__.py": "from course_lib.exercise import check\n",
             "bench/writes.py": "from course_lib.hint import hint\nprint(hint())\n",
             "bench/runs.py": "import subprocess\n"
                              "subprocess.run(['python', '-m', 'course_lib', 'train'])\n"}
    for path, text in files.items():
        (repo / path).write_text(text)
    writes = fresh.import_closure("bench.writes", repo)
    assert "course_lib/hint.py" in writes and "course_lib/__main__.py" not in writes
    assert "course_lib/exercise.py" not in writes
    runs = fresh.import_closure("bench.runs", repo)
    assert {"course_lib/__main__.py", "course_lib/exercise.py"} <= runs


def test_a_notebook_is_stale_when_a_result_it_loads_is_re_measured(repo):
    # notebooks print bench/results/*.json through bench_results.load: a new run of that
    # benchmark makes the printed figures old even though no code changed
    loads = nbformat.v4.new_code_cell(
        "from course_lib.teaching import bench_results\nb = bench_results.load('speed')")
    nb = nbformat.v4.new_notebook(cells=[loads])
    nbformat.write(nb, repo / "notebooks" / "02_b.ipynb")
    nb.metadata["course"] = {"commit": _commit(repo, "a notebook that loads speed.json")}
    nbformat.write(nb, repo / "notebooks" / "02_b.ipynb")         # executed at that commit
    _commit(repo, "its outputs")
    assert _status(repo)["notebooks/02_b.ipynb"] == "fresh"
    (repo / "bench" / "results" / "speed.json").write_text(
        json.dumps({"meta": {"commit": provenance.head(repo)}, "rows": [1]}))
    status = _status(repo)
    assert status["notebooks/02_b.ipynb"] == "stale"
    assert status["notebooks/01_a.ipynb"] == "fresh"                 # it loads no result
    detail = {path: d for _, path, d in fresh.check(repo)}
    assert "bench/results/speed.json changed" in detail["notebooks/02_b.ipynb"]
    # executed after the re-run (make refresh: benchmarks first, nothing committed between):
    # the fingerprint it recorded of what it printed matches, whatever its commit holds
    result = repo / "bench" / "results" / "speed.json"
    nb.metadata["course"]["data"] = {"bench/results/speed.json": provenance.fingerprint(result)}
    nbformat.write(nb, repo / "notebooks" / "02_b.ipynb")
    assert _status(repo)["notebooks/02_b.ipynb"] == "fresh"
    result.write_text(json.dumps({"meta": {"commit": provenance.head(repo)}, "rows": [2]}))
    assert _status(repo)["notebooks/02_b.ipynb"] == "stale"


def test_a_run_on_uncommitted_code_is_stale_and_exit_status_follows_report(repo, monkeypatch):
    data = json.loads((repo / "bench" / "results" / "speed.json").read_text())
    data["meta"]["commit"] += provenance.DIRTY
    (repo / "bench" / "results" / "speed.json").write_text(json.dumps(data))
    assert _status(repo)["bench/results/speed.json"] == "stale"
    monkeypatch.setattr(fresh, "ROOT", repo)
    monkeypatch.setattr(fresh.check, "__defaults__", (repo,))
    assert fresh.main([]) == 1 and fresh.main(["--report"]) == 0


def test_a_run_beside_uncommitted_files_it_does_not_import_is_judged_by_its_own_code(repo):
    """A result stamped dirty whose uncommitted files are outside its benchmark's imports (a
    checker written while it ran) is fresh once they are committed; one inside it is stale."""
    path = repo / "bench" / "results" / "speed.json"
    data = json.loads(path.read_text())
    data["meta"]["commit"] += provenance.DIRTY
    data["meta"]["uncommitted"] = ["course_lib/exercise.py"]
    path.write_text(json.dumps(data))
    assert _status(repo)["bench/results/speed.json"] == "fresh"
    assert _status(repo)["bench/figures/speed_curve.png"] == "fresh"
    data["meta"]["uncommitted"] = ["course_lib/exercise.py", "course_lib/lib.py"]
    path.write_text(json.dumps(data))
    detail = {p: d for _, p, d in fresh.check(repo)}
    assert _status(repo)["bench/results/speed.json"] == "stale"
    assert "course_lib/lib.py" in detail["bench/results/speed.json"]
    assert _status(repo)["bench/figures/speed_curve.png"] == "stale"


def test_stamp_names_the_uncommitted_files(repo):
    assert provenance.stamp(("course_lib",), repo)["uncommitted"] == []
    (repo / "course_lib" / "lib.py").write_text(LIB + "y = 1\n")
    stamp = provenance.stamp(("course_lib",), repo)
    assert stamp["commit"].endswith(provenance.DIRTY)
    assert stamp["uncommitted"] == ["course_lib/lib.py"]
    (repo / "course_lib" / "lib.py").write_text(LIB)
    (repo / "bench" / "results" / "speed.json").write_text("{}")     # an output, not code
    assert provenance.stamp(("course_lib", "bench"), repo)["uncommitted"] == []


def test_notebooks_execute_refuses_uncommitted_code_unless_allowed(repo):
    notebook = repo / "notebooks" / "01_a.ipynb"
    head = provenance.head(repo)
    assert notebooks.code_stamp(notebook, root=repo) == head
    (repo / "bench" / "speed.py").write_text("print(3)\n")
    with pytest.raises(RuntimeError, match=r"^uncommitted changes \(bench/speed.py\): commit "
                                           r"them first.*--allow-dirty\)$"):
        notebooks.code_stamp(notebook, root=repo)
    assert notebooks.code_stamp(notebook, allow_dirty=True, root=repo) == head + "-dirty"


def test_a_result_a_library_module_loads_for_a_notebook_counts_as_read(repo):
    # notebook 05's capstone prints the committed ladder through `ladder.committed_rung`, which
    # loads scaling.json itself: a re-run ladder makes that notebook stale too
    (repo / "course_lib" / "board.py").write_text(
        "def rung():\n    from course_lib.teaching.bench_results import load\n"
        "    return load(\"speed\")\n")
    (repo / "course_lib" / "uses_board.py").write_text("from course_lib import board\n")
    cells = [nbformat.v4.new_code_cell("%matplotlib inline\nfrom course_lib import uses_board"),
             nbformat.v4.new_code_cell("!ls\nimport numpy as np")]
    text = nbformat.writes(nbformat.v4.new_notebook(cells=cells))
    assert fresh.results_loaded(text, repo) == ("bench/results/speed.json",)
    other = nbformat.v4.new_code_cell("from course_lib import lib")
    assert fresh.results_loaded(nbformat.writes(nbformat.v4.new_notebook(cells=[other])),
                                repo) == ()


SHARED = ('"""Helpers two benchmarks share."""\nimport json\n\nRATE = 2\nTABLE = {"a": 1}\n\n\n'
          'def helper(x):\n    return RATE * x\n\n\ndef used(x):\n    return helper(x)\n\n\n'
          'def entry():\n    return json.dumps(TABLE)\n\n\n'
          'if __name__ == "__main__":\n    print(entry())\n')


def test_a_change_to_code_a_benchmark_never_runs_leaves_its_result_fresh(repo):
    """bench/speed.py imports one function of a shared module; another entry point in that
    module, and the table only it reads, change: the result stays fresh. A constant the
    imported function reaches changes: it is stale."""
    (repo / "bench" / "shared.py").write_text(SHARED)
    (repo / "bench" / "speed.py").write_text("from bench.shared import used\nprint(used(1))\n")
    (repo / "bench" / "results" / "speed.json").write_text(
        json.dumps({"meta": {"commit": _commit(repo, "a shared module")}}))
    _commit(repo, "speed re-measured")
    assert _status(repo)["bench/results/speed.json"] == "fresh"
    (repo / "bench" / "shared.py").write_text(
        SHARED.replace('{"a": 1}', '{"a": 2}').replace("dumps(TABLE)", "dumps(TABLE, indent=1)"))
    assert _status(repo)["bench/results/speed.json"] == "fresh"
    (repo / "bench" / "shared.py").write_text(SHARED.replace("RATE = 2", "RATE = 3"))
    assert _status(repo)["bench/results/speed.json"] == "stale"


def test_a_slice_keeps_what_runs_on_import_and_what_the_names_reach():
    import ast

    from scripts.imports import code_slice
    tree = ast.parse("import os\nA = 1\nB = os.getcwd()\nC = {'f': f}\n\n\n@register\n"
                     "def d():\n    pass\n\n\ndef f():\n    return g()\n\n\ndef g():\n"
                     "    return A\n\n\ndef h():\n    pass\n\n\nif __name__ == '__main__':\n"
                     "    h()\n")
    kept = [ast.unparse(n).splitlines()[0] for n in code_slice(tree, frozenset({"f"})).body]
    assert kept == ["import os", "A = 1", "B = os.getcwd()", "@register", "def f():",
                    "def g():"]
    assert code_slice(tree, None) is tree


def test_a_folder_named_in_a_path_is_not_a_module_it_runs(repo):
    files = {"course_lib/__main__.py": "from course_lib.exercise import check\n",
             "bench/paths.py": "from pathlib import Path\nOUT = Path('.') / 'course_lib' / 'x'\n",
             "bench/runs.py": "import subprocess\nsubprocess.run(['python', '-m', 'course_lib'])\n"}
    for path, text in files.items():
        (repo / path).write_text(text)
    assert "course_lib/__main__.py" not in fresh.import_closure("bench.paths", repo)
    assert "course_lib/__main__.py" in fresh.import_closure("bench.runs", repo)
