"""Checkers for notebook 08, the cluster."""

from __future__ import annotations

import time

from course_lib.teaching.exercises.core import _Failed, checker, require_close


@checker(8, "job_entrypoint",
         "a list of arguments the command line accepts.")
def check_job_entrypoint(job_entrypoint):
    """job_entrypoint(algo, env_id, num_workers, stop) -> the argv list of the training job."""
    import json

    from course_lib import cli

    stop = {"eval_return": 475, "time_s": 600}
    argv = job_entrypoint("apex", "CartPole-v1", 8, stop)
    if isinstance(argv, str):
        raise _Failed("it returned one string; Ray Jobs (and subprocess) want a list of "
                      "arguments.",
                      "Return a list: ['python', '-m', 'course_lib', 'train', ...]. A single "
                      "string would need shell quoting around the JSON.")
    if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
        raise _Failed(f"it returned {argv!r}; expected a list of strings.",
                      "Numbers too: str(num_workers).")
    if argv[:4] != ["python", "-m", "course_lib", "train"]:
        raise _Failed(f"it starts with {argv[:4]}, expected "
                      "['python', '-m', 'course_lib', 'train'].",
                      "The job runs the workshop's command line with the cluster's Python.")
    try:
        args = cli.build_parser().parse_args(argv[3:])
    except (cli.UsageError, SystemExit) as err:
        raise _Failed(f"the command line refuses it: {err}",
                      "Options: --algo, --env, --num-workers, --stop.") from None
    got = (args.algo, args.env, args.num_workers)
    if got != ("apex", "CartPole-v1", 8):
        raise _Failed(f"algo, env, workers parsed as {got}, expected "
                      "('apex', 'CartPole-v1', 8).",
                      "Pass each value after its option.")
    if json.loads(args.stop) != stop:
        raise _Failed(f"--stop parsed as {args.stop!r}.",
                      "Write the dict as JSON with json.dumps(stop).")


@checker(8, "make_safe",
         "no stopped nodes left behind, dashboard closed to the internet.")
