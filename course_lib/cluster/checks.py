"""Cluster YAML checks, all offline: what `ray up` would refuse, and what would cost money.

| call                           | what it checks                                                |
| ------------------------------ | ------------------------------------------------------------- |
| `load_cluster_yaml(path)`      | the file is YAML and a mapping (else one line naming the line) |
| `validate_cluster_yaml(path)`  | the installed Ray's own launcher validator (`prepare_config` + |
|                                | `validate_config`, what `ray up` runs first), pre-2.0 keys     |
| `safety_problems(path)`        | stopped nodes kept, no ImageId, ports open to the internet,    |
|                                | no token authentication                                        |
| `preflight(path)`              | what `ray up` would miss on this laptop (file mounts, boto3)   |

The version check (`check_versions`: Ray, Python and the packages the nodes install, against
this laptop's) is in versions.py. The launcher helpers are private Ray APIs
(`ray.autoscaler._private.util`): this module is written against the pinned Ray 2.60.0.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib.metadata
import io
import logging
import os
import re
from pathlib import Path

import yaml

from course_lib.cluster.common import ClusterConfigError, loggers_at
from course_lib.errors import first_line

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


# -- shared with versions.py ------------------------------------------------------------------

def docker_images(config: dict) -> list[str]:
    """The docker images a cluster config names (none for cluster/aws.yaml)."""
    docker = config.get("docker") or {}
    images = [docker.get(key) for key in ("image", "head_image", "worker_image")]
    for node_type in (config.get("available_node_types") or {}).values():
        images.append((node_type.get("docker") or {}).get("worker_image"))
    return [image for image in images if image]


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
    for image in docker_images(config):
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
            problems.append("boto3 is not installed: `uv pip install -c requirements/lock.txt "
                            "-e \".[cluster]\"` (the launcher's AWS client, at the lock's "
                            "version)")
    return problems
