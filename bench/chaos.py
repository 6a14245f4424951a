"""Faults survived, measured: Ape-X on CartPole-v1 and SAC on Pendulum-v1 reach their goals while
their actors are killed, and a run whose learner is killed continues from its checkpoint.

    python -m bench.chaos [--quick] [--seeds 0 1 2] [--json bench/results/chaos.json]

For each task and seed, two runs one after the other in one Ray instance: the seed unkilled (the
reference), then the same seed under chaos: a thread of the driver kills actors as a crash would
(`ray.kill(handle, no_restart=False)`), the parameter server 2 s after the actors are up, the
evaluator at 4 s, and a random worker that is up at 6 s and every 10 s after, until the run
ends. Each run has the config and budget of bench/apex.py (apex-4) or bench/sac.py (Pendulum),
room for every kill a worker may get (`max_worker_restarts`), and a checkpoint at the end, which
is scored as bench/goal_holds.py scores it (20 fresh episodes through `python -m course_lib
evaluate`; holds: within 5% of the goal).

Per run: the kills; the restarts (Ray's own count in its actor table, of each killed actor, seen
before the run closed its actors); the transitions lost, as far as the driver can count them:
env steps booked minus transitions the replay stored, chaos run minus unkilled run (the unkilled
gap is the n-step windows still open at the end). A crash throws away the worker's outbox (at
most `send_every` transitions) and n-step windows, and the chunk under way is played again;
that chunk's transitions that reached the replay before the crash stay there, so the count can
be lower than what the crash threw away. And the seconds to the goal against the unkilled run.

The learner: `python -m course_lib train --algo apex --checkpoint-freq 1 ...` (in this process,
so that the chaos can reach its actors) with its learner killed after its first checkpoint (a
run can reach the goal before a later one: seed 0 did, before its third, at 4e434a3); the one
line it ends with, then the `--restore` command that line names, run as printed in a shell: it
must reach the goal and its checkpoint hold it.

Targets: every chaos run reached its goal and its checkpoint held it; the killed learner's run
ended in one line naming the learner, its checkpoint and a command that reached the goal with
a checkpoint that held it. `--quick`: one seed, the quick budgets of bench/apex.py and
bench/sac.py (no goal): checks that the script works, measures nothing.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import ray

from bench import apex as apex_bench, sac as sac_bench
from bench.benchlib import Recording, parser, private_ray_tmp, seeds_of
from bench.goal_holds import GOALS, checkpoint_score, within
from course_lib import cli, init_ray
from course_lib.apex import ApexTrainer
from course_lib.runs import Run, list_checkpoints
from course_lib.sac import SACTrainer
from course_lib.trainer import run_training

#: (seconds after the actors are up, actor) killed once each; then a worker every WORKER_EVERY_S
ONCE = [(2.0, "parameter server"), (4.0, "evaluator")]
FIRST_WORKER_S, WORKER_EVERY_S = 6.0, 10.0
ROOM = {"max_worker_restarts": 20}        # restarts a worker may have: more than it gets


def trainer_and_config(task: str, seed: int, quick: bool):
    """The trainer class and config bench/apex.py (apex-4) or bench/sac.py run for `task`."""
    if task == "apex:CartPole-v1":
        return ApexTrainer, apex_bench.config("apex-4", seed, quick).updated(ROOM)
    overrides = {**(sac_bench.QUICK if quick else {}), **ROOM}
    return SACTrainer, sac_bench.config("Pendulum-v1", seed, 2, overrides)


class Chaos(threading.Thread):
    """Kills a running trainer's actors on the schedule above until `stop()`; each kill is
    recorded with when Ray's actor table showed the actor back (None: not before the stop)."""

    def __init__(self, trainer, seed: int):
        super().__init__(daemon=True)
        self.trainer, self.rng = trainer, random.Random(seed)
        self.kills: list[dict] = []
        self.lock, self.stopped = threading.Lock(), threading.Event()

    def run(self) -> None:
        start, once, next_worker = time.monotonic(), list(ONCE), FIRST_WORKER_S
        while not self.stopped.wait(0.2):
            with self.lock:
                now, table = time.monotonic() - start, self.trainer.actors.table()
                for kill in self.kills:
                    actor = table.get(kill["actor"], {})
                    if kill["back_s"] is None and actor.get("restarts", 0) > kill["restarts"] \
                            and actor["state"] == "ALIVE":
                        kill["back_s"] = round(now - kill["at_s"], 1)
                if once and now >= once[0][0]:
                    self.kill(once.pop(0)[1], now, table)
                if now >= next_worker:
                    up = [name for name, a in table.items() if a["state"] == "ALIVE"
                          and name.startswith(self.trainer.worker_name)]
                    if up:
                        self.kill(self.rng.choice(sorted(up)), now, table)
                    next_worker += WORKER_EVERY_S

    def kill(self, actor: str, now: float, table: dict[str, dict]) -> None:
        ray.kill(ray.get_actor(self.trainer.actors.ray_name(actor)), no_restart=False)
        self.kills.append({"actor": actor, "at_s": round(now, 1), "back_s": None,
                           "restarts": table[actor]["restarts"]})

    def stop(self) -> None:
        with self.lock:
            self.stopped.set()


