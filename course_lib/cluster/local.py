"""A Ray cluster of several nodes on this machine, started through the real command line.

    with LocalCluster(num_workers=1, cpus_per_node=1) as cluster:    # `ray start` x 2
        job_id = cluster.jobs.submit(["python", "run.py"], working_dir="my_dir")
        print(cluster.jobs.wait(job_id, timeout_s=120))              # 'SUCCEEDED'
        print(cluster.jobs.logs(job_id))

Each node is a `ray start --block` process with its own temp dir, ports and CPU count, so the
lesson's cluster is what `ray up` builds on AWS, minus the machines. Unix-socket paths are
short (see `socket_path_length`), and `stop()` leaves no process behind on Linux or macOS.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
import requests

from course_lib.cluster.common import ClusterError, tail
from course_lib.cluster.jobs import Jobs


class _NodeDied(ClusterError):
    """A `ray start` process exited while the local cluster was starting."""


def free_port() -> int:
    """A TCP port that was free a moment ago (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _ray_cli() -> list[str]:
    """The `ray` command of this Python environment (never another install on PATH)."""
    script = Path(sys.executable).with_name("ray")
    return [str(script)] if script.exists() else [sys.executable, "-m", "ray.scripts.scripts"]


# Unix-socket paths: Ray puts a node's sockets in <temp-dir>/<session>/sockets/ and refuses a
# path longer than the OS takes; the dashboard then dies with "Module MetricsHead failed to
# start". So the cluster folder's parent must leave room for the longest path a node creates.

#: the longest unix-socket path the OS takes, in bytes (Ray checks the same limits)
SOCKET_PATH_MAX = (104 if sys.platform == "darwin" else 108) - 1
#: the longest name in sockets/: one socket per dashboard module, `dash_<Module>`, and
#: TaskEventsHead is the longest module name in Ray 2.60 (MetricsHead is the one seen failing)
LONGEST_SOCKET = "dash_TaskEventsHead"
#: `session_<date>_<time>_<usec>_<pid>`: fixed width but for the head's pid (Linux: <= 7 digits)
SESSION_DIR = "session_2026-01-01_00-00-00_000000_" + "9" * 7
#: the cluster folder that `tempfile.mkdtemp(prefix="lc-")` makes: 8 random characters
CLUSTER_DIR = "lc-" + "x" * 8


def socket_path_length(parent: str | os.PathLike, num_workers: int, attempts: int) -> int:
    """Bytes of the longest socket path a LocalCluster under `parent` can create: its longest
    node folder (`head-<attempt>` or `w<index>-<attempt>`), the session, `sockets/`, the
    longest socket name."""
    node = max(f"head-{attempts}", f"w{num_workers}-{attempts}", key=len)
    path = Path(parent).resolve() / CLUSTER_DIR / node / SESSION_DIR / "sockets" / LONGEST_SOCKET
    return len(str(path).encode())


def cluster_parent(preferred: str | os.PathLike, num_workers: int, attempts: int) -> Path:
    """`preferred` when every socket path of the cluster fits under it, else /tmp."""
    for parent in (Path(preferred), Path("/tmp")):
        if socket_path_length(parent, num_workers, attempts) <= SOCKET_PATH_MAX:
            return parent
    raise ClusterError(f"no folder short enough for Ray's unix sockets (at most "
                       f"{SOCKET_PATH_MAX} bytes): pass root= a short folder such as /tmp.")


class LocalCluster:
    """A Ray cluster of one head and `num_workers` worker nodes on this machine.

    Each node is a `ray start --block` process with its own `--temp-dir` under one cluster
    folder, its own ports (picked free, so other Ray instances on the machine are never
    touched) and `cpus_per_node` CPUs. All nodes use token authentication, as a cluster on
    EC2 does: a fresh token is written into the cluster folder and handed to every node
    through RAY_AUTH_TOKEN_PATH, and `headers` carries it for the Jobs API.

    `address` is the GCS address (what `ray start --address` and `ray.init` take),
    `dashboard_url` the Jobs API address (what `ray job submit --address` takes).
    Use it as a context manager, or call `start()` / `stop()`; `stop()` also runs at exit.
    """

    def __init__(self, num_workers: int = 1, cpus_per_node: int = 1, *,
                 object_store_mb: int = 100, root: str | os.PathLike | None = None,
                 start_timeout_s: float = 120.0, keep_files: bool = False):
        if num_workers < 0 or cpus_per_node < 1:
            raise ValueError("need num_workers >= 0 and cpus_per_node >= 1")
        self.num_workers, self.cpus_per_node = num_workers, cpus_per_node
        self.object_store_mb, self.start_timeout_s = object_store_mb, start_timeout_s
        self.keep_files = keep_files
        self._parent = Path(root) if root else Path(os.environ.get("RAY_TMPDIR") or "/tmp")
        self.root: Path | None = None
        self.address = self.dashboard_url = None
        self.headers: dict[str, str] = {}
        self._nodes: list[tuple[subprocess.Popen, Path]] = []   # (`ray start` process, its log)
        self.timings: dict[str, float] = {}
        self.retries = 0                        # node starts that had to be repeated
        self._jobs: Jobs | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = (f"address={self.address}, dashboard_url={self.dashboard_url}"
                 if self._nodes else "stopped")
        return (f"LocalCluster(head + {self.num_workers} workers x {self.cpus_per_node} CPU, "
                f"auth=token, {state})")

    def start(self) -> LocalCluster:
        """Start the head, then each worker; returns when all nodes are alive (or raises)."""
        if self._nodes:
            return self
        t0 = time.monotonic()
        # Short paths: a parent too long for Ray's unix sockets falls back to /tmp.
        parent = cluster_parent(self._parent, self.num_workers, self.ATTEMPTS)
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
        self._nodes, self._jobs = [], None
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
            kill_marked("COURSE_LOCAL_CLUSTER", str(self.root))   # strays that left the group
            keep = self.keep_files if keep_files is None else keep_files
            if not keep:
                shutil.rmtree(self.root, ignore_errors=True)
        if procs:
            self.timings["stop_s"] = time.monotonic() - t0

    # -- internals ---------------------------------------------------------------------------
    def _node_env(self) -> dict[str, str]:
        """One environment for every node: token auth with one token file, a marker."""
        env = {k: v for k, v in os.environ.items()
               if k not in ("RAY_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")}
        env.update(RAY_AUTH_MODE="token", RAY_USAGE_STATS_ENABLED="0",
                   COURSE_LOCAL_CLUSTER=str(self.root),
                   # the dashboard's module processes get 30 s by default; 2 busy cores need more
                   RAY_DASHBOARD_SUBPROCESS_MODULE_WAIT_READY_TIMEOUT="120",
                   # `python` in a job's entrypoint is this environment's Python, as on the
                   # AWS nodes where the start commands put ~/venv/bin first.
                   PATH=os.pathsep.join([str(Path(sys.executable).parent),
                                         os.environ.get("PATH", "")]))
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
        kill_marked("COURSE_LOCAL_NODE", str(log.with_suffix("")))
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
                        f"{tail(log.read_text(errors='replace'), 12)}\n(logs kept in "
                        f"{self.root}; an overloaded machine, a port taken meanwhile or no "
                        "space in /dev/shm or /tmp are the usual causes: try again)")
            fatal = self._raylet_fatal_line()
            if fatal:
                raise _NodeDied(f"the raylet of {self._nodes[-1][1].stem} died while {what}: "
                                f"{fatal[:400]} (logs kept in {self.root})")
            if ready():
                return
            time.sleep(0.5)
        logs = "\n".join(f"--- {log.name}\n{tail(log.read_text(errors='replace'), 8)}"
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

    @property
    def jobs(self) -> Jobs:
        """The Jobs API of this cluster (submit, follow, wait), with its token."""
        if not self._nodes:
            raise ClusterError("this LocalCluster is not running: call start() first (or use "
                               "it as `with LocalCluster(...) as cluster:`).")
        if self._jobs is None:
            self._jobs = Jobs(self.dashboard_url, self.headers)
        return self._jobs


_RAYLET_FATAL = re.compile(r"^\[[\d-]+ [\d:,.]+ C \d+ \d+\]")   # "[date time C pid tid]"


def kill_marked(name: str, value: str) -> None:
    """SIGKILL every process (but this one) whose environment has `name` set to `value`: the
    marker that every process of a LocalCluster node inherits, including those that left the
    node's process group. Processes we may not inspect are skipped."""
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        with contextlib.suppress(psutil.Error, OSError):
            if proc.environ().get(name) == value:
                proc.kill()
