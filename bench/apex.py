"""Benchmark Ape-X against the single-process DQN baseline: time and env steps to CartPole 475.

    python -m bench.apex [--quick] [--seeds 0 1 2] [--json bench/results/apex.json]

For each seed, three runs in one Ray instance, one after the other: single-process DQN (the
reference, same learner code), Ape-X with 2 explorers, Ape-X with 4 explorers. Each stops at a
greedy mean return >= 475 over 10 evaluation episodes, or at its budget (150K env steps or
300 s). Reported per variant: median env steps and seconds to the goal over the seeds (a run
that missed counts as its budget and is flagged), and the time ratio Ape-X / DQN.
Seconds are wall-clock from the trainer's creation (actor start-up included, Ray start-up not)
to the end of the evaluation that stopped the run (its `wall_s`), as in bench/sac.py and
bench/sb3.py. Every variant is the CLI's full-mode config; "apex-4" is the CLI default.

Targets (issue 5): Ape-X with 4 explorers reaches 475 within 100K env steps and 180 s (median).
`--quick`: one seed, small budgets, no goal: checks that the script works, measures nothing.
"""

from __future__ import annotations

import os

import numpy as np
import ray

from bench.benchlib import Recording, Stopwatch, parser, private_ray_tmp, seeds_of
from course_lib import init_ray
from course_lib.apex import ApexConfig, ApexTrainer
from course_lib.dqn import DQNConfig, DQNTrainer

GOAL = 475.0
TARGETS = {"apex-4 median env steps": 100_000, "apex-4 median seconds": 180.0}
VARIANTS = {  # name -> (train function, config class, overrides)
    "dqn": (DQNTrainer.train, DQNConfig, {}),
    "apex-2": (ApexTrainer.train, ApexConfig, {"num_workers": 2}),
    "apex-4": (ApexTrainer.train, ApexConfig, {"num_workers": 4}),
}


def budget(quick: bool) -> dict:
    if quick:
        return {"target_return": None, "max_env_steps": 3_000, "max_time_s": 60.0}
    return {"target_return": GOAL, "max_env_steps": 150_000, "max_time_s": 300.0}


def config(variant: str, seed: int, quick: bool):
    """The full-mode config of `variant`, with the benchmark's budget and evaluation."""
    _, config_cls, overrides = VARIANTS[variant]
    return config_cls.preset(quick=False).updated(
        {**overrides, **budget(quick), "seed": seed, "eval_episodes": 10})


def run_once(variant: str, seed: int, quick: bool) -> dict:
    """One training run; env steps and seconds at the stop, and whether the goal was met."""
    clock = Stopwatch()
    result = VARIANTS[variant][0](config(variant, seed, quick))
    process_s = clock.seconds
    last = result.last
    # seconds: when the evaluation that stopped the run ended (wall_s, evaluation inside the
    # clock), not counting the actors' shutdown after it (process_s does)
    return {"variant": variant, "seed": seed, "reached": result.stopped_by == "eval_return",
            "env_steps": int(last["env_steps"]), "seconds": round(float(last["wall_s"]), 1),
            "process_s": round(process_s, 1),
            "learner_updates": int(last["learner_updates"]),
            "eval_return": float(last["eval_return"])}


def summarise(runs: list[dict]) -> list[dict]:
    """Per variant: medians over seeds, and the time ratio against the DQN reference."""
    rows = []
    for variant in VARIANTS:
        mine = [r for r in runs if r["variant"] == variant]
        rows.append({"variant": variant, "seeds": len(mine),
                     "reached": sum(r["reached"] for r in mine),
                     "median_env_steps": float(np.median([r["env_steps"] for r in mine])),
                     "median_seconds": float(np.median([r["seconds"] for r in mine]))})
    reference = rows[0]["median_seconds"]
    for row in rows:
        row["seconds_vs_dqn"] = round(row["median_seconds"] / reference, 2)
    return rows


def check_targets(rows: list[dict]) -> dict:
    apex4 = next(r for r in rows if r["variant"] == "apex-4")
    all_reached = apex4["reached"] == apex4["seeds"]
    values = {"apex-4 median env steps": apex4["median_env_steps"],
              "apex-4 median seconds": apex4["median_seconds"]}
    return {name: {"value": value, "target": TARGETS[name],
                   "met": bool(all_reached and value <= TARGETS[name])}
            for name, value in values.items()}


def run(seeds=(0, 1, 2), quick: bool = False, log=print) -> dict:
    """The whole benchmark in a private Ray instance; returns the results (see main)."""
    runs = []
    with private_ray_tmp():
        try:
            init_ray(num_cpus=os.cpu_count())
            for seed in seeds:
                for variant in VARIANTS:
                    runs.append(run_once(variant, seed, quick))
                    r = runs[-1]
                    verdict = "reached" if r["reached"] else "budget " if quick else "MISSED "
                    log(f"seed {seed} {variant:>7}: {verdict} "
                        f"at {r['env_steps']:>7,} env steps, {r['seconds']:6.1f} s, "
                        f"{r['learner_updates']:,} updates, eval {r['eval_return']:.1f}")
        finally:
            ray.shutdown()
    rows = summarise(runs)
    return {"config": {"quick": quick, "seeds": list(seeds), "goal": GOAL, **budget(quick)},
            "runs": runs, "summary": rows,
            "targets": {} if quick else check_targets(rows)}


def print_summary(result: dict) -> None:
    print(f"{'variant':<8}{'reached':>9}{'median env steps':>18}{'median s':>10}{'s vs DQN':>10}")
    for row in result["summary"]:
        print(f"{row['variant']:<8}{row['reached']:>5}/{row['seeds']:<3}"
              f"{row['median_env_steps']:>18,.0f}{row['median_seconds']:>10.1f}"
              f"{row['seconds_vs_dqn']:>10.2f}")
    for name, check in result["targets"].items():
        print(f"target {name}: {check['value']:,.1f} vs {check['target']:,}: "
              + ("met" if check["met"] else "MISSED"))


def main() -> None:
    args = parser(__doc__, "apex", "one seed, tiny budgets, no goal", seeds=True).parse_args()
    recording = Recording()
    result = run(seeds_of(args), quick=args.quick)
    print_summary(result)
    recording.write(result, args.json)


if __name__ == "__main__":
    main()
