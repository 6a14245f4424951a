"""Benchmark course_lib against RLlib on the same machine in the same run: time to the goal.

    python -m bench.rllib [--quick] [--seeds 0] [--json bench/results/rllib.json]

| task        | course_lib              | RLlib (new API stack) | goal | budget (each)     |
| ----------- | ----------------------- | --------------------- | ---- | ----------------- |
| CartPole-v1 | Ape-X, 4 explorers      | DQN (tuned example)   | 475  | 200K steps, 900 s |
| Pendulum-v1 | parallel SAC, 2 workers | SAC (tuned example)   | -200 | 30K steps, 900 s  |

Both sides are evaluated the same way (`course_lib.teaching.rllib_compare`): course_lib's
`evaluate_policy` plays 10 fresh-seeded greedy (DQN) / deterministic (SAC) episodes, and 20
more of the same weights when the 10 meet the goal (`trainer.evaluation_request`); one
evaluation per `eval_every_s` seconds of training, RLlib's set to its course_lib contender's.
Evaluation is outside both clocks: RLlib's clock pauses while it is evaluated, course_lib's
rows carry the time their snapshot was taken (its evaluator actor plays beside the training).
Both sides run one after the other in one private Ray instance; seconds count from the
trainer's creation (actors and RLlib's algorithm built inside the clock, Ray start-up not).
"time ratio" = course_lib seconds / RLlib seconds to the goal. When RLlib misses the goal
within its budget the ratio is an upper bound (course_lib seconds / RLlib seconds spent) and
the table says so.

Targets (issue 7): each ratio <= 0.5 (course_lib at most half of RLlib's time).
`--quick`: tiny budgets, no goal: checks that the script works, measures nothing.
"""

from __future__ import annotations

import os
import statistics

import ray

from bench.benchlib import Recording, parser, private_ray_tmp
from course_lib import init_ray
from course_lib.apex import ApexConfig, ApexTrainer
from course_lib.sac import SACConfig, SACTrainer
from course_lib.teaching.rllib_compare import RLlibConfig, train_rllib

TARGET_RATIO = 0.5
UPPER_BOUND_NOTE = "RLlib did not reach the goal within its budget: the ratio is an upper bound"
#: task -> goal, full budget, and the two contenders (name, config builder, train function)
TASKS = {
    "CartPole-v1": {"goal": 475.0, "max_env_steps": 200_000, "max_time_s": 900.0,
                    "ours": ("course_lib Ape-X (4 explorers)", "apex"), "rllib": "dqn"},
    "Pendulum-v1": {"goal": -200.0, "max_env_steps": 30_000, "max_time_s": 900.0,
                    "ours": ("course_lib SAC (2 workers)", "sac"), "rllib": "sac"},
}
QUICK_BUDGET = {"target_return": None, "max_env_steps": 400, "max_time_s": 60.0}


def budget(task: str, quick: bool) -> dict:
    if quick:
        return dict(QUICK_BUDGET)
    spec = TASKS[task]
    return {"target_return": spec["goal"], "max_env_steps": spec["max_env_steps"],
            "max_time_s": spec["max_time_s"]}


def contender_config(side: str, kind: str, task: str, seed: int, quick: bool):
    """(config, train function) for one side ("ours" or "rllib") of one task, with the shared
    budget. `kind` names the algorithm; the side decides whose implementation runs it (both
    sides of Pendulum-v1 are "sac")."""
    common = {**budget(task, quick), "seed": seed, "eval_episodes": 3 if quick else 10}
    if side == "rllib":     # the same evaluation cadence as the course_lib contender
        twin, _ = contender_config("ours", TASKS[task]["ours"][1], task, seed, quick)
        cfg = RLlibConfig.for_algo(kind, quick=quick, checkpoint_every=0,
                                   checkpoint_at_end=False)
        return cfg.updated({**common, "eval_every_s": twin.eval_every_s,
                            "confirm_episodes": twin.confirm_episodes}), train_rllib
    if side != "ours":
        raise ValueError(f"side must be 'ours' or 'rllib', got {side!r}")
    if kind == "apex":
        extra = {"learning_starts": 200, "num_workers": 2} if quick else {"num_workers": 4}
        return ApexConfig.preset(quick=False).updated({**common, **extra}), ApexTrainer.train
    if kind == "sac":
        extra = {"start_steps": 200, "learning_starts": 200} if quick else {}
        cfg = SACConfig.preset(quick=False)
        extra = {k: v for k, v in extra.items() if hasattr(cfg, k)}
        return cfg.updated({**common, **extra}), SACTrainer.train
    raise ValueError(f"no course_lib contender called {kind!r} (apex or sac)")


