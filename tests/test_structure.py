"""The shape of `course_lib`: three layers (the RL core; `teaching/`, the exercises, quizzes and
demos; `viz/`, the pictures), the core never importing teaching code and drawing only lazily; no
import cycle at run time, one way from SAC's driver to its learner, every module under 400
lines, and one trainer protocol."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.imports import imported

ROOT = Path(__file__).resolve().parents[1] / "course_lib"
TEACHING, VIZ = "course_lib.teaching", "course_lib.viz"


def module_names() -> dict[str, Path]:
    names = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _package(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def in_layer(name: str, layer: str) -> bool:
    return name == layer or name.startswith(layer + ".")


def teaching_code(modules: dict[str, Path]) -> set[str]:
    """The teaching layer, and any module elsewhere that is teaching code by what it declares
    (`teaching_marks`), with the packages that hold one (`exercises`, when it sat directly in
    course_lib): so an import of teaching code is found wherever that code lives."""
    marked = {name for name, path in modules.items()
              if in_layer(name, TEACHING) or teaching_marks(path)}
    parts = [name.split(".") for name in marked]
    return marked | {".".join(p[:i]) for p in parts for i in range(2, len(p))}


def core_modules() -> dict[str, Path]:
    """The RL core: every module of course_lib outside `teaching/` and `viz/` (and not
    teaching code by what it declares)."""
    modules = module_names()
    teaching = teaching_code(modules)
    return {name: path for name, path in modules.items()
            if name not in teaching and not in_layer(name, VIZ)}


def layer_breaches(name: str, path: Path, teaching: frozenset[str] = frozenset({TEACHING})
                   ) -> list[str]:
    """How the core module `name` breaks the layering: an import of teaching code (a module
    in or under one of `teaching`) anywhere, even under TYPE_CHECKING, or of a picture module
    at module level (a class body runs at import too); an import inside a function, run only
    when it draws, is allowed. One line per import statement, in line order."""
    package, found = _package(name, path), []
    todo: list[tuple[ast.AST, bool]] = [(ast.parse(path.read_text()), True)]
    while todo:
        node, top = todo.pop()
        inner = top and not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        todo.extend((child, inner) for child in ast.iter_child_nodes(node))
        modules = imported(node, package)
        taught = [m for m in modules if any(in_layer(m, layer) for layer in teaching)]
        drawn = [m for m in modules if top and in_layer(m, VIZ)]
        if taught:
            found.append((node.lineno, f"imports {max(taught, key=len)} (teaching code)"))
        elif drawn:
            found.append((node.lineno, f"imports {max(drawn, key=len)} at module level "
                                       "(import it inside the function that draws)"))
    return [f"{name}:{line} {what}" for line, what in sorted(found)]


def teaching_marks(path: Path) -> list[str]:
    """What makes a module teaching code, read from its syntax: it declares exercise checkers
    (`@checker(...)`) or quiz questions (`Question(...)`), or shows widgets (ipywidgets)."""
    marks = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                "checker" in ast.unparse(d).split("(")[0] for d in node.decorator_list):
            marks.add("declares exercise checkers")
        elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith("Question"):
            marks.add("declares quiz questions")
        elif any(in_layer(m, "ipywidgets") for m in imported(node, "")):
            marks.add("shows widgets")
    return sorted(marks)


def run_time_imports(name: str, path: Path, modules) -> set[str]:
    """The course_lib modules `name` imports when it runs: at the top or inside a function,
    not under `if TYPE_CHECKING` (never run). A package importing its own submodules is an
    edge like any other: a submodule that imports its package back closes a cycle."""
    package = _package(name, path)
    found, todo = set(), [ast.parse(path.read_text())]
    while todo:
        node = todo.pop()
        if _type_checking_only(node):
            continue
        todo.extend(ast.iter_child_nodes(node))
        found |= imported(node, package)
    return {m for m in found if m in modules and m != name}


def import_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as a path [a, b, ..., a], or None."""
    state: dict[str, int] = {}          # 1: on the current path, 2: done

    def visit(node, path):
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                return path[path.index(dep):] + [dep]
            if dep not in state and (cycle := visit(dep, path + [dep])):
                return cycle
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start, [start])):
            return cycle
    return None


def test_import_cycle_finds_a_cycle_and_none_in_a_chain():
    assert import_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert import_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_course_lib_module_imports_one_that_imports_it_back():
    modules = module_names()
    graph = {name: run_time_imports(name, path, modules) for name, path in modules.items()}
    assert import_cycle(graph) is None


