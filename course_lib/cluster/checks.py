"""From one machine to a cluster: check a cluster YAML, run a real multi-node Ray cluster
locally, and send work to any cluster through Ray Jobs.

Three parts, each usable on its own:

1. **Cluster YAML checks, offline.** `validate_cluster_yaml(path)` runs the installed Ray's own
   launcher validator (the same `prepare_config` + `validate_config` that `ray up` runs) and turns
   its schema errors into one readable line. `check_versions(path)` compares the Ray and Python
   versions the YAML installs on the nodes with the ones installed here. `safety_problems(path)`
   lists the costly or insecure settings this workshop refuses (stopped nodes kept, no ImageId,
   a port open to the internet, no token authentication).
2. **`LocalCluster`**: a head node plus N worker nodes on this machine, each a real `ray start`
   process with its own temp dir, ports and CPU count, token authentication on by default::

       with LocalCluster(num_workers=1, cpus_per_node=1) as cluster:
           job_id = cluster.submit_job(["python", "run.py"], working_dir="my_dir")
           print(cluster.wait_for_job(job_id, timeout_s=120))    # 'SUCCEEDED'
           print(cluster.job_logs(job_id))

3. **Ray Jobs**, for a `LocalCluster` or a cloud cluster behind `ray dashboard cluster/aws.yaml`
   (address http://127.0.0.1:8265): `submit_job` ships a working directory, `follow_logs` streams
   the logs, `wait_for_job` returns the final status. Every wait is bounded: an unreachable
   address fails in seconds, a failed job raises `JobFailedError` carrying the tail of its logs,
   a job that outlives its time budget raises `JobTimeoutError`.

The launcher helpers are private Ray APIs (`ray.autoscaler._private.util`): this module is
written against the pinned Ray 2.60.0.
"""

from __future__ import annotations

import atexit
import contextlib
import difflib
import importlib.metadata
import io
import logging
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import requests
import yaml

DEFAULT_JOBS_ADDRESS = "http://127.0.0.1:8265"   # the dashboard, local or through `ray dashboard`
TERMINAL_STATUSES = ("SUCCEEDED", "FAILED", "STOPPED")

# Never shipped with a job: environments, VCS data, caches, results, notebooks and their outputs.
# (gitignore syntax; Ray also honours the working directory's .gitignore.)
WORKING_DIR_EXCLUDES = [
    ".git", ".venv", "venv", "env", "__pycache__", "*.pyc", "*.egg-info",
    ".pytest_cache", ".ruff_cache", ".hypothesis", ".ipynb_checkpoints", "*.ipynb",
    "/results/", "/build/", "/slides/", "/bench/",
]


class ClusterError(RuntimeError):
    """A cluster or job problem; the message says what to do."""


class ClusterConfigError(ClusterError, ValueError):
    """A cluster YAML that Ray's launcher would refuse, or whose versions do not match."""


class JobFailedError(ClusterError):
    """A Ray job ended FAILED or STOPPED; `.logs_tail` holds the end of its output."""

    def __init__(self, message: str, job_id: str, status: str, logs_tail: str):
        super().__init__(message)
        self.job_id, self.status, self.logs_tail = job_id, status, logs_tail


class JobTimeoutError(ClusterError, TimeoutError):
    """A Ray job did not finish within the time given; it may still be running."""


class _NodeDied(ClusterError):
    """A `ray start` process exited while the local cluster was starting."""


# --------------------------------------------------------------------------------------------
# 1. Cluster YAML: Ray's own validator, one readable line per problem
# --------------------------------------------------------------------------------------------

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
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
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
    with (_loggers_at(logging.ERROR, "ray.autoscaler"),
          contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO())):
        yield


@contextlib.contextmanager
def _loggers_at(level: int, *names: str):
    """Raise these loggers to `level` for the duration (INFO chatter hidden, errors kept)."""
    loggers = [logging.getLogger(name) for name in names]
    before = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(level)
    try:
        yield
    finally:
        for logger, old in zip(loggers, before, strict=True):
            logger.setLevel(old)


