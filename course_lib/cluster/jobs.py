"""Ray Jobs on any cluster: submit a command line with its working directory, follow its logs,
wait for its end. One `Jobs` object per cluster, over Ray's own `JobSubmissionClient`::

    jobs = Jobs("http://127.0.0.1:8265", headers=auth_headers())   # `ray dashboard` tunnel
    job_id = jobs.submit(["python", "-m", "course_lib", "train", ...], working_dir=".")
    for line in jobs.follow(job_id, timeout_s=600):
        print(line)
    jobs.wait(job_id)                       # 'SUCCEEDED', or JobFailedError with the log tail

A `LocalCluster` hands out its own as `cluster.jobs`. What this adds to Ray's client: every wait
is bounded (an unreachable address fails in seconds, every HTTP request has a timeout, a job that
outlives its budget raises `JobTimeoutError`), a failed job raises `JobFailedError` carrying the
tail of its logs, and each error is one line that says what to do. Anything else (stopping a
job, listing jobs) is Ray's client itself: `jobs.client.stop_job(job_id)`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import requests

from course_lib.cluster.common import (
    ClusterError,
    JobFailedError,
    JobTimeoutError,
    loggers_at,
    tail,
)
from course_lib.errors import first_line

DEFAULT_JOBS_ADDRESS = "http://127.0.0.1:8265"   # the dashboard, local or through `ray dashboard`
TERMINAL_STATUSES = ("SUCCEEDED", "FAILED", "STOPPED")

# Never shipped with a job: environments, VCS data, caches, results, notebooks and their outputs.
# (gitignore syntax; Ray also honours the working directory's .gitignore.)
WORKING_DIR_EXCLUDES = [
    ".git", ".venv", "venv", "env", "__pycache__", "*.pyc", "*.egg-info",
    ".pytest_cache", ".ruff_cache", ".hypothesis", ".ipynb_checkpoints", "*.ipynb",
    "/results/", "/build/", "/slides/", "/bench/",
]


def auth_headers(token: str | None = None) -> dict[str, str]:
    """The Authorization header for a token-auth cluster: `token`, else RAY_AUTH_TOKEN, else
    the file at RAY_AUTH_TOKEN_PATH, else ~/.ray/auth_token (the file cluster/aws.yaml ships
    to every node). Empty when there is no token."""
    token = token or os.environ.get("RAY_AUTH_TOKEN")
    if not token:
        path = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or "~/.ray/auth_token").expanduser()
        token = path.read_text().strip() if path.is_file() else None
    return {"Authorization": f"Bearer {token}"} if token else {}


def check_jobs_address(address: str, timeout_s: float = 5.0) -> None:
    """ClusterError within `timeout_s` unless something listens at the Jobs API `address`."""
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
            ".jobs.") from None


@contextlib.contextmanager
def quiet_job_upload():
    """Hide what Ray logs while it ships a job's working directory: every packaging step at
    INFO on stderr (its warnings stay), and a warning that .git is not shipped (as we want)."""
    with (loggers_at(logging.WARNING, "ray.dashboard.modules.dashboard_sdk",
                     "ray._private.runtime_env.packaging"),
          loggers_at(logging.ERROR, "ray._private.runtime_env.working_dir")):
        yield


class Jobs:
    """The Jobs API of one cluster (its dashboard address), with bounded waits.

    `headers`: for a token-auth cluster, `auth_headers()`. `request_timeout_s` bounds each
    HTTP request (Ray's client has no timeout of its own).
    """

    def __init__(self, address: str = DEFAULT_JOBS_ADDRESS, headers: dict | None = None,
                 request_timeout_s: float = 60.0):
        from ray.job_submission import JobSubmissionClient

        class BoundedClient(JobSubmissionClient):
            def _do_request(self, method, endpoint, **kwargs):
                kwargs.setdefault("timeout", (5.0, request_timeout_s))
                return super()._do_request(method, endpoint, **kwargs)

        check_jobs_address(address)
        self.address = address
        self.client = self._call(BoundedClient, address, headers=dict(headers or {}))

    def __repr__(self) -> str:
        return f"Jobs({self.address!r})"

    def submit(self, entrypoint: list[str] | str, working_dir: str | os.PathLike | None = None,
               env_vars: dict[str, str] | None = None, *, excludes: list[str] | None = None,
               submission_id: str | None = None, entrypoint_num_cpus: float = 0) -> str:
        """Submit `entrypoint` as a Ray job; returns its id.

        `working_dir` is zipped (minus WORKING_DIR_EXCLUDES and `excludes`), uploaded, unpacked
        on every node and made the current directory and first sys.path entry of the driver and
        of every task and actor. `env_vars` reach the driver and all workers. The entrypoint
        runs in a shell on the head: give it as a list (quoted for you) or one shell string.
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
        with quiet_job_upload():
            return self._call(self.client.submit_job, entrypoint=command,
                              runtime_env=runtime_env or None, submission_id=submission_id,
                              entrypoint_num_cpus=entrypoint_num_cpus)

    def logs(self, job_id: str) -> str:
        """Everything the job printed so far."""
        return self._call(self.client.get_job_logs, job_id)

    def follow(self, job_id: str, timeout_s: float = 300.0, poll_s: float = 1.0) -> Iterator[str]:
        """Yield the job's log lines as they appear, until it ends (then return) or `timeout_s`
        passes (then JobTimeoutError; the job keeps running). Polls; never blocks on a socket."""
        deadline = time.monotonic() + timeout_s
        seen = 0
        while True:
            info = self._call(self.client.get_job_info, job_id)   # status first: no line lost
            lines = self.logs(job_id).splitlines()
            yield from lines[seen:]
            seen = len(lines)
            if str(info.status) in TERMINAL_STATUSES:
                return
            if time.monotonic() >= deadline:
                raise JobTimeoutError(
                    f"job {job_id} still {info.status} after {timeout_s:.0f} s of log following;"
                    f" it keeps running: follow it again, or stop it with `ray job stop {job_id}"
                    f" --address {self.address}`.")
            time.sleep(poll_s)

    def wait(self, job_id: str, timeout_s: float = 300.0, *, poll_s: float = 0.5,
             raise_on_failure: bool = True, tail_lines: int = 30) -> str:
        """Wait until the job ends; returns its final status ('SUCCEEDED', ...).

        A FAILED or STOPPED job raises JobFailedError (unless raise_on_failure=False) with the
        status message and the tail of the job's logs; a job still running after `timeout_s`
        raises JobTimeoutError (the job is left running: stop it with `ray job stop`).
        """
        deadline = time.monotonic() + timeout_s
        while True:
            info = self._call(self.client.get_job_info, job_id)
            status = str(info.status)
            if status in TERMINAL_STATUSES:
                break
            if time.monotonic() >= deadline:
                raise JobTimeoutError(
                    f"job {job_id} is still {status} after {timeout_s:.0f} s. It keeps running: "
                    f"wait again with a larger timeout_s, or stop it with `ray job stop {job_id} "
                    f"--address {self.address}`. Its logs end with:\n"
                    f"{tail(self._logs_or_note(job_id), tail_lines)}")
            time.sleep(poll_s)
        if status != "SUCCEEDED" and raise_on_failure:
            end = tail(self._logs_or_note(job_id), tail_lines)
            # Ray's message repeats the whole log after its first line: keep the first line.
            message = (info.message or "").strip().split("\n", 1)[0].removesuffix(":")
            raise JobFailedError(
                f"job {job_id} {status}: {message}\nEntrypoint: {info.entrypoint}\n"
                f"Fix the entrypoint (run it locally first to see the error); full logs: "
                f"`ray job logs {job_id} --address {self.address}`. Last lines:\n{end}",
                job_id, status, end)
        return status

    # -- internals ---------------------------------------------------------------------------
    def _call(self, method, *args, **kwargs):
        """`method(*args, **kwargs)`, any failure turned into one ClusterError that says what
        to do (token refused, head overloaded, anything else: Ray's first line)."""
        try:
            return method(*args, **kwargs)
        except ClusterError:
            raise
        except Exception as err:
            text = first_line(err)
            if "uthenticat" in text or "401" in text or "403" in text:
                raise ClusterError(
                    f"The Ray cluster at {self.address} refused the request: it uses token "
                    f"authentication ({text}). Pass headers=auth_headers() (reads "
                    "~/.ray/auth_token, the token you created with `ray get-auth-token "
                    "--generate` and shipped with cluster/aws.yaml), or for the CLI set "
                    "RAY_AUTH_MODE=token.") from None
            if isinstance(err, requests.Timeout):
                raise ClusterError(f"Ray Jobs at {self.address} did not answer in time ({text});"
                                   " the head node may be overloaded. Check `ray status` on the "
                                   "head.") from None
            raise ClusterError(f"Ray Jobs at {self.address} failed: {text}") from None

    def _logs_or_note(self, job_id: str) -> str:
        """The logs for an error message: a note instead of a second error."""
        try:
            return self.client.get_job_logs(job_id)
        except Exception as err:
            return f"(logs unavailable: {first_line(err)})"
