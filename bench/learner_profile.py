"""Where the Ape-X learner actor's time goes, measured inside a running system.

    python -m bench.learner_profile [--seconds 20] [--explorers 4] [--pin] [--config JSON]

Used by `bench/overhead.py` to explain its learner ratio. Two measurements of the learner's
main thread (the one that runs `train`) over one window, without touching course_lib:

- **the scheduler's view** (`/proc/<pid>/task/<tid>/schedstat`, Linux): the share of the
  window it ran on a core, waited for a core (runnable, another process had it), or slept
  (blocked: waiting for work from the driver, or for the replay buffer's lock);
- **the update's own clock**: `DQNLearner.update` wrapped inside the actor, its wall time and
  the thread's CPU time per call (against a bare loop's, this says whether an update is slower
  in the system because it waits for a core or because it runs slower on one);
- **py-spy's view** (`py-spy record --idle`, which comes with `ray[default]`): the share of
  its stack samples in `DQNLearner.update`, in sampling its own replay buffer, in writing
  priorities back, in Ray calls (publishing weights), and between tasks;

and, for the whole machine over the same window, the cores each role used (`/proc/*/stat`):
learner, explorers, evaluator, driver, Ray's own processes.

Its reference without Ray, the bare update loop while another process does an explorer's work,
is `overhead.bare_learner_beside_explorer`.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import ray

from bench.benchlib import private_ray_tmp
from bench.pyspy import Part, read_stacks, shares
from course_lib.apex import ApexConfig, ApexTrainer
from course_lib.distributed.run_actors import check_pinning

#: the learner's training thread in parts, the first that holds a stack wins (`pyspy.shares`)
PARTS = (Part("update (torch)", (r"DQNLearner\.update|timed \(",)),   # timed: time_updates
         Part("sampling its replay buffer", (r"draw_batches \(",)),
         Part("priorities written back", ("after_update",)),
         Part("publishing weights", ("publish",)),
         Part("Ray calls", (r"\.remote \(",)),
         Part("snapshot for the evaluator", ("snapshot",)),
         Part("train: the rest", (r"LearnerActor\.train",)))
TRAIN = Part("train", (r"LearnerActor\.train",))


def train_thread_split(raw: str) -> dict[str, float]:
    """Share of the samples of the thread that runs `train` per part, from py-spy's
    `--threads --format raw` output. Ray runs a threaded actor's calls on a thread per
    concurrency group; the one seen in `train` most often is the learner's (the other one
    stores workers' adds)."""
    by_thread: dict[str, list] = collections.defaultdict(list)
    for frames, n in read_stacks(raw):
        thread = next((f for f in frames if f.startswith("thread ")), None)
        if thread:
            by_thread[thread].append((frames, n))
    if not by_thread:
        return {}
    train = max(by_thread, key=lambda t: sum(n for frames, n in by_thread[t]
                                             if TRAIN.holds(frames)))
    return shares(by_thread[train], PARTS, rest="between tasks (idle)")


def schedstat(pid: int, tid: int) -> tuple[float, float]:
    """(seconds on a core, seconds waiting for a core) of thread `tid` of process `pid`."""
    with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
        on_cpu, waiting, _ = (int(x) for x in f.read().split())
    return on_cpu / 1e9, waiting / 1e9


#: process command line -> role, the first match wins
ROLES = (("ray::ApexLearnerActor", "learner"), ("ray::Explorer", "explorers"),
         ("ray::ReplayStore", "replay actor"), ("ray::Evaluator", "evaluator"),
         ("ray::ParameterStoreActor", "parameter server"), ("py-spy", "py-spy (this profile)"),
         ("ray::IDLE", "Ray: idle workers"), ("raylet", "Ray: raylet, GCS, dashboard, agents"),
         ("gcs_server", "Ray: raylet, GCS, dashboard, agents"),
         ("ray", "Ray: raylet, GCS, dashboard, agents"))