def _explain_config_error(err: Exception) -> str:
    """One line from a jsonschema error (or a plain launcher error)."""
    import jsonschema

    if not isinstance(err, jsonschema.ValidationError):
        text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return f"rejected by Ray's launcher: {text}"
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


def cluster_versions(config: dict) -> dict[str, Any]:
    """What a cluster config installs: {'ray': ..., 'python': ..., 'packages': {name: version}}
    read from its setup commands (`pkg==X`, `--python X`) and docker image tags."""
    text = "\n".join(_all_commands(config))
    packages: dict[str, str] = {}
    for name, version in _PIN.findall(text):
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


def check_versions(path: str | os.PathLike) -> dict[str, Any]:
    """Compare the Ray, Python and pinned package versions a cluster YAML installs with the
    ones installed here. Returns {'ray': {'cluster', 'local'}, 'python': {...},
    'packages': {name: {...}}, 'notes': [...]}; raises ClusterConfigError on a mismatch.

    Ray must match exactly and Python down to the minor version. A Python patch difference is
    only a note: Ray Jobs run the driver on the cluster, but Ray Client (`ray://`) and nodes
    joining a cluster compare the patch too.
    """
    config = load_cluster_yaml(path)
    found = cluster_versions(config)
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
        cluster_minor = found["python"].split(".")[:2]
        if cluster_minor != local_python.split(".")[:2]:
            problems.append(f"its nodes run Python {found['python']} but this is Python "
                            f"{local_python}; Ray needs the same minor version on both sides")
        elif found["python"].count(".") == 2 and found["python"] != local_python:
            report["notes"].append(
                f"Python patch differs (cluster {found['python']}, here {local_python}): fine "
                "for Ray Jobs; Ray Client (ray://) would refuse to connect")
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


# --------------------------------------------------------------------------------------------
# 2. A multi-node Ray cluster on one machine, through the real `ray start` command line
# --------------------------------------------------------------------------------------------

