"""The install is declared once, in pyproject.toml: exact pins, every imported package among
them, and environment.yml making only the Python (the Makefile installs). The install routes
(make, conda, offline, container) give the attendee the same set from the lock, the CPU build
of torch on Linux without a GPU, open workshop/, refuse an unsupported Python in one line that
says how to get one, and `make test` never asks for sudo. Links to Ray's documentation name
the pinned Ray's release docs, never `latest` or `master`."""

import ast
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from scripts.imports import imported

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# this repository's own code: the package and the tools beside it (bench/, scripts/, claims/,
# tests/: every top-level folder with Python files), and the scripts that import each other by
# name (a script run as a file imports its siblings so)
FOLDERS = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and any(p.glob("*.py")))
LOCAL = {*FOLDERS, "helper"} | {path.stem for folder in FOLDERS
                               for path in (ROOT / folder).glob("*.py")}


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
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if getattr(node, "level", 0):        # a relative import: this package's own
                    continue
                for name in imported(node, ""):
                    found.setdefault(name.split(".")[0], str(path.relative_to(ROOT)))
    return found


def test_every_imported_package_is_declared():
    declared = {req.name.lower().replace("_", "-") for req in requirements()}
    distributions = importlib.metadata.packages_distributions()
    undeclared = []
    for module, where in imported_modules().items():
        if module in sys.stdlib_module_names or module in LOCAL:
            continue
        # not installed here (cpprb on Python 3.13, by its marker): judged by its own name
        names = ({d.lower().replace("_", "-") for d in distributions.get(module, [])}
                 or {module.lower()})
        if not names & declared:
            undeclared.append(f"{module} ({where}; distribution {sorted(names) or '?'})")
    assert undeclared == [], "imported but not in pyproject.toml: " + ", ".join(undeclared)


def test_the_wheel_ships_course_lib_and_not_the_repositorys_tools(tmp_path):
    """The attendee's wheel (`make wheelhouse`, the cluster's nodes) holds every module of
    course_lib and nothing of bench/ or scripts/, the repository's tools (run from its root).
    Built offline with the installed setuptools from a copy, so the checkout stays clean."""
    source = tmp_path / "source"
    for name in ("pyproject.toml", "README.md"):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, source / name)
    for folder in ("course_lib", "bench", "scripts"):
        shutil.copytree(ROOT / folder, source / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--no-index", "-q", "-w", str(tmp_path / "wheel"), str(source)],
                   check=True, capture_output=True)
    [wheel] = (tmp_path / "wheel").glob("course_lib-*.whl")
    shipped = {name for name in zipfile.ZipFile(wheel).namelist() if name.endswith(".py")}
    modules = {str(p.relative_to(ROOT)) for p in (ROOT / "course_lib").rglob("*.py")
               if "__pycache__" not in p.parts}
    assert modules and shipped == modules, sorted(shipped ^ modules)


def test_environment_yml_has_no_pins_of_its_own():
    """conda makes the Python (and gives make); the Makefile installs the project, pins and
    all, into the conda environment (`make lab VENV="$CONDA_PREFIX"`)."""
    text = (ROOT / "environment.yml").read_text()
    env = yaml.safe_load(text)
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    assert sorted(d.split("=")[0] for d in conda) == ["make", "pip", "python"]
    assert not [d for d in env["dependencies"] if isinstance(d, dict)]      # no pip section
    assert 'make lab VENV="$CONDA_PREFIX"' in text


def test_ray_starts_without_the_slow_jsonschema_import():
    """jsonschema >= 4.25 imports rfc3987_syntax, which builds an Earley parser at import time
    (1.8 s here); Ray imports jsonschema in every worker process. The pin keeps it out."""
    import subprocess

    code = "import sys, ray; print('rfc3987_syntax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[-1] == "False", "a Ray process imported rfc3987_syntax: check the jsonschema pin"


def test_setup_check_accepts_the_pythons_of_requires_python(monkeypatch):
    from course_lib.teaching import setup_check

    assert setup_check.check_python().ok                      # the Python running the tests
    for version, ok in (("3.11.9", True), ("3.13.1", True), ("3.10.14", False), ("3.14.0", False)):
        monkeypatch.setattr(setup_check.platform, "python_version", lambda v=version: v)
        check = setup_check.check_python()
        assert check.ok is ok, version
        assert ok or "<3.14" in check.fix and ">=3.11" in check.fix


