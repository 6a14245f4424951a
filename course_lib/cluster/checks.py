"""Cluster YAML checks, all offline: what `ray up` would refuse, and what would cost money.

| call                           | what it checks                                                |
| ------------------------------ | ------------------------------------------------------------- |
| `load_cluster_yaml(path)`      | the file is YAML and a mapping (else one line naming the line) |
| `validate_cluster_yaml(path)`  | the installed Ray's own launcher validator (`prepare_config` + |
|                                | `validate_config`, what `ray up` runs first), pre-2.0 keys     |
| `check_versions(path)`         | the Ray, Python and package pins the nodes install vs. here    |
| `safety_problems(path)`        | stopped nodes kept, no ImageId, ports open to the internet,    |
|                                | no token authentication                                        |
| `preflight(path)`              | what `ray up` would miss on this laptop (file mounts, boto3)   |

The launcher helpers are private Ray APIs (`ray.autoscaler._private.util`): this module is
written against the pinned Ray 2.60.0.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib.metadata
import io
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any

import yaml
from packaging.specifiers import SpecifierSet

from course_lib.cluster.common import ClusterConfigError, loggers_at
from course_lib.errors import first_line
from course_lib.workspace import REPO

# Keys of the 0.8-1.x launcher schema, and what replaced them.
LEGACY_KEYS = {
    "initial_workers": "removed in Ray 1.x; set min_workers on a worker type under "
                       "available_node_types",
    "min_workers": "top-level min_workers was removed in Ray 2.0; set min_workers on each "
                   "worker type under available_node_types",
    "head_node": "removed in Ray 2.0; describe the head under available_node_types (its "
                 "node_config holds InstanceType, ImageId, ...) and name it in head_node_type",
    "worker_nodes": "removed in Ray 2.0; describe workers under available_node_types with "
                    "min_workers/max_workers and their own node_config",
    "target_utilization_fraction": "removed in Ray 2.0; use upscaling_speed",
    "autoscaling_mode": "removed in Ray 2.0; use upscaling_speed",
    "worker_default_node_type": "removed; the autoscaler picks worker types from demand",
}


def load_cluster_yaml(path: str | os.PathLike) -> dict:
    """The YAML file as a dict, or ClusterConfigError naming the file and the line."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise ClusterConfigError(
            f"{path}: cannot read the cluster YAML ({err.strerror}).") from None
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or first_line(err)
        raise ClusterConfigError(f"{path}: not valid YAML{where}: {problem}.") from None
    if not isinstance(config, dict):
        raise ClusterConfigError(f"{path}: a cluster YAML must be a mapping of keys "
                                 "(cluster_name, provider, available_node_types, ...).")
    return config


def validate_cluster_yaml(path: str | os.PathLike) -> dict:
    """Check a cluster YAML offline with the installed Ray's launcher validator.

    Runs exactly what `ray up` runs before it touches the cloud (`prepare_config`: defaults
    merged in, then `validate_config`: the JSON schema of this Ray version plus its consistency
    checks). Returns the prepared config; raises ClusterConfigError with one readable line.
    """
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = load_cluster_yaml(path)
    legacy = [key for key in config if key in LEGACY_KEYS]
    if legacy:
        problems = "; ".join(f"unknown key {key!r} ({LEGACY_KEYS[key]})" for key in legacy)
        raise ClusterConfigError(f"{path}: {problems}. This is a pre-2.0 cluster config: start "
                                 "from cluster/aws.yaml.")
    if not isinstance(config.get("provider"), dict) or "type" not in config["provider"]:
        raise ClusterConfigError(f"{path}: missing provider.type (for example `provider: "
                                 "{type: aws, region: us-west-2}`).")
    try:
        with _quiet_autoscaler_logs():
            prepared = prepare_config(config)
            validate_config(prepared)
    except Exception as err:   # jsonschema.ValidationError, ValueError, KeyError, ...
        raise ClusterConfigError(f"{path}: {_explain_config_error(err)}") from None
    return prepared