def free_port() -> int:
    """A TCP port that was free a moment ago (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _ray_cli() -> list[str]:
    """The `ray` command of this Python environment (never another install on PATH)."""
    script = Path(sys.executable).with_name("ray")
    return [str(script)] if script.exists() else [sys.executable, "-m", "ray.scripts.scripts"]


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


class LocalCluster:
    """A Ray cluster of one head and `num_workers` worker nodes on this machine.

    Each node is a `ray start --block` process with its own `--temp-dir` under one cluster
    folder, its own ports (picked free, so other Ray instances on the machine are never
    touched) and `cpus_per_node` CPUs. All nodes share one authentication mode: with
    `auth="token"` (the default) a fresh token is written into the cluster folder and handed to
    every node through RAY_AUTH_TOKEN_PATH, and `headers` carries it for the Jobs API.

    `address` is the GCS address (what `ray start --address` and `ray.init` take),
    `dashboard_url` the Jobs API address (what `ray job submit --address` takes).
    Use it as a context manager, or call `start()` / `stop()`; `stop()` also runs at exit.
    """

    def __init__(self, num_workers: int = 1, cpus_per_node: int = 1, *, auth: str = "token",
                 object_store_mb: int = 100, root: str | os.PathLike | None = None,
                 start_timeout_s: float = 120.0, keep_files: bool = False):
        if num_workers < 0 or cpus_per_node < 1:
            raise ValueError("need num_workers >= 0 and cpus_per_node >= 1")
        if auth not in ("token", "disabled"):
            raise ValueError(f"auth must be 'token' or 'disabled', not {auth!r}")
        self.num_workers, self.cpus_per_node, self.auth = num_workers, cpus_per_node, auth
        self.object_store_mb, self.start_timeout_s = object_store_mb, start_timeout_s
        self.keep_files = keep_files
        self._parent = Path(root) if root else Path(os.environ.get("RAY_TMPDIR") or "/tmp")
        self.root: Path | None = None
        self.address = self.dashboard_url = None
        self.headers: dict[str, str] = {}
        self._nodes: list[tuple[subprocess.Popen, Path]] = []   # (`ray start` process, its log)
        self.timings: dict[str, float] = {}
        self.retries = 0                        # node starts that had to be repeated

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = (f"address={self.address}, dashboard_url={self.dashboard_url}"
                 if self._nodes else "stopped")
        return (f"LocalCluster(head + {self.num_workers} workers x {self.cpus_per_node} CPU, "
                f"auth={self.auth}, {state})")

    def start(self) -> LocalCluster:
        """Start the head, then each worker; returns when all nodes are alive (or raises)."""
        if self._nodes:
            return self
        t0 = time.monotonic()
        # Short paths: Ray's unix sockets live in <temp-dir>/session_<date>_<pid>/sockets/ and a
        # socket path may not exceed 107 bytes, so a long parent folder falls back to /tmp.
        parent = self._parent if len(str(self._parent)) <= 40 else Path("/tmp")
        parent.mkdir(parents=True, exist_ok=True)
        self.root = Path(tempfile.mkdtemp(prefix="lc-", dir=parent))
        self._env = self._node_env()
        atexit.register(self.stop)
        try:
            self._start_head()
            self.timings["head_s"] = time.monotonic() - t0
            for i in range(1, self.num_workers + 1):    # one by one: 2 cores start slowly
                self._start_worker(i)
        except BaseException:
            self.stop(keep_files=True)
            raise
        self.timings["start_s"] = time.monotonic() - t0
        return self

    def stop(self, timeout_s: float = 20.0, keep_files: bool | None = None) -> None:
        """Stop every process of this cluster (and only those), then remove its folder."""
        atexit.unregister(self.stop)
        t0 = time.monotonic()
        procs = [proc for proc, _ in self._nodes]
        self._nodes = []
        for proc in reversed(procs):            # workers first, the head last
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for proc in reversed(procs):
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        for proc in procs:                      # whatever ignored SIGTERM, by process group
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        if self.root is not None:
            _kill_marked(f"COURSE_LOCAL_CLUSTER={self.root}")   # strays that left the group
            keep = self.keep_files if keep_files is None else keep_files
            if not keep:
                shutil.rmtree(self.root, ignore_errors=True)
        if procs:
            self.timings["stop_s"] = time.monotonic() - t0

    # -- internals ---------------------------------------------------------------------------
    def _node_env(self) -> dict[str, str]:
        """One environment for every node: the same auth mode, the token file, a marker."""
        env = {k: v for k, v in os.environ.items()
               if k not in ("RAY_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")}
        env.update(RAY_AUTH_MODE=self.auth, RAY_USAGE_STATS_ENABLED="0",
                   COURSE_LOCAL_CLUSTER=str(self.root),
                   # the dashboard's module processes get 30 s by default; 2 busy cores need more
                   RAY_DASHBOARD_SUBPROCESS_MODULE_WAIT_READY_TIMEOUT="120",
                   # `python` in a job's entrypoint is this environment's Python, as on the
                   # AWS nodes where the start commands put ~/venv/bin first.
                   PATH=os.pathsep.join([str(Path(sys.executable).parent),
                                         os.environ.get("PATH", "")]))
        if self.auth == "token":
            token = secrets.token_hex(32)
            token_path = self.root / "auth_token"
            token_path.touch(mode=0o600)
            token_path.write_text(token)
            env["RAY_AUTH_TOKEN_PATH"] = str(token_path)
            self.headers = {"Authorization": f"Bearer {token}"}
        return env

    def _launch(self, name: str, role_args: list[str]) -> None:
        ports = {f"--{port}-port": free_port() for port in (
            "node-manager", "object-manager", "dashboard-agent-listen", "dashboard-agent-grpc",
            "runtime-env-agent", "metrics-export")}
        cmd = [*_ray_cli(), "start", "--block", *role_args, f"--temp-dir={self.root / name}",
               f"--num-cpus={self.cpus_per_node}", "--num-gpus=0",
               f"--object-store-memory={self.object_store_mb * 2**20}",
               *(f"{flag}={port}" for flag, port in ports.items()),
               "--disable-usage-stats", "--log-style=record", "--log-color=false"]
        log = self.root / f"{name}.log"
        env = {**self._env, "COURSE_LOCAL_NODE": str(self.root / name)}
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=self.root,
                                    start_new_session=True)
        self._nodes.append((proc, log))

    # A raylet gives its node's dashboard agent 15 s to come up; on an overloaded machine the
    # agent's imports can take longer and `ray start` exits. So each node gets a few attempts.
    ATTEMPTS = 4

    def _start_head(self) -> None:
        for attempt in range(1, self.ATTEMPTS + 1):
            gcs_port, dash_port = free_port(), free_port()
            self.address = f"127.0.0.1:{gcs_port}"
            self.dashboard_url = f"http://127.0.0.1:{dash_port}"
            self._launch("head" + (f"-{attempt}" if attempt > 1 else ""),
                         ["--head", f"--port={gcs_port}", "--include-dashboard=true",
                          "--dashboard-host=127.0.0.1", f"--dashboard-port={dash_port}",
                          f"--ray-client-server-port={free_port()}"])
            try:
                self._wait_until(
                    lambda: self._started() and self._jobs_api_up() and self._alive(1),
                    "starting the head node")
                return
            except _NodeDied:
                if attempt == self.ATTEMPTS:
                    raise
                self._discard_last()

    def _start_worker(self, index: int) -> None:
        for attempt in range(1, self.ATTEMPTS + 1):
            self._launch(f"w{index}" + (f"-{attempt}" if attempt > 1 else ""),
                         [f"--address={self.address}"])
            try:
                self._wait_until(lambda: self._started() and self._alive(index + 1),
                                 f"starting worker node {index}")
                return
            except _NodeDied:
                if attempt == self.ATTEMPTS:
                    raise
                self._discard_last()

    def _discard_last(self) -> None:
        """Forget the node that died while starting, and kill what it left behind."""
        proc, log = self._nodes.pop()           # its log stays in the folder for the record
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        _kill_marked(f"COURSE_LOCAL_NODE={log.with_suffix('')}")
        self.retries += 1
        time.sleep(2.0)                         # let the machine breathe before the next try

    def _raylet_fatal_line(self) -> str | None:
        """The fatal line of the newest node's raylet if it died (`ray start` notices ~30 s
        later, so this shortens a failed attempt)."""
        temp_dir = self._nodes[-1][1].with_suffix("")
        for out in temp_dir.glob("session_*/logs/raylet.out"):
            for line in out.read_text(errors="replace").splitlines():
                if _RAYLET_FATAL.match(line):
                    return line
        return None

    def _started(self) -> bool:
        """The newest node's `ray start` says it is up."""
        return "Ray runtime started" in self._nodes[-1][1].read_text(errors="replace")

    def _jobs_api_up(self) -> bool:
        with contextlib.suppress(requests.RequestException):
            r = requests.get(f"{self.dashboard_url}/api/version", headers=self.headers,
                             timeout=2)
            return r.status_code == 200
        return False

    def _alive(self, count: int) -> bool:
        with contextlib.suppress(requests.RequestException, ValueError, KeyError):
            return len(self.nodes()) >= count
        return False

    def _wait_until(self, ready, what: str) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            for proc, log in self._nodes:
                if proc.poll() is not None:
                    raise _NodeDied(
                        f"`ray start` ({log.stem}) exited with code {proc.returncode} while "
                        f"{what}. Its output ends with:\n"
                        f"{_tail(log.read_text(errors='replace'), 12)}\n(logs kept in "
                        f"{self.root}; an overloaded machine, a port taken meanwhile or no "
                        "space in /dev/shm or /tmp are the usual causes: try again)")
            fatal = self._raylet_fatal_line()
            if fatal:
                raise _NodeDied(f"the raylet of {self._nodes[-1][1].stem} died while {what}: "
                                f"{fatal[:400]} (logs kept in {self.root})")
            if ready():
                return
            time.sleep(0.5)
        logs = "\n".join(f"--- {log.name}\n{_tail(log.read_text(errors='replace'), 8)}"
                         for _, log in self._nodes)
        raise ClusterError(f"the local cluster did not finish {what} within "
                           f"{self.start_timeout_s:.0f} s (the machine may be overloaded; "
                           f"pass start_timeout_s=...). Logs kept in {self.root}:\n{logs}")

    # -- cluster view and jobs ---------------------------------------------------------------
    def nodes(self) -> list[dict[str, Any]]:
        """The live nodes: [{'node_id', 'is_head', 'cpus'}], head first."""
        r = requests.get(f"{self.dashboard_url}/api/v0/nodes", headers=self.headers,
                         params={"limit": 1000, "detail": "1"}, timeout=5)
        r.raise_for_status()
        rows = r.json()["data"]["result"]["result"]
        alive = [{"node_id": n["node_id"], "is_head": bool(n.get("is_head_node")),
                  "cpus": n.get("resources_total", {}).get("CPU", 0)}
                 for n in rows if n.get("state") == "ALIVE"]
        return sorted(alive, key=lambda n: not n["is_head"])

    def submit_job(self, entrypoint: list[str] | str, working_dir=None, env_vars=None,
                   **kwargs) -> str:
        return submit_job(entrypoint, working_dir, env_vars, self.dashboard_url,
                          headers=self.headers, **kwargs)

    def wait_for_job(self, job_id: str, timeout_s: float = 300.0, **kwargs) -> str:
        return wait_for_job(job_id, timeout_s, self.dashboard_url, headers=self.headers,
                            **kwargs)

    def follow_logs(self, job_id: str, timeout_s: float = 300.0, **kwargs) -> Iterator[str]:
        return follow_logs(job_id, timeout_s, self.dashboard_url, headers=self.headers,
                           **kwargs)

    def job_logs(self, job_id: str) -> str:
        return job_logs(job_id, self.dashboard_url, headers=self.headers)

    def stop_job(self, job_id: str) -> bool:
        return stop_job(job_id, self.dashboard_url, headers=self.headers)