def test_setup_check_checks_the_attendees_set(monkeypatch):
    """Notebook 00's check covers JupyterLab and the notebooks' packages (the `attendee`
    extra), not only the base that training needs, and not the test tools."""
    from course_lib.teaching import setup_check

    metadata = list(PROJECT["dependencies"])             # as pip writes Requires-Dist
    for extra, reqs in PROJECT["optional-dependencies"].items():
        for req in map(Requirement, reqs):
            marker = f"({req.marker}) and " if req.marker else ""
            metadata.append(f"{req.name}{req.specifier}; {marker}extra == {extra!r}")
    monkeypatch.setattr(setup_check.md, "requires", lambda name: metadata)
    names = {req.name for req in setup_check.pinned_requirements()}
    assert {"ray", "torch", "jupyterlab", "ipykernel", "pygame"} <= names
    assert not names & {"pytest", "pandas", "mistune"}


# --- install routes ---------------------------------------------------------------------------

def make_dry_run(tmp_path: Path, target: str, env: dict | None = None, **variables: str) -> str:
    """The commands `make target` would run in a fresh clone (`make -n`: nothing runs)."""
    if shutil.which("make") is None:
        pytest.skip("no make on the PATH")
    for name in ("Makefile", "pyproject.toml", "requirements/lock.txt", "requirements/uv.txt"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    cmd = ["make", "-n", "-C", str(tmp_path), target, *(f"{k}={v}" for k, v in variables.items())]
    # a fresh clone's defaults: not the choices of whoever runs the tests (.ci/run exports
    # TORCH_INDEX where the PyTorch index is unreachable; `make test` passes MAKEFLAGS on)
    env = {k: v for k, v in (os.environ if env is None else env).items()
           if k not in MAKE_CHOICES and not k.startswith("MAKE")}
    return subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout


MAKE_CHOICES = set(re.findall(r"^(\w+)\s*\?=", (ROOT / "Makefile").read_text(), re.MULTILINE))


def no_gpu_env(tmp_path: Path, gpu: bool = False) -> dict[str, str]:
    """The environment of a machine with (a stand-in nvidia-smi on the PATH) or without an
    NVIDIA GPU (no nvidia-smi)."""
    bin_dir = tmp_path / "gpu-bin"
    bin_dir.mkdir(exist_ok=True)
    path = [p for p in os.environ["PATH"].split(os.pathsep)
            if not (Path(p) / "nvidia-smi").exists()]
    if gpu:
        (bin_dir / "nvidia-smi").write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / "nvidia-smi").chmod(0o755)
        path.insert(0, str(bin_dir))
    return {**os.environ, "PATH": os.pathsep.join(path)}


def installed_extras(commands: str) -> list[str]:
    """The extras of each `pip install ... -e ".[...]"` among `commands`."""
    return re.findall(r"pip install .*-e \"?\.\[([^\]]*)\]", commands.replace("\\\n", " "))


@pytest.mark.parametrize("target", ["test", "unit", "nbval", "lint", "install", "lab", "slides",
                                    "refresh"])
def test_make_targets_never_call_sudo(tmp_path, target):
    """Installing Chromium (apt-get, through sudo off root) is `make chromium`'s alone: a step
    .ci/run takes and a laptop owner chooses, never a password prompt inside `make test`."""
    assert "sudo" in make_dry_run(tmp_path, "chromium")        # the check sees it where it is
    assert "sudo" not in make_dry_run(tmp_path, target)


@pytest.mark.parametrize("target, variables", [
    ("lab", {}), ("lab", {"RLLIB": "1"}), ("test", {}), ("wheelhouse", {}),
    ("lab", {"WHEELHOUSE": "wheelhouse"}), ("lab", {"TORCH": "pypi"})])
def test_every_make_install_takes_the_locks_versions(tmp_path, target, variables):
    """Every install and download of every route is one of: uv with the lock as constraints
    (its versions and hashes), pip with --require-hashes from a hashed file (uv itself; the
    wheelhouse's list, compiled against the lock), or the torch step: torch alone, at the
    lock's version read from the lock."""
    commands = make_dry_run(tmp_path, target, **variables).replace("\\\n", " ").splitlines()
    installs = [c for c in commands if re.search(r"pip (install|download|compile) ", c)]
    assert installs
    for command in installs:
        locked = "-c requirements/lock.txt" in command
        hashed = "--require-hashes" in command and re.search(r"-r \S+\.txt", command)
        torch = "--no-deps" in command and "grep -m1 '^torch==' requirements/lock.txt" in command
        assert locked or hashed or torch, command
        assert not re.search(r"[\w\]]==\d", command), f"a version in the Makefile: {command}"