def run_once(task: str, seed: int, quick: bool, chaos: bool, folder: Path) -> dict:
    """One run of `task` (under chaos or not) to its goal or budget, with a checkpoint at the
    end; under chaos, the checkpoint scored on fresh episodes."""
    trainer_class, cfg = trainer_and_config(task, seed, quick)
    trainer = trainer_class(cfg)
    killer = Chaos(trainer, seed)
    if chaos:
        close = trainer.close
        trainer.close = lambda: (killer.stop(), close())   # no kill once the run closes
        killer.start()
    run = Run.create(folder, trainer.algo, cfg.env_id, {"config": cfg.to_dict()},
                     checkpoint_at_end=True)
    try:
        result = run_training(trainer, cfg, run=run)
    finally:
        run.close()
    last, c = result.last, trainer.counters
    out = {"task": task, "seed": seed, "chaos": chaos, "reached": result.reached and not quick,
           "stopped_by": result.stopped_by, "seconds": round(last["wall_s"], 1),
           "env_steps": c.env_steps, "stored": trainer.landed, "gap": c.env_steps - trainer.landed,
           "worker_restarts": c.worker_restarts, "kills": killer.kills}
    if chaos:
        out["checkpoint_score"], _ = checkpoint_score(run.path, f"{task} seed {seed}")
        out["holds"] = (not quick) and within(out["checkpoint_score"], GOALS[task])
    return out


# ---------------------------------------------------------------------------------------------
# The learner: killed, one line, and the command it names
# ---------------------------------------------------------------------------------------------

def kill_the_learner(results: Path, checkpoints: int, ended: threading.Event,
                     killed: threading.Event | None = None) -> None:
    """Kill the running learner (as a crash would) once its run under `results` has written
    `checkpoints` checkpoints (its actor is named "<run>:learner"), unless the run `ended`;
    then set `killed`."""
    while not ended.wait(0.1):
        learner = [n for n in ray.util.list_named_actors() if n.endswith(":learner")]
        if learner and len(list(results.glob("*/checkpoints/checkpoint_??????"))) >= checkpoints:
            ray.kill(ray.get_actor(learner[0]), no_restart=False)
            if killed is not None:
                killed.set()
            return


