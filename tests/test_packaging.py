"""The install is pinned in two places (pyproject.toml, environment.yml): they must agree."""

import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def pyproject_pins() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + [r for extra in project["optional-dependencies"].values()
                                      for r in extra]
    return {Requirement(r).name: str(Requirement(r).specifier) for r in reqs
            if not r.startswith("course-lib")}


def conda_pins() -> tuple[str, dict[str, str]]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python"))
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    pins = {Requirement(r).name: str(Requirement(r).specifier)
            for r in pip if not r.startswith("-e")}
    return python, pins


def test_every_pin_is_exact():
    for name, spec in pyproject_pins().items():
        assert spec.startswith("==") and "," not in spec, f"{name} is not pinned exactly: {spec}"


def test_environment_yml_matches_pyproject():
    python, pins = conda_pins()
    assert pins == pyproject_pins()
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert python == "python=3.11" and requires == "==3.11.*"


def test_environment_yml_installs_the_package_itself():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "-e ." in pip


def test_ray_starts_without_the_slow_jsonschema_import():
    """jsonschema >= 4.25 imports rfc3987_syntax, which builds an Earley parser at import time
    (1.8 s here); Ray imports jsonschema in every worker process. The pin keeps it out."""
    import subprocess
    import sys

    code = "import sys, ray; print('rfc3987_syntax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[-1] == "False", "a Ray process imported rfc3987_syntax: check the jsonschema pin"