def cpu_seconds() -> dict[int, tuple[str, float]]:
    """{pid: (command line, CPU seconds so far)} of every process (Linux /proc)."""
    tick, out = os.sysconf("SC_CLK_TCK"), {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:                            # gone meanwhile
            continue
        out[int(entry)] = (cmd, (int(fields[11]) + int(fields[12])) / tick)  # utime + stime
    return out


def cores_by_role(before: dict, after: dict, wall: float) -> dict[str, float]:
    """Cores used per role between two `cpu_seconds()` readings `wall` seconds apart (this
    process: the driver)."""
    used: collections.Counter = collections.Counter()
    for pid, (cmd, cpu) in after.items():
        if pid == os.getpid():
            role = "driver"
        else:
            role = next((r for word, r in ROLES if word in cmd), "everything else")
        used[role] += (cpu - before.get(pid, (cmd, 0.0))[1]) / wall
    return {k: round(v, 2) for k, v in used.most_common() if v >= 0.005}


def time_updates(actor) -> None:
    """Run inside the learner actor (`__ray_call__`): wrap its learner's `update` so that each
    call's wall time and this thread's CPU time during it are summed in `actor.update_times`."""
    inner = actor.learner.update
    actor.update_times = {"calls": 0, "wall_s": 0.0, "cpu_s": 0.0}

    def timed(batch):
        wall, cpu = time.perf_counter(), time.thread_time()
        info = inner(batch)
        t = actor.update_times
        t["calls"] += 1
        t["wall_s"] += time.perf_counter() - wall
        t["cpu_s"] += time.thread_time() - cpu
        return info

    actor.learner.update = timed


def update_times(actor) -> dict:
    """The sums `time_updates` has collected so far (run inside the actor)."""
    return dict(actor.update_times)


def profile_learner(cfg: ApexConfig, warmup_s: float, seconds: float, spy: bool = True) -> dict:
    """Run Ape-X with `cfg` (Ray already started); after `warmup_s`, profile its learner for
    `seconds`. Returns the scheduler's and py-spy's split of the learner's main thread, and
    the cores each role used. `spy=False`: no py-spy (it takes some CPU itself)."""
    if __name__ != "__main__":    # bench/ is not importable in the actors: send the code
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    trainer = ApexTrainer(cfg)
    # the process, and the thread that runs `train` (`__ray_call__` runs on the same one)
    pid, tid = ray.get(trainer.learner_actor.__ray_call__.remote(
        lambda self: (os.getpid(), threading.get_native_id())))
    out: dict = {"explorers": cfg.num_workers}
    # beside this Python first: a venv's scripts are not on the PATH unless it is activated
    spy = spy and shutil.which("py-spy", path=os.pathsep.join([os.path.dirname(sys.executable),
                                                              os.environ.get("PATH", "")]))
    raw = tempfile.NamedTemporaryFile(suffix=".txt", delete=False).name
    try:
        start = time.perf_counter()
        while time.perf_counter() - start < warmup_s:
            trainer.step()
        spying = spy and subprocess.Popen(
            [spy, "record", "--idle", "--threads", "--nonblocking", "--format", "raw",
             "--rate", "50", "--duration", str(int(seconds)), "--pid", str(pid), "--output", raw],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            cpu0, wait0 = schedstat(pid, tid)
            processes = cpu_seconds()
        except OSError:                            # not Linux
            cpu0 = wait0 = None
        ray.get(trainer.learner_actor.__ray_call__.remote(time_updates))
        t0, updates0 = time.perf_counter(), trainer.counters.learner_updates
        while time.perf_counter() - t0 < seconds:
            trainer.step()
        wall = time.perf_counter() - t0
        out["updates_s"] = round((trainer.counters.learner_updates - updates0) / wall, 1)
        timed = ray.get(trainer.learner_actor.__ray_call__.remote(update_times))
        if timed["calls"]:
            out["one_update_ms"] = {"wall": round(timed["wall_s"] / timed["calls"] * 1e3, 3),
                                    "cpu": round(timed["cpu_s"] / timed["calls"] * 1e3, 3)}
        if cpu0 is not None:
            cpu1, wait1 = schedstat(pid, tid)
            on, waiting = (cpu1 - cpu0) / wall, (wait1 - wait0) / wall
            out["scheduler"] = {"on_a_core": round(on, 3), "waiting_for_a_core": round(waiting, 3),
                                "sleeping": round(max(0.0, 1 - on - waiting), 3)}
            out["cores_by_role"] = cores_by_role(processes, cpu_seconds(), wall)
        if not spying:
            out["py_spy"] = "not measured: py-spy is not installed, or not asked for"
        else:
            _, err = spying.communicate(timeout=seconds + 30)
            split = train_thread_split(open(raw).read()) if spying.returncode == 0 else {}
            out["py_spy"] = split or f"not measured: {(err or 'no samples').strip()[-200:]}"
    finally:
        trainer.close()
        os.unlink(raw)
    return out


def main() -> None:
    from course_lib import init_ray

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="the profiled window")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds before it")
    parser.add_argument("--explorers", type=int, default=4, help="explorer actors")
    parser.add_argument("--pin", action="store_true",
                        help="pin_learner: the learner alone on the last CPU, the workers on "
                             "the rest")
    parser.add_argument("--no-py-spy", action="store_true", help="without py-spy's view")
    parser.add_argument("--config", default="{}",
                        help='ApexConfig changes as JSON, e.g. \'{"num_envs": 4}\'')
    args = parser.parse_args()
    try:
        cfg = ApexConfig().updated({"target_return": None, "max_env_steps": None,
                                    "max_time_s": None, "num_workers": args.explorers,
                                    "pin_learner": args.pin, **json.loads(args.config)})
        cfg.check()
        check_pinning(cfg, nodes=1)
    except ValueError as err:                      # json.JSONDecodeError is one too
        parser.error(str(err))
    with private_ray_tmp():
        try:
            init_ray(num_cpus=os.cpu_count())
            out = profile_learner(cfg, args.warmup, args.seconds, spy=not args.no_py_spy)
        finally:
            ray.shutdown()
    print(f"learner: {out['updates_s']:,.0f} updates/s with {args.explorers} explorers")
    if "one_update_ms" in out:
        print(f"one update: {out['one_update_ms']['wall']:.2f} ms wall, "
              f"{out['one_update_ms']['cpu']:.2f} ms CPU")
    for view in ("scheduler", "py_spy", "cores_by_role"):
        split = out.get(view)
        print(f"{view}: " + (", ".join(f"{k} {v:.0%}" for k, v in split.items())
                             if isinstance(split, dict) else str(split)))


if __name__ == "__main__":
    main()
