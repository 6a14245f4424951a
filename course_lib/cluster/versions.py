"""Which versions a cluster installs, against this laptop's: Ray, Python, and the packages the
nodes install (the training stack), read offline from the cluster YAML, the lock it ships and
the package it installs.

    check_versions("cluster/aws.yaml")     # raises ClusterConfigError in one line on a difference

Only what the nodes install is compared: a JupyterLab dependency of the laptop (babel, say)
never reaches a node, so its version there is no difference.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

import course_lib.cluster.lockfile as lockfile
from course_lib.cluster.checks import docker_images, load_cluster_yaml
from course_lib.cluster.common import ClusterConfigError
from course_lib.workspace import REPO

_PIN = re.compile(r"(?<![\w.-])([A-Za-z][\w.-]*)(?:\[[^\]]*\])?==([0-9][\w.+!-]*)")
_PYTHON = [re.compile(p) for p in (
    r"--python[ =](3\.\d+(?:\.\d+)?)\b",            # uv venv --python 3.11.14
    r"uv python install (3\.\d+(?:\.\d+)?)\b",
    r"\bpython=(3\.\d+(?:\.\d+)?)\b",               # conda create python=3.11
    r"\bpython(3\.\d+)\s+-m\s+venv\b",              # python3.11 -m venv
)]
_DOCKER_IMAGE = re.compile(r"rayproject/ray(-ml)?:(\d+\.\d+\.\d+)(?:-py(\d)(\d+))?")


def _all_commands(config: dict) -> list[str]:
    keys = ("initialization_commands", "setup_commands", "head_setup_commands",
            "worker_setup_commands", "head_start_ray_commands", "worker_start_ray_commands")
    commands = [cmd for key in keys for cmd in (config.get(key) or [])]
    for node_type in (config.get("available_node_types") or {}).values():
        for key in ("initialization_commands", "worker_setup_commands"):
            commands += node_type.get(key) or []
    return [str(cmd) for cmd in commands]


_CONSTRAINT = re.compile(r"(?:\s-c|--constraint)[ =](\S+)")
_EDITABLE = re.compile(r"(?:^|\s)-e\s+[\"']?([^\s\"'\[]+)(?:\[([^\]]*)\])?")


def _mounted(config: dict, remote: str, cwd: Path) -> tuple[str, Path] | None:
    """(the file_mounts source as written, its path on this laptop) of what `ray up` ships to
    `remote` on the nodes (a mounted file, or a file inside a mounted folder); None if
    nothing is mounted there. Relative sources are resolved from `cwd`, as `ray up` does."""
    remote = remote.replace("$HOME/", "~/").rstrip("/")
    for node_path, local in (config.get("file_mounts") or {}).items():
        node_path = str(node_path).rstrip("/")
        if remote == node_path or remote.startswith(node_path + "/"):
            source = Path(str(local)).expanduser()
            source = source if source.is_absolute() else cwd / source
            return str(local), source / remote[len(node_path):].lstrip("/")
    return None


def _lock_pins(config: dict, text: str, cwd: Path,
               environment: dict) -> tuple[dict[str, str], list[str]]:
    """{name: version} of the constraint files (`uv pip install -c FILE`) the commands name,
    read from the laptop's copy that file_mounts ships, for the nodes' `environment`; and those
    files as file_mounts names them (./requirements/lock.txt)."""
    found: dict[str, str] = {}
    sources: list[str] = []
    for remote in _CONSTRAINT.findall(text):
        mounted = _mounted(config, remote, cwd)
        if mounted is None:
            continue                        # a file on the node itself: nothing to read here
        local, source = mounted
        try:
            entries = lockfile.read_lock(source)
        except OSError:
            raise ClusterConfigError(f"the nodes install with -c {remote}, mounted from {local}, "
                                     "which does not exist here: run from the repository "
                                     "root") from None
        found.update(lockfile.pins(entries, environment))
        sources += [local] if local not in sources else []
    return found, sources


def _project_requirements(text: str, config: dict, cwd: Path) -> list[Requirement]:
    """The requirements of the projects the commands install (`-e DIR[extras]`, DIR's
    pyproject.toml shipped by file_mounts): what the nodes install, and nothing else."""
    reqs = []
    for remote, extras in _EDITABLE.findall(text):
        mounted = _mounted(config, remote.rstrip("/") + "/pyproject.toml", cwd)
        if mounted is None or not mounted[1].exists():
            continue
        project = tomllib.loads(mounted[1].read_text())["project"]
        own = canonicalize_name(project["name"])
        groups = project.get("optional-dependencies", {})
        todo = {e.strip() for e in extras.split(",") if e.strip()}
        done: set[str] = set()
        reqs += map(Requirement, project.get("dependencies", []))
        while todo:                          # an extra may name others: course-lib[a,b]
            extra = todo.pop()
            done.add(extra)
            for req in map(Requirement, groups.get(extra, [])):
                if canonicalize_name(req.name) == own:
                    todo |= set(req.extras) - done
                else:
                    reqs.append(req)
    return reqs


def cluster_versions(config: dict, cwd: str | os.PathLike | None = None) -> dict[str, Any]:
    """What a cluster config installs: {'ray': ..., 'python': ..., 'packages': {name: version},
    'constraints': [the constraint files, as file_mounts names them]}.

    The packages are what the nodes install, and only that: the requirements of the project
    their setup commands install (`-e ~/workshop`, its pyproject.toml shipped by file_mounts:
    Ray, torch, the training stack; the head adds the `cluster` extra), at the versions of the
    constraint files they install with (`-c FILE`, e.g. requirements/lock.txt, read for a Linux
    x86_64 node with the nodes' Python), plus any `pkg==X` written in a command, which wins.
    The Python is the commands' (`--python X`) or a docker image's tag. `cwd` (default: this
    repository's root, where the runbook runs `ray up`) resolves file_mounts' relative paths."""
    text = "\n".join(_all_commands(config))
    cwd = Path(cwd or REPO)
    python = next((m.group(1) for p in _PYTHON for m in [p.search(text)] if m), None)
    images = [m for m in map(_DOCKER_IMAGE.search, docker_images(config)) if m]
    if not python:
        python = next((f"{m.group(3)}.{m.group(4)}" for m in images if m.group(3)), None)
    environment = lockfile.marker_environment(
        "linux-x86_64", python or ".".join(map(str, sys.version_info[:3])))
    locked, constraints = _lock_pins(config, text, cwd, environment)
    packages: dict[str, str] = {}
    for req in _project_requirements(text, config, cwd):
        name = canonicalize_name(req.name)
        if req.marker is not None and not req.marker.evaluate(environment):
            continue
        exact = [s.version for s in req.specifier if s.operator == "=="]
        version = locked.get(name) or (exact[0] if exact else None)
        if version:
            packages[name] = version
    for name, version in _PIN.findall(text):
        packages[canonicalize_name(name)] = version
    ray_version = packages.pop("ray", None) or next((m.group(2) for m in images), None)
    return {"ray": ray_version, "python": python, "packages": packages,
            "constraints": constraints}


def _base_version(version: str) -> str:
    return version.split("+", 1)[0]


def check_versions(path: str | os.PathLike,
                   cwd: str | os.PathLike | None = None) -> dict[str, Any]:
    """Compare the Ray, Python and pinned package versions a cluster YAML installs with the
    ones installed here. Returns {'ray': {'cluster', 'local'}, 'python': {...},
    'packages': {name: {...}}, 'notes': [...]}; raises ClusterConfigError on a mismatch.

    Ray must match exactly, and the nodes' Python must be one this workshop supports (its
    `requires-python`: the nodes install the package). A Python that differs from this laptop's
    is only a note: Ray Jobs and `ray up` run the driver on the cluster and never mix the two
    interpreters; only Ray Client (`ray://`) would refuse to connect.
    """
    config = load_cluster_yaml(path)
    found = cluster_versions(config, cwd)
    local_python = ".".join(map(str, sys.version_info[:3]))
    report: dict[str, Any] = {
        "ray": {"cluster": found["ray"], "local": importlib.metadata.version("ray")},
        "python": {"cluster": found["python"], "local": local_python},
        "packages": {}, "notes": [],
    }
    problems = []
    if found["ray"] is None:
        problems.append("it does not pin Ray: add `pip install \"ray[default]=="
                        f"{report['ray']['local']}\"` to setup_commands (without it the "
                        "launcher installs a Ray nightly)")
    elif found["ray"] != report["ray"]["local"]:
        problems.append(f"it installs Ray {found['ray']} but Ray {report['ray']['local']} is "
                        "installed here; make them equal (pip install "
                        f"\"ray[default]=={found['ray']}\" here, or change the YAML)")
    if found["python"] is None:
        problems.append("it does not say which Python the nodes run: pin it (for example "
                        f"`uv venv --python {local_python}`)")
    else:
        supported = SpecifierSet(importlib.metadata.metadata("course-lib")["Requires-Python"])
        if not supported.contains(found["python"] + ".0" * (2 - found["python"].count("."))):
            problems.append(f"its nodes run Python {found['python']}, which the workshop does "
                            f"not support (requires-python {supported}): install one of those")
        elif found["python"] != local_python[:len(found["python"])]:
            report["notes"].append(
                f"Python differs (cluster {found['python']}, here {local_python}): fine for "
                "`ray up` and Ray Jobs; Ray Client (ray://) would refuse to connect")
    drift = []
    for name, version in found["packages"].items():
        try:
            local = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            report["notes"].append(f"{name}=={version} is installed on the nodes but not here")
            continue
        report["packages"][name] = {"cluster": version, "local": local}
        if _base_version(local) != _base_version(version):
            drift.append(f"{name} {version} there, {local} here")
    if drift:
        fix = (f"uv pip install -c {found['constraints'][0]} -e ." if found["constraints"] else
               "pip install " + " ".join(f"{name}=={found['packages'][name]}"
                                         for name in (d.split()[0] for d in drift)))
        problems.append(f"its nodes install other versions ({', '.join(drift)}): install "
                        f"theirs here with `{fix}`")
    if problems:
        raise ClusterConfigError(f"{path}: " + "; ".join(problems) + ".")
    return report