_RAYLET_FATAL = re.compile(r"^\[[\d-]+ [\d:,.]+ C \d+ \d+\]")   # "[date time C pid tid]"


def _kill_marked(marker: str) -> None:
    """SIGKILL the processes whose environment holds `marker` ('NAME=value') exactly."""
    needle = f"\0{marker}\0".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in b"\0" + f.read() + b"\0":
                    os.kill(int(entry), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            continue


# --------------------------------------------------------------------------------------------
# 3. Ray Jobs: submit, follow, wait; every call bounded in time
# --------------------------------------------------------------------------------------------

def auth_headers(token: str | None = None) -> dict[str, str]:
    """The Authorization header for a token-auth cluster: `token`, else RAY_AUTH_TOKEN, else
    the file at RAY_AUTH_TOKEN_PATH, else ~/.ray/auth_token (the file cluster/aws.yaml ships
    to every node). Empty when there is no token."""
    token = token or os.environ.get("RAY_AUTH_TOKEN")
    if not token:
        path = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or "~/.ray/auth_token").expanduser()
        token = path.read_text().strip() if path.is_file() else None
    return {"Authorization": f"Bearer {token}"} if token else {}


def _check_jobs_address(address: str, timeout_s: float = 5.0) -> None:
    parsed = urlparse(address)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ClusterError(f"Ray Jobs address {address!r} must look like "
                           f"{DEFAULT_JOBS_ADDRESS} (the dashboard, not the GCS port 6379).")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        socket.create_connection((parsed.hostname, port), timeout=timeout_s).close()
    except OSError as err:
        raise ClusterError(
            f"Cannot reach Ray Jobs at {address} ({err.strerror or err}). Is the cluster up? "
            "For the AWS cluster keep `ray dashboard cluster/aws.yaml` running in another "
            "terminal (it opens the tunnel to 127.0.0.1:8265); for a LocalCluster use its "
            ".dashboard_url.") from None