@contextlib.contextmanager
def _quiet_autoscaler_logs():
    """Silence the launcher's chatter while validating: its cli_logger writes straight to
    stdout/stderr (docker file-mount notes that do not apply without docker) and its logger
    says 'setting max workers ...'. Errors still surface as exceptions."""
    with (loggers_at(logging.ERROR, "ray.autoscaler"),
          contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO())):
        yield


def _explain_config_error(err: Exception) -> str:
    """One line from a jsonschema error (or a plain launcher error)."""
    import jsonschema

    if not isinstance(err, jsonschema.ValidationError):
        return f"rejected by Ray's launcher: {first_line(err)}"
    where = ".".join(str(part) for part in err.absolute_path) or "top level"
    if err.validator == "additionalProperties":
        unexpected = re.findall(r"'([^']+)'", err.message.split("(")[-1])
        allowed = sorted((err.schema or {}).get("properties", {}))
        parts = []
        for key in unexpected:
            hint = LEGACY_KEYS.get(key)
            if hint is None:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f"did you mean {close[0]!r}?" if close else (
                    "allowed here: " + ", ".join(allowed) if allowed else "not allowed here")
            parts.append(f"unknown key {key!r} at {where} ({hint})")
        return "; ".join(parts)
    if err.validator == "required":
        return f"{where}: {err.message}"
    return f"{where}: {err.message} (schema rule: {err.validator})"


# -- versions ----------------------------------------------------------------------------------

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


def _docker_images(config: dict) -> list[str]:
    docker = config.get("docker") or {}
    images = [docker.get(key) for key in ("image", "head_image", "worker_image")]
    for node_type in (config.get("available_node_types") or {}).values():
        images.append((node_type.get("docker") or {}).get("worker_image"))
    return [image for image in images if image]


_CONSTRAINT = re.compile(r"(?:\s-c|--constraint)[ =](\S+)")


def _constraint_pins(config: dict, text: str, cwd: Path) -> str:
    """The text of the constraint files (`pip install -c FILE`) the setup commands name, read
    from the laptop's copy that file_mounts ships (resolved from `cwd`, as `ray up` does)."""
    mounts = {str(remote).rstrip("/"): str(local)
              for remote, local in (config.get("file_mounts") or {}).items()}
    found = []
    for remote in _CONSTRAINT.findall(text):
        local = mounts.get(remote.rstrip("/"))
        if local is None:
            continue                        # a file on the node itself: nothing to read here
        source = Path(local).expanduser()
        source = source if source.is_absolute() else cwd / source
        try:
            found.append(source.read_text())
        except OSError:
            raise ClusterConfigError(f"the nodes install with -c {remote}, mounted from {local}, "
                                     "which does not exist here: run from the repository "
                                     "root") from None
    return "\n".join(found)


def cluster_versions(config: dict, cwd: str | os.PathLike | None = None) -> dict[str, Any]:
    """What a cluster config installs: {'ray': ..., 'python': ..., 'packages': {name: version}}
    read from its setup commands (`pkg==X`, `--python X`), the constraint files they install
    with (`-c FILE` shipped by file_mounts, e.g. requirements/lock.txt, read from `cwd`), and
    docker image tags. A pin written in a command wins over the file's. `cwd` defaults to this
    repository's root, where the runbook runs `ray up`."""
    text = "\n".join(_all_commands(config))
    pins = _constraint_pins(config, text, Path(cwd or REPO)) + "\n" + text
    packages: dict[str, str] = {}
    for name, version in _PIN.findall(pins):
        packages[name.lower().replace("_", "-")] = version
    python = next((m.group(1) for p in _PYTHON for m in [p.search(text)] if m), None)
    ray_version = packages.pop("ray", None)
    for image in _docker_images(config):
        match = _DOCKER_IMAGE.search(image)
        if match:
            ray_version = ray_version or match.group(2)
            if match.group(3) and not python:
                python = f"{match.group(3)}.{match.group(4)}"
    return {"ray": ray_version, "python": python, "packages": packages}


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
    for name, version in found["packages"].items():
        try:
            local = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            report["notes"].append(f"{name}=={version} is pinned for the cluster but not "
                                   "installed here")
            continue
        report["packages"][name] = {"cluster": version, "local": local}
        if _base_version(local) != _base_version(version):
            problems.append(f"it pins {name}=={version} but {name} {local} is installed here")
    if problems:
        raise ClusterConfigError(f"{path}: " + "; ".join(problems) + ".")
    return report


