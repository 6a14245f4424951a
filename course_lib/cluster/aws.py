"""The AWS steps of the runbook (cluster/README.md), run only when the attendee names a cluster.

Without COURSE_AWS_CLUSTER every step only prints its command, so notebook 08 doubles as the
runbook for a terminal and never touches AWS by accident:

    name = aws_cluster_name()                              # None unless the variable is set
    run_or_show(aws_command("up", name), name)             # SSH narrowed, `ray up ...`
    tunnel = open_tunnel(name)                             # `ray dashboard`: 127.0.0.1:8265
    run_or_show(aws_command("down", name), name)           # `ray down`, then the checklist
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from pathlib import Path

from course_lib.cluster.common import ClusterError
from course_lib.cluster.jobs import DEFAULT_JOBS_ADDRESS, check_jobs_address

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
    when only shown). Output goes to this process's stdout as it comes.

    Before a `ray up` it runs, it narrows SSH to this machine's address (`ssh.narrow_ssh`, as
    `python -m course_lib.cluster up` does; COURSE_SSH_FROM widens it)."""
    print("$ " + shlex.join(command))
    if cluster_name is None:
        print(f"  (not run: set {AWS_CLUSTER_VAR}=<name> before starting Jupyter to run it)")
        return None
    if command[:2] == ["ray", "up"]:
        from course_lib.cluster.ssh import narrow_ssh

        print(narrow_ssh(Path(cwd or ".") / command[2], cluster_name=cluster_name))
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
            check_jobs_address(DEFAULT_JOBS_ADDRESS, timeout_s=2.0)
            return proc
        except ClusterError:
            if proc.poll() is not None:
                break
            time.sleep(2.0)
    proc.terminate()
    raise ClusterError(f"the tunnel `{shlex.join(command)}` did not reach the dashboard within "
                       f"{timeout_s:.0f} s: is the cluster up (`ray up`), and is port 8265 free "
                       "on this laptop?")