def _client(address: str, headers: dict | None, request_timeout_s: float = 60.0):
    """A JobSubmissionClient whose every HTTP request has a timeout (Ray's has none)."""
    from ray.job_submission import JobSubmissionClient

    class _BoundedClient(JobSubmissionClient):
        def _do_request(self, method, endpoint, **kwargs):
            kwargs.setdefault("timeout", (5.0, request_timeout_s))
            return super()._do_request(method, endpoint, **kwargs)

    _check_jobs_address(address)
    try:
        return _BoundedClient(address, headers=dict(headers or {}))
    except Exception as err:
        raise _explain_job_error(err, address) from None


def _explain_job_error(err: Exception, address: str) -> ClusterError:
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    if "uthenticat" in text or "401" in text or "403" in text:
        return ClusterError(
            f"The Ray cluster at {address} refused the request: it uses token authentication "
            f"({text}). Pass headers=auth_headers() (reads ~/.ray/auth_token, the token you "
            "created with `ray get-auth-token --generate` and shipped with cluster/aws.yaml), or "
            "for the CLI set RAY_AUTH_MODE=token.")
    if isinstance(err, requests.Timeout):
        return ClusterError(f"Ray Jobs at {address} did not answer in time ({text}); the head "
                            "node may be overloaded. Check `ray status` on the head.")
    return ClusterError(f"Ray Jobs at {address} failed: {text}")