# -- safety -----------------------------------------------------------------------------------

def safety_problems(config_or_path: dict | str | os.PathLike) -> list[str]:
    """Costly or insecure settings in a cluster config (empty list: none found)."""
    config = (config_or_path if isinstance(config_or_path, dict)
              else load_cluster_yaml(config_or_path))
    provider = config.get("provider") or {}
    problems = []
    if provider.get("type") == "aws" and provider.get("cache_stopped_nodes", True) is not False:
        problems.append("provider.cache_stopped_nodes is not false: `ray down` and idle "
                        "scale-down would STOP instances (their volumes keep costing) instead "
                        "of terminating them")
    for name, node_type in (config.get("available_node_types") or {}).items():
        node_config = node_type.get("node_config") or {}
        if provider.get("type") == "aws" and not node_config.get("ImageId"):
            problems.append(f"node type {name!r} has no ImageId: the launcher would pick an "
                            "end-of-life Ubuntu 18.04 Deep Learning AMI")
    if "setup_commands" not in config:
        problems.append("no setup_commands: the launcher's default installs a Ray nightly "
                        "wheel, not the pinned Ray")
    for image in _docker_images(config):
        if "ray-ml" in image:
            problems.append(f"docker image {image}: rayproject/ray-ml is deprecated (frozen at "
                            "Ray 2.30); use rayproject/ray:<version>-py311-cpu")
    for rule in (provider.get("security_group") or {}).get("IpPermissions") or []:
        ranges = [r.get("CidrIp") for r in rule.get("IpRanges") or []]
        ranges += [r.get("CidrIpv6") for r in rule.get("Ipv6Ranges") or []]
        if {"0.0.0.0/0", "::/0"} & set(ranges) and not (rule.get("FromPort") == 22 ==
                                                         rule.get("ToPort")):
            problems.append(f"security group opens ports {rule.get('FromPort')}-"
                            f"{rule.get('ToPort')} to the whole internet; keep only SSH and "
                            "tunnel the dashboard with `ray dashboard`")
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        commands = " ".join(str(c) for c in config.get(key) or [])
        if "RAY_AUTH_MODE=token" not in commands:
            problems.append(f"{key} do not set RAY_AUTH_MODE=token: set it on every node, or "
                            "anyone who reaches the cluster can run code on it")
    starts = " ".join(str(c) for k in ("head_start_ray_commands", "worker_start_ray_commands")
                      for c in config.get(k) or [])
    token_shipped = (any("auth_token" in str(remote) for remote in config.get("file_mounts") or {})
                     or "RAY_AUTH_TOKEN" in starts)       # RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH
    if "RAY_AUTH_MODE=token" in starts and not token_shipped:
        problems.append("token authentication is on but no node gets the token: mount "
                        "~/.ray/auth_token in file_mounts")
    return problems


def preflight(path: str | os.PathLike, cwd: str | os.PathLike | None = None) -> list[str]:
    """What would make `ray up <path>`, run from `cwd`, fail on this laptop before it even
    reaches AWS: file-mount sources missing (relative paths are resolved from the current
    directory), no token to ship, boto3 not installed. Empty list: ready to launch."""
    config = load_cluster_yaml(path)
    cwd = Path(cwd or os.getcwd())
    problems = []
    for remote, local in (config.get("file_mounts") or {}).items():
        source = Path(str(local)).expanduser()
        source = source if source.is_absolute() else cwd / source
        if not source.exists():
            hint = ("create it with `ray get-auth-token --generate`" if "auth_token" in str(local)
                    else "run `ray up` from the repository root")
            problems.append(f"file mount {remote}: {local} does not exist here ({hint})")
    if (config.get("provider") or {}).get("type") == "aws":
        try:
            importlib.metadata.version("boto3")
        except importlib.metadata.PackageNotFoundError:
            problems.append("boto3 is not installed: `pip install boto3` (the launcher's AWS "
                            "client)")
    return problems