def run_as_printed(command: str, cwd: Path) -> subprocess.CompletedProcess:
    """`command` in a shell, as a user would type it, with this Python's `python` first on
    the PATH (the venv's, as in an activated venv)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(command, shell=True, cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=1_800)


def learner_case(seed: int, quick: bool, folder: Path) -> dict:
    """Ape-X through the command line, its learner killed; then the command its line names."""
    results = folder / "learner"
    stop = ({"eval_return": None, "env_steps": 4_000, "time_s": None} if quick
            else {"eval_return": GOALS["apex:CartPole-v1"], "time_s": 900})
    argv = ["train", "--algo", "apex", "--env", "CartPole-v1", "--quiet", "--checkpoint-freq",
            "1", "--stop", json.dumps(stop), "--config", json.dumps({"seed": seed}),
            "--results-dir", str(results)]
    ended, killed = threading.Event(), threading.Event()
    threading.Thread(target=kill_the_learner, args=(results, 1, ended, killed)).start()
    err = io.StringIO()
    os.environ["COURSE_QUICK"] = "1" if quick else "0"        # the CLI's preset
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = cli.main(argv)
    finally:
        ended.set()
    line = err.getvalue().strip()
    found = re.search(r"continue with: (.+); results so far in ", line)
    out = {"argv": argv, "exit": code, "killed": killed.is_set(), "line": line,
           "one_line": "\n" not in line,
           "names_learner": line.startswith("error: the learner died: "),
           "command": found and found[1], "reached": False, "holds": False}
    if found:
        first = set(results.iterdir())
        done = run_as_printed(found[1], folder)
        new = sorted(set(results.iterdir()) - first)
        said = done.stdout.strip().splitlines() or done.stderr.strip().splitlines() or [""]
        out.update(exit_continued=done.returncode, summary=said[-1])
        if not new:
            return out
        continued = new[0]
        rows = [json.loads(x) for x in (continued / "result.json").read_text().splitlines()]
        out.update(env_steps=rows[-1]["env_steps"], time_s=round(rows[-1]["time_s"], 1),
                   reached=done.returncode == 0 and not quick)
        if list_checkpoints(continued):
            out["checkpoint_score"], _ = checkpoint_score(continued, "the continued run")
            out["holds"] = (not quick) and within(out["checkpoint_score"],
                                                  GOALS["apex:CartPole-v1"])
    return out


# ---------------------------------------------------------------------------------------------
# The whole benchmark
# ---------------------------------------------------------------------------------------------

def summarise(runs: list[dict]) -> list[dict]:
    """Per task and seed: the chaos run against the unkilled one."""
    rows = []
    for chaos in (r for r in runs if r["chaos"]):
        calm = next(r for r in runs if not r["chaos"] and r["task"] == chaos["task"]
                    and r["seed"] == chaos["seed"])
        workers = sum(k["actor"] not in dict(ONCE).values() for k in chaos["kills"])
        rows.append({"task": chaos["task"], "seed": chaos["seed"], "reached": chaos["reached"],
                     "holds": chaos["holds"], "score": chaos["checkpoint_score"],
                     "kills": len(chaos["kills"]), "worker_kills": workers,
                     "restarts": sum(k["back_s"] is not None for k in chaos["kills"]),
                     "lost": chaos["gap"] - calm["gap"], "seconds_unkilled": calm["seconds"],
                     "seconds": chaos["seconds"],
                     "ratio": round(chaos["seconds"] / calm["seconds"], 2)})
    return rows


def check_targets(rows: list[dict], learner: dict) -> dict:
    held = sum(r["reached"] and r["holds"] for r in rows)
    line = learner["one_line"] and learner["names_learner"] and bool(learner["command"])
    return {"chaos runs reached the goal, checkpoint held": {
                "value": f"{held}/{len(rows)}", "target": f"{len(rows)}/{len(rows)}",
                "met": held == len(rows)},
            "killed learner: one line, its command reached the goal, checkpoint held": {
                "value": "yes" if line and learner["reached"] and learner["holds"] else "no",
                "target": "yes", "met": line and learner["reached"] and learner["holds"]}}


def section(r: dict) -> str:
    """bench/RESULTS.md's block: the chaos table, then the learner's line and its command."""
    from bench.benchreport import table

    learner = r["learner"]
    parts = [f"Chaos: the parameter server at {ONCE[0][0]:g} s, the evaluator at "
             f"{ONCE[1][0]:g} s, a random worker at {FIRST_WORKER_S:g} s and every "
             f"{WORKER_EVERY_S:g} s after; seconds to the goal against the same seed unkilled.",
             table(r["summary"], [
                 ("task", "task"), ("seed", "seed"), ("reached", "reached"),
                 ("checkpoint, 20 fresh episodes", "score"), ("holds", "holds"),
                 ("kills", "kills"), ("of workers", "worker_kills"), ("restarts", "restarts"),
                 ("transitions lost", "lost"),
                 ("s unkilled", "seconds_unkilled"), ("s", "seconds"), ("s / unkilled", "ratio")]),
             "The learner killed after its first checkpoint, the one line the run ended with:",
             f"```\n{learner['line']}\n```"]
    if not learner.get("killed", True):
        parts[-2:] = [f"The run ended (exit {learner['exit']}) before its learner was killed: "
                      "nothing was tested."]
    if learner.get("command"):
        parts.append(f"The command it names, run as printed: exit {learner['exit_continued']}, "
                     f"{learner['summary']}" + (f"; its checkpoint on 20 fresh episodes: "
                     f"{learner['checkpoint_score']:.1f}" if "checkpoint_score" in learner
                     else ""))
    return "\n\n".join(parts)


def run(seeds, quick: bool, log=print) -> dict:
    runs = []
    with private_ray_tmp(), tempfile.TemporaryDirectory() as tmp:
        try:
            init_ray(num_cpus=os.cpu_count())
            for task in ("apex:CartPole-v1", "sac:Pendulum-v1"):
                for seed in seeds:
                    for chaos in (False, True):
                        runs.append(run_once(task, seed, quick, chaos, Path(tmp)))
                        r = runs[-1]
                        log(f"{task} seed {seed} {'chaos  ' if chaos else 'unkilled'}: "
                            f"{r['stopped_by']} at {r['env_steps']:,} env steps, "
                            f"{r['seconds']:.1f} s; {len(r['kills'])} kills, "
                            f"{sum(k['back_s'] is not None for k in r['kills'])} back"
                            + (f"; checkpoint {r['checkpoint_score']:.1f}" if chaos else ""),
                            flush=True)
            learner = learner_case(seeds[0], quick, Path(tmp))
            log(f"learner: {learner['line']}\ncontinued: {learner.get('summary')}", flush=True)
        finally:
            ray.shutdown()
    rows = summarise(runs)
    return {"config": {"quick": quick, "seeds": list(seeds), "once": ONCE,
                       "first_worker_s": FIRST_WORKER_S, "worker_every_s": WORKER_EVERY_S,
                       **ROOM},
            "runs": runs, "summary": rows, "learner": learner,
            "targets": {} if quick else check_targets(rows, learner)}


def main() -> None:
    args = parser(__doc__, "chaos", "one seed, quick budgets, no goal", seeds=True).parse_args()
    recording = Recording()
    result = run(seeds_of(args), args.quick)
    print(section(result))
    recording.write(result, args.json)


if __name__ == "__main__":
    main()