def check_make_safe(make_safe):
    """make_safe(config) fixes what cluster.safety_problems flags, keeping the node types."""
    import copy

    from course_lib import cluster
    from course_lib.workspace import REPO

    base = cluster.load_cluster_yaml(REPO / "cluster" / "aws.yaml")
    unsafe = copy.deepcopy(base)
    unsafe["provider"]["cache_stopped_nodes"] = True
    unsafe["provider"]["security_group"] = {"IpPermissions": [
        {"FromPort": 22, "ToPort": 22, "IpProtocol": "tcp",
         "IpRanges": [{"CidrIp": "0.0.0.0/0"}]},
        {"FromPort": 8265, "ToPort": 8265, "IpProtocol": "tcp",
         "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}]}
    fixed = make_safe(copy.deepcopy(unsafe))
    if not isinstance(fixed, dict):
        raise _Failed(f"it returned {type(fixed).__name__}, expected the config dict.",
                      "Change the dict and return it.")
    problems = cluster.safety_problems(fixed)
    if problems:
        raise _Failed(f"still unsafe: {problems[0]}",
                      "Two fixes: provider.cache_stopped_nodes = False, and no rule that "
                      "opens port 8265 to 0.0.0.0/0 (keep the SSH rule).")
    if set(fixed.get("available_node_types", {})) != set(base["available_node_types"]):
        raise _Failed("it changed the node types.", "Fix the provider section only.")
    rules = (fixed["provider"].get("security_group") or {}).get("IpPermissions") or []
    if not any(rule.get("FromPort") == 22 for rule in rules):
        raise _Failed("it removed the SSH rule too: the launcher, `ray dashboard` and "
                      "`ray rsync-down` all need SSH.",
                      "Keep the rule for port 22; drop only the one for 8265.")


_PROBE = """import os, sys
print("argv", sys.argv[1:], "PROBE", os.environ.get("PROBE"), "data", open("data.txt").read())
"""


@checker(8, "submit_with_env", "the job ran on the cluster with your files, arguments and "
         "environment.")
def check_submit_with_env(submit_with_env, client, timeout_s: float = 120.0):
    """submit_with_env(client, argv, working_dir, env_vars) must submit a real job through the
    JobSubmissionClient `client`: the working directory shipped, every argument intact (one
    with a space), the environment variables set. The checker runs it and reads its logs."""
    import tempfile
    from pathlib import Path

    from ray.job_submission import JobStatus

    from course_lib.cluster.jobs import quiet_job_upload

    workdir = Path(tempfile.mkdtemp(prefix="probe-job-"))
    (workdir / "probe.py").write_text(_PROBE)
    (workdir / "data.txt").write_text("shipped")
    with quiet_job_upload():                   # Ray's INFO lines about packaging the folder
        job_id = submit_with_env(client, ["python", "probe.py", "two words"], str(workdir),
                                 {"PROBE": "42"})
    if not isinstance(job_id, str):
        raise _Failed(f"it returned {type(job_id).__name__}, expected the job's id (a str).",
                      "Return what client.submit_job(...) returns.")
    deadline = time.monotonic() + timeout_s
    while not (status := client.get_job_status(job_id)).is_terminal():
        if time.monotonic() > deadline:
            client.stop_job(job_id)
            raise _Failed(f"the job was still {status} after {timeout_s:.0f} s.",
                          "Is the cluster up? `print(client.list_jobs())` shows every job.")
        time.sleep(0.5)
    logs = client.get_job_logs(job_id)
    if status != JobStatus.SUCCEEDED:
        tail = (logs.strip().splitlines() or ["(no output)"])[-1]
        raise _Failed(f"the job {status}: {tail}",
                      "runtime_env={'working_dir': working_dir, ...} ships probe.py to the "
                      "cluster; without it the job runs in an empty directory.")
    if "argv ['two words']" not in logs:
        raise _Failed(f"the job saw other arguments: {logs.strip()[:120]}",
                      "The entrypoint is ONE shell string: shlex.join(argv) quotes each "
                      "argument ('two words' stays one).")
    if "PROBE 42" not in logs:
        raise _Failed("the job did not see PROBE=42.",
                      "runtime_env={'working_dir': ..., 'env_vars': env_vars}.")


class _RecordedJobs:
    """A stand-in for `LocalCluster.jobs`: records what is submitted, followed and waited for."""

    def __init__(self):
        self.calls: list[tuple] = []

    def submit(self, entrypoint, working_dir=None, env_vars=None, **options):
        self.calls.append(("submit", entrypoint, working_dir, dict(env_vars or {})))
        return "raysubmit_probe"

    def follow(self, job_id, timeout_s=600.0, **options):
        self.calls.append(("follow", job_id))
        yield from ("probe log line 1", "probe log line 2")

    def wait(self, job_id, timeout_s=300.0, **options):
        self.calls.append(("wait", job_id))
        return "SUCCEEDED"


@checker(8, "launch", "your entrypoint, submitted with the repository and this kernel's "
         "COURSE_QUICK, its log printed as it came and followed to the end.")
def check_launch(launch):
    """launch(jobs, algo, env_id, num_workers, stop, results_dir) must submit the command line
    of `job_entrypoint` plus --checkpoint-at-end and --results-dir, with the repository as the
    working directory and the kernel's COURSE_QUICK as it is when launch runs (the check runs
    it with COURSE_QUICK=1, then 0), print the job's log lines, wait for it and return its
    final status."""
    import contextlib
    import io
    import os

    for mode in ("1", "0"):
        jobs, printed = _RecordedJobs(), io.StringIO()
        before = os.environ.get("COURSE_QUICK")
        os.environ["COURSE_QUICK"] = mode
        try:
            with contextlib.redirect_stdout(printed):
                status = launch(jobs, "apex", "CartPole-v1", 2,
                                {"eval_return": 475, "time_s": 60}, "/tmp/probe-results")
        finally:
            if before is None:
                os.environ.pop("COURSE_QUICK", None)
            else:
                os.environ["COURSE_QUICK"] = before
        _check_launched(jobs, status, mode, printed.getvalue())


def _check_launched(jobs: _RecordedJobs, status, mode: str, printed: str) -> None:
    """What one call of the attendee's launch did, with COURSE_QUICK=`mode` in the kernel."""
    from pathlib import Path

    from course_lib import cli
    from course_lib.workspace import REPO

    kinds = [call[0] for call in jobs.calls]
    if kinds.count("submit") != 1:
        raise _Failed(f"it submitted {kinds.count('submit')} jobs, expected one.",
                      "Call jobs.submit(argv, working_dir=..., env_vars=...) once.")
    _, argv, working_dir, env_vars = jobs.calls[kinds.index("submit")]
    try:
        args = cli.build_parser().parse_args(list(argv)[3:])
    except (cli.UsageError, SystemExit, TypeError) as err:
        raise _Failed(f"the command line refuses its argv: {err}",
                      "Start from your job_entrypoint(algo, env_id, num_workers, stop).") from None
    if (args.algo, args.env, args.num_workers) != ("apex", "CartPole-v1", 2):
        raise _Failed("the job would train something else than it was asked to.",
                      "Pass algo, env_id, num_workers and stop on to job_entrypoint.")
    if str(args.results_dir) != "/tmp/probe-results" or not args.checkpoint_at_end:
        raise _Failed("its argv lacks --results-dir <results_dir> or --checkpoint-at-end: the "
                      "run would leave nothing in the folder the notebook reads.",
                      "Append ['--checkpoint-at-end', '--results-dir', str(results_dir)].")
    if working_dir is None or Path(working_dir).resolve() != REPO.resolve():
        raise _Failed(f"it shipped working_dir={working_dir!r}: the job would not find "
                      "course_lib on the cluster.", "working_dir=REPO.")
    if env_vars.get("COURSE_QUICK") != mode:
        kernel, job = ("quick", "full") if mode == "1" else ("full", "quick")
        raise _Failed(f"with COURSE_QUICK={mode} in this kernel the job got COURSE_QUICK="
                      f"{env_vars.get('COURSE_QUICK')!r}: a {kernel}-mode notebook would "
                      f"start a {job}-mode job.",
                      "env_vars={'COURSE_QUICK': os.environ.get('COURSE_QUICK', '0')}, read "
                      "when launch runs.")
    if ("follow", "raysubmit_probe") not in jobs.calls or ("wait", "raysubmit_probe") not in \
            jobs.calls:
        raise _Failed("it did not follow the job's log and wait for its end.",
                      "for line in jobs.follow(job_id): print(line); then jobs.wait(job_id).")
    if "probe log line 2" not in printed:
        raise _Failed("it did not print the job's log lines as they came.",
                      "for line in jobs.follow(job_id, ...): print(line)")
    if status != "SUCCEEDED":
        raise _Failed(f"it returned {status!r}, not the job's final status.",
                      "Return what jobs.wait(job_id, ...) returns.")


@checker(8, "route_targets", "each target lands in the shard whose range holds it; your "
         "shards draw what one buffer draws (chi-squared test below).")
def check_route_targets(route_targets):
    """route_targets(targets, totals) -> (shard of each target, its local target): target t
    goes to the shard k whose range [C_k, C_k + S_k) of the concatenated prefix sums holds it,
    as t - C_k. Checked by hand on three shards (one empty), then by what real shards draw
    through it: a chi-squared test against one buffer (`teaching.shards`)."""
    import numpy as np

    from course_lib.teaching import shards

    totals = np.array([2.0, 0.0, 3.0])
    targets = np.array([4.5, 0.5, 2.0, 1.999])            # not sorted: a batch's order is kept
    got = route_targets(targets, totals)
    if not (isinstance(got, tuple) and len(got) == 2):
        raise _Failed(f"it returned {type(got).__name__}, expected a pair (shard, local).",
                      "return shard, local: two arrays, one entry per target.")
    shard, local = (np.asarray(a) for a in got)
    if shard.shape != targets.shape or local.shape != targets.shape:
        raise _Failed(f"for 4 targets it returned arrays of shapes {shard.shape} and "
                      f"{local.shape}.", "One shard and one local target per target.")
    if (shard == 1).any():
        raise _Failed("it sent a target to shard 1, whose total priority is 0: an empty "
                      "shard has an empty range and holds no target.",
                      "Ranges from the running sum of the totals: [0, 2), [2, 2), [2, 5).")
    if shard[2] != 2:
        raise _Failed(f"target 2.0 went to shard {shard[2]}; it is where shard 2's range "
                      "[2, 5) starts (a range holds its start, not its end).",
                      "np.searchsorted(ends, targets, side='right') with ends = "
                      "np.cumsum(totals).")
    require_close(shard, [2, 0, 2, 0], f"targets [4.5, 0.5, 2.0, 1.999] over totals [2, 0, 3] "
                  f"went to shards {shard.tolist()}, expected [2, 0, 2, 0], in the targets' order.",
                  "Shard k holds [C_k, C_k + S_k), C_k the sum of the totals before it.")
    require_close(local, [2.5, 0.5, 0.0, 1.999], f"the local targets are {local.tolist()}, "
                  "expected [2.5, 0.5, 0.0, 1.999]: each shard descends its own tree, whose "
                  "prefix sums start at 0.", "local = targets - starts[shard], starts[k] = C_k.")
    setup = shards.skewed_shards()
    test = shards.chi_squared(shards.routed_items(route_targets, setup, 100_000), setup.one)
    if test.pvalue < 1e-3:
        raise _Failed(f"real shards routed by it draw items unlike one buffer: chi2 = "
                      f"{test.statistic:,.0f} on {test.dof} degrees of freedom, p = "
                      f"{test.pvalue:.2g}.",
                      "Route by the shards' totals S_k, not by their sizes or in equal parts.")