def test_cpu_torch_by_default_on_linux_without_a_gpu(tmp_path):
    """Issue 39: a Linux laptop without an NVIDIA GPU gets the CPU build of torch (~200 MB)
    from `make lab`, `make test` and the wheelhouse; with nvidia-smi, PyPI's CUDA build
    through the lock (its hashes); TORCH=cpu|pypi chooses."""
    if sys.platform != "linux":
        pytest.skip("the CPU build is Linux's choice; macOS has one build")
    cpu = "--index-url https://download.pytorch.org/whl/cpu"
    for target in ("lab-setup", "install"):
        assert cpu in make_dry_run(tmp_path, target, env=no_gpu_env(tmp_path))
        assert cpu not in make_dry_run(tmp_path, target, env=no_gpu_env(tmp_path, gpu=True))
        assert cpu in make_dry_run(tmp_path, target, env=no_gpu_env(tmp_path, gpu=True),
                                   TORCH="cpu")
        assert cpu not in make_dry_run(tmp_path, target, env=no_gpu_env(tmp_path), TORCH="pypi")
    wheelhouse = make_dry_run(tmp_path, "wheelhouse", env=no_gpu_env(tmp_path))
    assert cpu in wheelhouse and "--dry-run" in wheelhouse   # the list: what uv would install
    # a folder of wheels stands in for the index (offline, or a mirror)
    assert f"--no-index --find-links {tmp_path}" in make_dry_run(
        tmp_path, "lab-setup", env=no_gpu_env(tmp_path), TORCH_INDEX=str(tmp_path))