def submit_job(entrypoint: list[str] | str, working_dir: str | os.PathLike | None = None,
               env_vars: dict[str, str] | None = None, address: str = DEFAULT_JOBS_ADDRESS, *,
               excludes: list[str] | None = None, headers: dict | None = None,
               submission_id: str | None = None, entrypoint_num_cpus: float = 0) -> str:
    """Submit `entrypoint` as a Ray job; returns its id.

    `working_dir` is zipped (minus WORKING_DIR_EXCLUDES and `excludes`), uploaded, unpacked on
    every node and made the current directory and first sys.path entry of the driver and of
    every task and actor. `env_vars` reach the driver and all workers. The entrypoint runs in
    a shell on the head: give it as a list (quoted for you) or one shell string.
    """
    command = entrypoint if isinstance(entrypoint, str) else shlex.join(map(str, entrypoint))
    runtime_env: dict[str, Any] = {}
    if working_dir is not None:
        working_dir = Path(working_dir)
        if not working_dir.is_dir():
            raise ClusterError(f"working_dir {working_dir} is not a directory.")
        runtime_env["working_dir"] = str(working_dir)
        runtime_env["excludes"] = WORKING_DIR_EXCLUDES + list(excludes or [])
    if env_vars:
        runtime_env["env_vars"] = {str(k): str(v) for k, v in env_vars.items()}
    client = _client(address, headers)
    # Ray logs every packaging step at INFO on stderr (keep its warnings), and warns that .git
    # is no longer shipped, which is what we want anyway
    try:
        with (_loggers_at(logging.WARNING, "ray.dashboard.modules.dashboard_sdk",
                          "ray._private.runtime_env.packaging"),
              _loggers_at(logging.ERROR, "ray._private.runtime_env.working_dir")):
            return client.submit_job(entrypoint=command, runtime_env=runtime_env or None,
                                     submission_id=submission_id,
                                     entrypoint_num_cpus=entrypoint_num_cpus)
    except Exception as err:
        raise _explain_job_error(err, address) from None


def job_logs(job_id: str, address: str = DEFAULT_JOBS_ADDRESS, *,
             headers: dict | None = None) -> str:
    """Everything the job printed so far."""
    client = _client(address, headers)
    try:
        return client.get_job_logs(job_id)
    except Exception as err:
        raise _explain_job_error(err, address) from None


def stop_job(job_id: str, address: str = DEFAULT_JOBS_ADDRESS, *,
             headers: dict | None = None) -> bool:
    """Ask the cluster to stop a job; True if it was still running."""
    client = _client(address, headers)
    try:
        return client.stop_job(job_id)
    except Exception as err:
        raise _explain_job_error(err, address) from None


