"""Does the checkpoint hold the goal? Train through the command line until the goal, then score
what was saved on 20 fresh episodes with `evaluate`, exactly as a user would.

    python -m bench.goal_holds [--tasks apex:CartPole-v1 ...] [--seeds 0 1 2] [--quick]

For each task and seed:

    python -m course_lib train --algo A --env E --stop '{"eval_return": GOAL}' --checkpoint-at-end
    python -m course_lib evaluate RUN --episodes 20 --seed 1000

A goal counts only if the saved weights score within 5% of it on those fresh episodes
(seeds 1000-1019 are never used in training: training evaluations draw their own seeds).
Writes bench/results/goal_holds.json (targets: per task, every seed reached the goal and its
checkpoint held it); `--quick`: one seed, a 2,000-step budget, no goal.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.benchlib import Recording, Stopwatch, parser, private_ray_tmp

#: algo:env -> the goal (mean return) its run stops at
GOALS = {"apex:CartPole-v1": 475.0, "apex:Acrobot-v1": -100.0, "sac:Pendulum-v1": -200.0}
TOLERANCE = 0.05            # "within 5% of the goal"
ROOT = Path(__file__).resolve().parents[1]


def within(score: float, goal: float) -> bool:
    """`score` is no worse than the goal by more than 5% of its size."""
    return score >= goal - TOLERANCE * abs(goal)


def run_cli(*args: str, timeout_s: float = 1_200) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "course_lib", *args], capture_output=True,
                          text=True, timeout=timeout_s, cwd=ROOT,
                          env={**os.environ, "COURSE_QUICK": "0"})


def checkpoint_score(run_dir, what: str) -> tuple[float, str]:
    """The mean return of the newest checkpoint in `run_dir` on 20 fresh episodes, through
    `evaluate` as a user would, and the line it printed."""
    evaluation = run_cli("evaluate", str(run_dir), "--episodes", "20", "--seed", "1000")
    if evaluation.returncode != 0:
        raise RuntimeError(f"{what}: evaluate failed: {evaluation.stderr[-500:]}")
    score = float(re.search(r"mean return (\S+)", evaluation.stdout).group(1))
    return score, evaluation.stdout.strip()


def one(task: str, seed: int, results_dir: Path, quick: bool) -> dict:
    algo, env_id = task.split(":")
    goal = GOALS[task]
    stop = ({"eval_return": None, "env_steps": 2_000} if quick
            else {"eval_return": goal, "time_s": 900})
    clock = Stopwatch()
    train = run_cli("train", "--algo", algo, "--env", env_id, "--quiet", "--checkpoint-at-end",
                    "--stop", json.dumps(stop), "--config", json.dumps({"seed": seed}),
                    "--results-dir", str(results_dir / f"{algo}-{env_id}-{seed}"))
    seconds = clock.seconds
    if train.returncode not in (0, 1):
        raise RuntimeError(f"{task} seed {seed}: train failed: {train.stderr.strip()[-500:]}")
    summary = train.stdout.strip().splitlines()[-1] if train.stdout.strip() else ""
    # "...; results in DIR; checkpoint PATH" (stdout), or "...; results so far in DIR" (stderr)
    found = re.search(r"results (?:so far )?in (\S+?)(?:;|$)", train.stdout + train.stderr,
                      re.MULTILINE)
    if found is None:
        raise RuntimeError(f"{task} seed {seed}: train printed no results folder (exit "
                           f"{train.returncode}): {(train.stdout + train.stderr)[-500:]}")
    run_dir = found.group(1)
    score, evaluated = checkpoint_score(run_dir, f"{task} seed {seed}")
    rows = [json.loads(line) for line in (Path(run_dir) / "result.json").read_text().splitlines()]
    last = rows[-1]
    return {"task": task, "seed": seed, "goal": goal, "reached": train.returncode == 0,
            "env_steps": last["env_steps"], "time_s": round(last["time_s"], 1),
            "wall_s": round(last["wall_s"], 1), "process_s": round(seconds, 1),
            "train_eval_return": round(last["eval_return"], 1),
            "train_eval_episodes": last["eval_episodes"], "checkpoint_score": score,
            "holds": (not quick) and within(score, goal),
            "train_summary": summary, "evaluate": evaluated}


def check_targets(runs: list[dict]) -> dict:
    """Per task: the goal was reached and the checkpoint held it on every seed."""
    targets = {}
    for task in dict.fromkeys(r["task"] for r in runs):
        mine = [r for r in runs if r["task"] == task]
        held = sum(r["reached"] and r["holds"] for r in mine)
        targets[f"{task} checkpoint holds the goal"] = {
            "value": f"{held}/{len(mine)} seeds", "target": f"{len(mine)}/{len(mine)} seeds",
            "met": held == len(mine)}
    return targets


def main() -> None:
    cli = parser(__doc__, "goal_holds", "one seed, tiny budgets: checks the script works")
    cli.add_argument("--tasks", nargs="+", default=list(GOALS), choices=list(GOALS))
    cli.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    args = cli.parse_args()
    seeds = args.seeds[:1] if args.quick else args.seeds
    recording = Recording()
    runs = []
    with private_ray_tmp(), tempfile.TemporaryDirectory() as tmp:
        for task in args.tasks:
            for seed in seeds:
                run = one(task, seed, Path(tmp), args.quick)
                runs.append(run)
                print(f"{task:<18} seed {seed}: stopped at {run['env_steps']:>7,} env steps, "
                      f"{run['wall_s']:6.1f} s, training scored {run['train_eval_return']:7.1f} "
                      f"({run['train_eval_episodes']} episodes); checkpoint on 20 fresh "
                      f"episodes {run['checkpoint_score']:7.1f}: "
                      f"{'holds' if run['holds'] else 'DOES NOT HOLD'}", flush=True)
    recording.write({"config": {"quick": args.quick, "tasks": args.tasks, "seeds": seeds},
                     "runs": runs, "targets": {} if args.quick else check_targets(runs)},
                    args.json)


if __name__ == "__main__":
    main()