def unsupported_python() -> str | None:
    """An interpreter outside 3.11.5-3.13 on this machine (Debian 12's 3.11.2, 3.10, 3.14)."""
    for name in ("/usr/bin/python3", "python3.10", "python3.14", "python3.9"):
        path = shutil.which(name)
        if path is None:
            continue
        done = subprocess.run([path, "-c", "import sys; print(sys.version_info[:3] >= "
                               "(3, 11, 5) and sys.version_info[:2] <= (3, 13))"],
                              capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.strip() == "False":
            return path
    return None


def test_an_unsupported_python_is_one_line_with_the_command_that_gets_one(tmp_path):
    """Issue 39: `make lab` with a Python outside 3.11.5-3.13 stops before creating anything,
    in one line naming the Python and the command that gets a supported one (uv)."""
    python = unsupported_python()
    if python is None:
        pytest.skip("no Python outside 3.11.5-3.13 on this machine to try")
    make_dry_run(tmp_path, "help")                      # copies the Makefile and the lock
    done = subprocess.run(["make", "-C", str(tmp_path), "lab", f"PYTHON={python}"],
                          capture_output=True, text=True)
    assert done.returncode != 0 and not (tmp_path / ".venv").exists()
    [line] = [line for line in done.stderr.splitlines() if not line.startswith("make")]
    assert "is outside 3.11.5-3.13" in line and "make lab UV_PYTHON=3.12" in line
    # and that command makes the venv with uv, which fetches CPython 3.12 when need be
    assert "venv --seed --python 3.12 .venv" in make_dry_run(tmp_path, "lab", UV_PYTHON="3.12")


def test_rllib_is_the_attendees_choice(tmp_path):
    """`make lab` leaves RLlib out (~400 MiB for notebook 07 alone); RLLIB=1 adds it."""
    assert installed_extras(make_dry_run(tmp_path, "lab")) == ["attendee"]
    assert installed_extras(make_dry_run(tmp_path, "lab", RLLIB="1")) == ["attendee,rllib"]
    assert installed_extras(make_dry_run(tmp_path, "test")) == ["test"]
    extras = PROJECT["optional-dependencies"]
    assert not any(r.startswith(("pandas", "pyarrow", "scipy")) for r in extras["attendee"])
    assert "course-lib[attendee,rllib]" in extras["instructor"]
    assert any(r.startswith("course-lib[instructor,bench,cluster]") for r in extras["test"])


def test_ci_installs_chromium_before_the_tests():
    steps = [line.split("#")[0].split("||")[0].strip()
             for line in (ROOT / ".ci/run").read_text().splitlines()]
    assert steps.index("make chromium") < steps.index("make test")


def test_ci_checks_the_install_route_on_every_other_supported_python():
    """Issue 39: CI installs the attendee's set from the lock on each supported Python besides
    the one `make test` runs on, and runs notebook 00 there; a Python added to requires-python
    without a CI check fails here."""
    from scripts import lock

    ci = (ROOT / ".ci/run").read_text()
    defaults = re.findall(r"for version in \$\{CI_PYTHONS-([\d. ]+)\}", ci)
    assert len(defaults) == 2 and {d for d in defaults} == {" ".join(lock.supported_pythons()[1:])}
    install, check = (ci[m.start():] for m in re.finditer(r"for version in", ci))
    assert re.search(r'make lab-install VENV="\$venv" UV_PYTHON="\$version"',
                     install[:install.index("done")])
    assert "--nbval notebooks/00_setup_check.ipynb" in check[:check.index("done")]
    # the installs run in the background beside `make test`; each notebook 00 after it
    assert re.search(r"^other_pythons_install .*&$", ci, re.MULTILINE)
    assert ci.index("\nmake test ||") < ci.index("--nbval notebooks/00_setup_check.ipynb")


def test_conda_and_offline_routes_give_the_attendees_set_and_workshop(tmp_path):
    """The conda route is `make lab` into the conda environment (what `make lab` installs, no
    test tools) and opens workshop/, the attendee edition; the README's offline and conda steps
    do the same."""
    [lab_extras] = installed_extras(make_dry_run(tmp_path, "lab"))
    assert "test" not in lab_extras.split(",")
    prefix = tmp_path / "conda-env"                  # an environment conda made: its Python
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").symlink_to(sys.executable)
    conda = make_dry_run(tmp_path, "lab", VENV=str(prefix))
    assert installed_extras(conda) == [lab_extras] and "-m venv" not in conda
    assert re.search(rf"{prefix}/bin/jupyter lab .*workshop/$", conda, re.MULTILINE)
    env_text = (ROOT / "environment.yml").read_text()
    readme = (ROOT / "README.md").read_text()
    for name, text in (("environment.yml", env_text), ("README.md", readme)):
        assert 'make lab VENV="$CONDA_PREFIX"' in text, name
        assert "jupyter lab notebooks/" not in text, name
    offline = readme[readme.index("### Offline install"):readme.index("### With conda")]
    assert installed_extras(offline) == [lab_extras]
    assert "make lab WHEELHOUSE=wheelhouse" in offline


def test_devcontainer_runs_the_attendees_lab_on_two_cores(tmp_path):
    folder = ROOT / ".devcontainer"
    spec = json.loads((folder / "devcontainer.json").read_text())
    assert {"--cpus=2", "--shm-size=2g"} <= set(spec["runArgs"])
    assert spec["hostRequirements"]["cpus"] == 2
    # set up once with the attendee's set (CPU torch), then JupyterLab on workshop/ per attach
    setup = make_dry_run(tmp_path, spec["postCreateCommand"].removeprefix("make "),
                         env=no_gpu_env(tmp_path, gpu=True), **spec["containerEnv"])
    assert installed_extras(setup) == installed_extras(make_dry_run(tmp_path, "lab-setup"))
    assert "--index-url https://download.pytorch.org/whl/cpu" in setup     # even with a GPU
    assert "scripts/notebooks.py workshop --dir workshop" in setup
    lab = make_dry_run(tmp_path, spec["postAttachCommand"].removeprefix("make "))
    assert re.search(r"jupyter lab .*workshop/$", lab, re.MULTILINE)
    assert 8888 in spec["forwardPorts"]
    # the image's Python is one that requires-python accepts
    [base] = re.findall(r"^FROM python:(\d+\.\d+)\S*$",
                        (folder / spec["build"]["dockerfile"]).read_text(), re.MULTILINE)
    assert f"{base}.99" in SpecifierSet(PROJECT["requires-python"])       # its latest patch


RAY_DOCS = re.compile(r"https?://docs\.ray\.io/en/([\w.-]+)/")


def ray_doc_versions(text: str) -> set[str]:
    """The versions of Ray's documentation that `text` links to ("latest", "releases-2.60.0")."""
    return set(RAY_DOCS.findall(text))


def test_the_link_check_reads_the_version_of_a_ray_docs_link():
    text = ("[a](https://docs.ray.io/en/latest/ray-core/tasks.html) "
            "[b](https://docs.ray.io/en/releases-2.60.0/ray-core/actors.html)")
    assert ray_doc_versions(text) == {"latest", "releases-2.60.0"}


def test_ray_docs_links_point_at_the_pinned_ray():
    """Issue 27 item 8: further reading matches the Ray the workbook installs. `latest` and
    `master` change under the reader (an API the notebook uses can be gone from them)."""
    [pin] = [r for r in requirements() if r.name == "ray"]
    pinned = f"releases-{next(iter(pin.specifier)).version}"
    docs = [*ROOT.glob("*.md"), *ROOT.glob("slides/*.md"), *ROOT.glob("cluster/*.md"),
            *ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("course_lib/**/*.py")]
    wrong = {f"{path.relative_to(ROOT)}: {version}" for path in docs
             for version in ray_doc_versions(path.read_text(encoding="utf-8")) - {pinned}}
    assert not wrong, f"link Ray's docs as https://docs.ray.io/en/{pinned}/...: {sorted(wrong)}"