def _status(client, job_id: str, address: str):
    try:
        return client.get_job_info(job_id)
    except Exception as err:
        raise _explain_job_error(err, address) from None


def follow_logs(job_id: str, timeout_s: float = 300.0, address: str = DEFAULT_JOBS_ADDRESS, *,
                headers: dict | None = None, poll_s: float = 1.0) -> Iterator[str]:
    """Yield the job's log lines as they appear, until it ends (then return) or `timeout_s`
    passes (then JobTimeoutError; the job keeps running). Polls; never blocks on a socket."""
    client = _client(address, headers)
    deadline = time.monotonic() + timeout_s
    seen = 0
    while True:
        info = _status(client, job_id, address)      # status first: no line lost at the end
        try:
            text = client.get_job_logs(job_id)
        except Exception as err:
            raise _explain_job_error(err, address) from None
        lines = text.splitlines()
        yield from lines[seen:]
        seen = len(lines)
        if str(info.status) in TERMINAL_STATUSES:
            return
        if time.monotonic() >= deadline:
            raise JobTimeoutError(
                f"job {job_id} still {info.status} after {timeout_s:.0f} s of log following; "
                f"it keeps running: follow it again, or stop it with `ray job stop {job_id} "
                f"--address {address}`.")
        time.sleep(poll_s)


def wait_for_job(job_id: str, timeout_s: float = 300.0, address: str = DEFAULT_JOBS_ADDRESS, *,
                 headers: dict | None = None, poll_s: float = 0.5, raise_on_failure: bool = True,
                 tail_lines: int = 30) -> str:
    """Wait until the job ends; returns its final status ('SUCCEEDED', ...).

    A FAILED or STOPPED job raises JobFailedError (unless raise_on_failure=False) with the
    status message and the tail of the job's logs; a job still running after `timeout_s`
    raises JobTimeoutError (the job is left running: stop it with `ray job stop`).
    """
    client = _client(address, headers)
    deadline = time.monotonic() + timeout_s
    while True:
        info = _status(client, job_id, address)
        status = str(info.status)
        if status in TERMINAL_STATUSES:
            break
        if time.monotonic() >= deadline:
            tail = _tail(_safe_logs(client, job_id), tail_lines)
            raise JobTimeoutError(
                f"job {job_id} is still {status} after {timeout_s:.0f} s. It keeps running: "
                f"wait again with a larger timeout_s, or stop it with `ray job stop {job_id} "
                f"--address {address}`. Its logs end with:\n{tail}")
        time.sleep(poll_s)
    if status != "SUCCEEDED" and raise_on_failure:
        tail = _tail(_safe_logs(client, job_id), tail_lines)
        # Ray's message repeats the whole log after its first line: keep the first line only.
        message = (info.message or "").strip().split("\n", 1)[0].removesuffix(":")
        raise JobFailedError(
            f"job {job_id} {status}: {message}\nEntrypoint: {info.entrypoint}\n"
            f"Fix the entrypoint (run it locally first to see the error); full logs: "
            f"`ray job logs {job_id} --address {address}`. Last lines:\n{tail}",
            job_id, status, tail)
    return status


def _safe_logs(client, job_id: str) -> str:
    try:
        return client.get_job_logs(job_id)
    except Exception as err:   # the logs are a bonus in an error message, never a new error
        return f"(logs unavailable: {err})"


# --------------------------------------------------------------------------------------------
# 4. The AWS steps, run only when the attendee names a cluster
# --------------------------------------------------------------------------------------------

#: set this variable to a cluster name (e.g. `export COURSE_AWS_CLUSTER=rl-alice`) to let
#: notebook 08 create, use and delete that cluster on AWS; unset, the cells only show commands
AWS_CLUSTER_VAR = "COURSE_AWS_CLUSTER"