def test_layer_breaches_finds_teaching_anywhere_and_viz_only_at_module_level(tmp_path):
    path = tmp_path / "example.py"
    path.write_text("from course_lib.viz import plotting\n"
                    "class A:\n    from course_lib.viz.display import show_source\n"
                    "def f():\n    from course_lib.viz import render\n"
                    "    from course_lib.teaching import exercises\n"
                    "if TYPE_CHECKING:\n    from .teaching.quiz import Question\n")
    breaches = layer_breaches("course_lib.example", path)
    assert [b.split(" (")[0].removesuffix(" at module level") for b in breaches] == [
        "course_lib.example:1 imports course_lib.viz.plotting",
        "course_lib.example:3 imports course_lib.viz.display.show_source",
        "course_lib.example:6 imports course_lib.teaching.exercises",
        "course_lib.example:8 imports course_lib.teaching.quiz.Question"]


def test_the_core_never_imports_teaching_code_and_draws_only_lazily():
    """A newcomer reads the RL core without the exercises, quizzes or plots: no core module
    imports `course_lib.teaching` (the teaching layer builds on the core, never the other way),
    and `course_lib.viz` only inside the function that draws."""
    core, teaching = core_modules(), frozenset(teaching_code(module_names()))
    assert "course_lib.trainer" in core and "course_lib.distributed.driver" in core
    assert [b for name, path in sorted(core.items())
            for b in layer_breaches(name, path, teaching)] == []


def test_teaching_code_lives_in_the_teaching_layer():
    """The layers are packages of their own, and what makes code teaching code (exercise
    checkers, quiz questions, widgets) is in `course_lib.teaching`, nowhere else."""
    modules = module_names()
    assert TEACHING in modules and VIZ in modules, "course_lib/teaching/ and course_lib/viz/"
    outside = {name: marks for name, path in modules.items()
               if not in_layer(name, TEACHING) and (marks := teaching_marks(path))}
    assert outside == {}


def test_sac_learner_does_not_depend_on_the_driver():
    """The maths (`sac.learner`) is used without Ray; the driver (`sac.parallel`) builds on it,
    not the other way round, not even for a type annotation."""
    tree = ast.parse((ROOT / "sac" / "learner.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "course_lib.sac.parallel" not in imported


def test_every_module_is_under_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in ROOT.rglob("*.py")
            if (n := len(p.read_text().splitlines())) >= 400}
    assert long == {}


@pytest.mark.parametrize("name", ["course_lib.viz.render", "course_lib.cli", "course_lib.trainer",
                                  "course_lib.runs", "course_lib.results"])
def test_each_module_imports_first_in_a_fresh_interpreter(name):
    done = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_trainers_declare_the_protocol_the_loop_uses():
    """`run_training` calls what `Trainable` declares; `extras` has a default there, so no
    trainer is asked by `hasattr` whether it has one."""
    from course_lib import trainer
    from course_lib.apex import ApexTrainer
    from course_lib.dqn import DQNTrainer
    from course_lib.sac import SACTrainer
    from course_lib.teaching.rllib_compare import RLlibTrainer

    for cls in (ApexTrainer, DQNTrainer, SACTrainer, RLlibTrainer):
        assert issubclass(cls, trainer.Trainable)
    assert trainer.Trainable.__abstractmethods__ == {"step", "state", "get_weights", "close"}
    assert "hasattr" not in Path(trainer.__file__).read_text()
    for cls in (ApexTrainer, DQNTrainer, SACTrainer):
        assert cls.config_class.__name__ == cls.__name__.replace("Trainer", "Config")


def test_an_algorithm_is_its_trainer_class_and_policy():
    """`AlgoSpec` holds the trainer class: the config class, the env check and `train` come
    from it, so no algorithm writes a wrapper or its env check twice."""
    from course_lib import algorithms, envs
    from course_lib.apex import ApexTrainer
    from course_lib.dqn import DQNTrainer
    from course_lib.sac import SACTrainer

    for name, cls, wrong_env in (("apex", ApexTrainer, "Pendulum-v1"),
                                 ("dqn", DQNTrainer, "Pendulum-v1"),
                                 ("sac", SACTrainer, "CartPole-v1")):
        algorithm = algorithms.load_algorithm(name)
        assert algorithm.trainer is cls and algorithm.config is cls.config_class
        assert algorithm.trainer.algo == name
        env = envs.make_env(wrong_env)
        with pytest.raises(ValueError):
            algorithm.check_env(env)
        env.close()
