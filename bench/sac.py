"""Benchmark parallel SAC: env steps and seconds to a deterministic mean return of -200 on
Pendulum-v1 (10 episodes), over 3 seeds; optionally LunarLanderContinuous-v3 to 200.

    python -m bench.sac [--quick] [--json bench/results/sac.json] [--seeds 0 1 2]
                       [--workers 2] [--lunar]

Each seed is one `SACTrainer.train` run with the full-mode config (the one notebook 06 and
`python -m course_lib train --algo sac` use), stopped when the tester's deterministic mean
return reaches the goal or a budget runs out. The seconds count from the trainer's start
(actors created, Ray already running) to the iteration whose test reached the goal; the env
steps are those the workers had played by then (the tested weights are a little older, so
this is an upper bound). One private Ray instance serves all seeds, one seed at a time.

Targets (2 cores, median of 3 seeds): -200 within 20,000 env steps and within 360 s.
LunarLanderContinuous needs the `box2d` and `pygame` packages (not `box2d-py`); without them
that part is reported as skipped.

`bench_sac(...)` returns the whole result as a dict (what `main` prints and writes), for a
script that collects every benchmark's figures.
"""

from __future__ import annotations

import importlib.util
import statistics

import ray
import torch

from bench.benchlib import Recording, parser, private_ray_tmp
from course_lib import init_ray
from course_lib.sac import SACConfig, SACTrainer

TARGETS = {"env_steps": 20_000, "time_s": 360.0}
TASKS = {
    "Pendulum-v1": {"target_return": -200.0, "max_env_steps": 30_000, "max_time_s": 600.0},
    "LunarLanderContinuous-v3": {"target_return": 200.0, "max_env_steps": 500_000,
                                 "max_time_s": 3600.0, "hidden": (256, 256),
                                 "buffer_size": 500_000, "start_steps": 10_000,
                                 "learning_starts": 10_000, "lr": 7.3e-4, "alpha_lr": 7.3e-4},
}
QUICK = {"max_env_steps": 2_000, "max_time_s": 60.0, "start_steps": 500,
         "learning_starts": 500, "eval_episodes": 3}


def config(env_id: str, seed: int, workers: int, overrides: dict) -> SACConfig:
    """The full-mode config (the CLI's) with the task's goal and budget, and `overrides`."""
    return SACConfig().updated({"env_id": env_id, "seed": seed, "num_workers": workers,
                                **TASKS[env_id], **overrides})


def run_seed(env_id: str, seed: int, workers: int, overrides: dict) -> dict:
    """One training run; what it took to reach the goal (or how far it got)."""
    result = SACTrainer.train(config(env_id, seed, workers, overrides))
    last = result.last
    return {"seed": seed, "reached": result.stopped_by == "eval_return",
            "stopped_by": result.stopped_by, "env_steps": last["env_steps"],
            # wall_s: when the evaluation that stopped the run ended (evaluation inside the clock)
            "time_s": round(last["wall_s"], 1), "learner_updates": last["learner_updates"],
            "eval_return": round(last["eval_return"], 1),
            "updates_per_s": round(last["learner_updates"] / last["time_s"], 1),
            "learner_device": result.extras["learner_device"]}


def summarise(runs: list[dict], check_targets: bool) -> dict:
    reached = [r for r in runs if r["reached"]]
    summary = {"seeds": len(runs), "reached": len(reached)}
    if len(reached) == len(runs):
        summary["median_env_steps"] = statistics.median(r["env_steps"] for r in runs)
        summary["median_time_s"] = statistics.median(r["time_s"] for r in runs)
        if check_targets:
            summary["targets"] = {key: {"value": summary[f"median_{key}"], "target": target,
                                        "met": summary[f"median_{key}"] <= target}
                                  for key, target in TARGETS.items()}
    return summary


def bench_sac(seeds=(0, 1, 2), workers: int = 2, quick: bool = False,
              lunar: bool = False) -> dict:
    """Run the benchmark in a private Ray instance; returns {"config", "pendulum", "lunar"}."""
    torch.set_num_threads(1)
    overrides = QUICK if quick else {}
    out: dict = {}
    with private_ray_tmp():
        try:
            init_ray()
            runs = []
            for seed in seeds:
                runs.append(run_seed("Pendulum-v1", seed, workers, overrides))
                print(_line("Pendulum-v1", runs[-1]), flush=True)
            out["pendulum"] = {"runs": runs, **summarise(runs, check_targets=not quick)}
            if lunar and _have_box2d():
                runs = [run_seed("LunarLanderContinuous-v3", seed, workers, overrides)
                        for seed in seeds]
                out["lunar"] = {"runs": runs, **summarise(runs, check_targets=False)}
            elif lunar:
                out["lunar"] = {"skipped": "the box2d and pygame packages are not installed"}
        finally:
            ray.shutdown()
    out["config"] = {"seeds": list(seeds), "workers": workers, "quick": quick,
                     "sac_config": {**SACConfig().to_dict(), **overrides}}
    return out


def _have_box2d() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("Box2D", "pygame"))


def _line(env_id: str, run: dict) -> str:
    head = (f"reached {run['eval_return']:.1f}" if run["reached"]
            else f"NOT reached (stopped by {run['stopped_by']}, last {run['eval_return']:.1f})")
    return (f"{env_id} seed {run['seed']}: {head} after {run['env_steps']:,} env steps, "
            f"{run['time_s']:.1f} s, {run['learner_updates']:,} updates "
            f"({run['updates_per_s']:.0f}/s, learner on {run['learner_device']})")


def main() -> None:
    cli = parser(__doc__, "sac", "one short run per seed, no goal")
    cli.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    cli.add_argument("--workers", type=int, default=2, help="rollout workers")
    cli.add_argument("--lunar", action="store_true", help="also LunarLanderContinuous-v3")
    args = cli.parse_args()
    recording = Recording()
    result = bench_sac(tuple(args.seeds), args.workers, args.quick, args.lunar)
    pendulum = result["pendulum"]
    if "median_env_steps" in pendulum:
        print(f"Pendulum-v1 median over {pendulum['seeds']} seeds: "
              f"{pendulum['median_env_steps']:,.0f} env steps, {pendulum['median_time_s']:.1f} s")
    else:
        print(f"Pendulum-v1: {pendulum['reached']} of {pendulum['seeds']} seeds reached -200")
    for name, check in pendulum.get("targets", {}).items():
        print(f"target {name}: {check['value']:,.1f} vs {check['target']:,}: "
              + ("met" if check["met"] else "MISSED"))
    if "lunar" in result:
        print(f"LunarLanderContinuous-v3: {result['lunar']}")
    recording.write(result, args.json)


if __name__ == "__main__":
    main()