def aws_cluster_name() -> str | None:
    """The cluster name in COURSE_AWS_CLUSTER, or None (then nothing touches AWS)."""
    name = os.environ.get(AWS_CLUSTER_VAR, "").strip()
    if name and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9-]{0,39}", name):
        raise ValueError(f"{AWS_CLUSTER_VAR}={name!r}: use letters, digits and dashes only "
                         "(it names AWS resources), at most 40 characters")
    return name or None


def aws_command(step: str, cluster_name: str | None, yaml_path: str = "cluster/aws.yaml",
                job: list[str] | None = None) -> list[str]:
    """The command line of one step of the AWS runbook (cluster/README.md).

    | step       | what it does                                                      |
    | ---------- | ----------------------------------------------------------------- |
    | up         | create or update the cluster (`ray up`, no prompt)                |
    | dashboard  | the SSH tunnel to the dashboard and Jobs API on 127.0.0.1:8265    |
    | submit     | `ray job submit` of `job` with this directory as working dir      |
    | fetch      | copy the run folders back to ./results (`ray rsync-down`)         |
    | down       | terminate every node (`ray down`, no prompt)                      |
    """
    name = ["--cluster-name", cluster_name or "<your-cluster-name>"]
    commands = {
        "up": ["ray", "up", yaml_path, *name, "--yes"],
        "dashboard": ["ray", "dashboard", yaml_path, *name],
        "submit": ["ray", "job", "submit", "--address", DEFAULT_JOBS_ADDRESS,
                   "--working-dir", ".", "--", *(job or [])],
        "fetch": ["ray", "rsync-down", yaml_path, "/home/ubuntu/results/", "./results/", *name],
        "down": ["ray", "down", yaml_path, *name, "--yes"],
    }
    if step not in commands:
        raise ValueError(f"unknown step {step!r}; one of {', '.join(commands)}")
    return commands[step]


def run_or_show(command: list[str], cluster_name: str | None, timeout_s: float = 3600,
                cwd: str | os.PathLike | None = None) -> int | None:
    """Show `command`; run it as well when a cluster is named. Returns its exit status (None
    when only shown). Output goes to this process's stdout as it comes."""
    print("$ " + shlex.join(command))
    if cluster_name is None:
        print(f"  (not run: set {AWS_CLUSTER_VAR}=<name> before starting Jupyter to run it)")
        return None
    env = {**os.environ, "RAY_AUTH_MODE": "token"}   # the ray CLI then sends ~/.ray/auth_token
    try:
        done = subprocess.run(command, cwd=cwd, env=env, timeout=timeout_s, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except subprocess.TimeoutExpired:
        raise ClusterError(f"`{shlex.join(command)}` did not finish within {timeout_s:.0f} s; "
                           "check the AWS console and finish with `ray down` yourself") from None
    print(done.stdout)
    return done.returncode


def open_tunnel(cluster_name: str | None, yaml_path: str = "cluster/aws.yaml",
                timeout_s: float = 60.0) -> subprocess.Popen | None:
    """Start `ray dashboard` (the SSH tunnel to 127.0.0.1:8265) in the background when a
    cluster is named, and wait until the Jobs API answers; None when only shown.
    Stop it with `proc.terminate()` (notebook 08 does, before `ray down`)."""
    command = aws_command("dashboard", cluster_name, yaml_path)
    print("$ " + shlex.join(command) + "    # keep running: it is the tunnel")
    if cluster_name is None:
        print(f"  (not run: set {AWS_CLUSTER_VAR}=<name> before starting Jupyter to run it)")
        return None
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "RAY_AUTH_MODE": "token"})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            _check_jobs_address(DEFAULT_JOBS_ADDRESS, timeout_s=2.0)
            return proc
        except ClusterError:
            if proc.poll() is not None:
                break
            time.sleep(2.0)
    proc.terminate()
    raise ClusterError(f"the tunnel `{shlex.join(command)}` did not reach the dashboard within "
                       f"{timeout_s:.0f} s: is the cluster up (`ray up`), and is port 8265 free "
                       "on this laptop?")