def run_once(side: str, name: str, kind: str, task: str, seed: int, quick: bool) -> dict:
    cfg, train = contender_config(side, kind, task, seed, quick)
    result = train(cfg)
    last = result.last
    reached = result.stopped_by == "eval_return"
    return {"task": task, "side": side, "name": name, "seed": seed, "reached": reached,
            # time_s: the clock when the last evaluated weights were taken, evaluation
            # excluded on both sides; wall_s: when that evaluation ended (both included)
            "stopped_by": result.stopped_by,
            "time_s": round(float(last["time_s"]), 1),
            "wall_s": round(float(last["wall_s"]), 1),
            "env_steps": int(last["env_steps"]),
            "learner_updates": int(last["learner_updates"]),
            "eval_return": round(float(last["eval_return"]), 1),
            "curve": [[round(float(r["time_s"]), 1), int(r["env_steps"]),
                       round(float(r["eval_return"]), 1)] for r in result.history]}


def summarise(runs: list[dict], quick: bool) -> tuple[list[dict], dict]:
    """One row per task: medians per side and the time ratio; the targets met or missed."""
    rows, targets = [], {}
    for task in TASKS:
        row = {"task": task, "goal": TASKS[task]["goal"]}
        for side in ("ours", "rllib"):
            mine = [r for r in runs if r["task"] == task and r["side"] == side]
            if not mine:
                continue
            row[f"{side}_name"] = mine[0]["name"]
            row[f"{side}_reached"] = f"{sum(r['reached'] for r in mine)}/{len(mine)}"
            row[f"{side}_all_reached"] = all(r["reached"] for r in mine)
            row[f"{side}_median_s"] = statistics.median(r["time_s"] for r in mine)
            row[f"{side}_median_env_steps"] = statistics.median(r["env_steps"] for r in mine)
        if "ours_median_s" not in row or "rllib_median_s" not in row:
            rows.append(row)
            continue
        row["time_ratio"] = round(row["ours_median_s"] / row["rllib_median_s"], 2)
        row["ratio_is_upper_bound"] = not row["rllib_all_reached"]
        row["ratio_text"] = (
            "n/a (course_lib missed the goal)" if not row["ours_all_reached"] else
            f"≤ {row['time_ratio']} (RLlib missed the goal)" if row["ratio_is_upper_bound"]
            else str(row["time_ratio"]))
        rows.append(row)
        if not quick:
            targets[f"{task} time ours/RLlib"] = {
                "value": row["time_ratio"], "target": TARGET_RATIO,
                "met": bool(row["ours_all_reached"] and row["time_ratio"] <= TARGET_RATIO),
                "note": "" if row["rllib_all_reached"] else UPPER_BOUND_NOTE}
    return rows, targets


def run(seeds=(0,), quick: bool = False, tasks=tuple(TASKS), log=print) -> dict:
    """The whole benchmark in a private Ray instance; returns {"config", "runs", "summary",
    "targets"}."""
    runs = []
    with private_ray_tmp():
        try:
            init_ray(num_cpus=os.cpu_count())
            for task in tasks:
                spec = TASKS[task]
                contenders = [("ours", *spec["ours"]),
                              ("rllib", f"RLlib {spec['rllib'].upper()}", spec["rllib"])]
                for seed in seeds:
                    for side, name, kind in contenders:
                        runs.append(run_once(side, name, kind, task, seed, quick))
                        r = runs[-1]
                        log(f"{task} seed {seed} {name}: "
                            f"{'reached' if r['reached'] else 'NOT reached'} "
                            f"({r['stopped_by']}) at {r['env_steps']:,} env steps, "
                            f"{r['time_s']:.1f} s, eval {r['eval_return']:.1f}")
        finally:
            ray.shutdown()
    rows, targets = summarise(runs, quick)
    return {"config": {"quick": quick, "seeds": list(seeds), "tasks": list(tasks),
                       "budgets": {t: budget(t, quick) for t in tasks}},
            "runs": runs, "summary": rows, "targets": targets}


def print_summary(result: dict) -> None:
    for row in result["summary"]:
        print(f"{row['task']} (goal {row['goal']:g}): "
              f"{row.get('ours_name')} {row.get('ours_median_s')} s "
              f"[{row.get('ours_reached')}], {row.get('rllib_name')} "
              f"{row.get('rllib_median_s')} s [{row.get('rllib_reached')}], "
              f"time ratio {row.get('ratio_text')}")
    for name, check in result["targets"].items():
        print(f"target {name}: {check['value']} vs <= {check['target']}: "
              + ("met" if check["met"] else "MISSED") + (f" ({check['note']})"
                                                         if check["note"] else ""))


def main() -> None:
    cli = parser(__doc__, "rllib", "tiny budgets, no goal")
    cli.add_argument("--seeds", type=int, nargs="+", default=[0])
    cli.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    cli.add_argument("--max-time-s", type=float, default=None,
                     help="a shorter wall-clock budget per run than the default 900 s")
    args = cli.parse_args()
    recording = Recording()
    if args.max_time_s is not None:
        for spec in TASKS.values():
            spec["max_time_s"] = args.max_time_s
    result = run(args.seeds, quick=args.quick, tasks=tuple(args.tasks))
    print_summary(result)
    recording.write(result, args.json)


if __name__ == "__main__":
    main()
