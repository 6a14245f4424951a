"""The install is declared once, in pyproject.toml: exact pins, every imported package among
them, and environment.yml installing the project through pip rather than repeating the pins."""

import ast
import importlib.metadata
import sys
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# The repository's own modules (imported by name from their folders), and optional imports
# guarded by `except ImportError` (render.write_gif prefers imageio, falls back to Pillow).
# this repository's own modules: the package, and the scripts that import each other by name
LOCAL = {"course_lib", "scripts", "browser_support", "helper", "conftest"} | {
    path.stem for folder in ("bench", "scripts", "tests") for path in (ROOT / folder).glob("*.py")}
OPTIONAL = {"imageio"}


def requirements() -> list[Requirement]:
    reqs = PROJECT["dependencies"] + [r for extra in PROJECT["optional-dependencies"].values()
                                      for r in extra]
    return [Requirement(r) for r in reqs]


def test_every_pin_is_exact():
    for req in requirements():
        if req.name == "course-lib":                 # an extra made of other extras
            continue
        spec = str(req.specifier)
        assert spec.startswith("==") and "," not in spec, f"{req.name} is not pinned: {spec}"


def imported_modules() -> dict[str, str]:
    """Top-level module -> one file importing it, for every import (also inside functions) in
    the code and tests of the repository."""
    found = {}
    for folder in ("course_lib", "scripts", "bench", "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    found.setdefault(name.split(".")[0], str(path.relative_to(ROOT)))
    return found


def test_every_imported_package_is_declared():
    declared = {req.name.lower().replace("_", "-") for req in requirements()}
    distributions = importlib.metadata.packages_distributions()
    undeclared = []
    for module, where in imported_modules().items():
        if module in sys.stdlib_module_names or module in LOCAL | OPTIONAL:
            continue
        # not installed here (cpprb on Python 3.13, by its marker): judged by its own name
        names = ({d.lower().replace("_", "-") for d in distributions.get(module, [])}
                 or {module.lower()})
        if not names & declared:
            undeclared.append(f"{module} ({where}; distribution {sorted(names) or '?'})")
    assert undeclared == [], "imported but not in pyproject.toml: " + ", ".join(undeclared)


def test_environment_yml_has_no_pins_of_its_own():
    """conda makes the Python; pip installs the project with its extras, pins and all."""
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    [pip] = [d["pip"] for d in env["dependencies"] if isinstance(d, dict)]
    assert sorted(d.split(">")[0].split("=")[0].split("<")[0] for d in conda) == ["pip", "python"]
    python = next(d for d in conda if d.startswith("python"))
    assert python.removeprefix("python") == PROJECT["requires-python"].replace(" ", "")
    assert pip == ["-e .[test,rllib]"]


def test_ray_starts_without_the_slow_jsonschema_import():
    """jsonschema >= 4.25 imports rfc3987_syntax, which builds an Earley parser at import time
    (1.8 s here); Ray imports jsonschema in every worker process. The pin keeps it out."""
    import subprocess

    code = "import sys, ray; print('rfc3987_syntax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[-1] == "False", "a Ray process imported rfc3987_syntax: check the jsonschema pin"


def test_setup_check_accepts_the_pythons_of_requires_python(monkeypatch):
    from course_lib import setup_check

    assert setup_check.check_python().ok                      # the Python running the tests
    for version, ok in (("3.11.9", True), ("3.13.1", True), ("3.10.14", False), ("3.14.0", False)):
        monkeypatch.setattr(setup_check.platform, "python_version", lambda v=version: v)
        check = setup_check.check_python()
        assert check.ok is ok, version
        assert ok or "<3.14" in check.fix and ">=3.11" in check.fix
