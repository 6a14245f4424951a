"""Parallel SAC against SB3's SAC on Pendulum-v1 with the networks matched, both ways.

    python -m bench.matched [--quick] [--seeds 0 1 2] [--json bench/results/matched.json]

The SB3 race (`bench/sb3.py`) compares each side at its own defaults: SB3's RL Zoo SAC uses
256x256 networks, the workbook's SAC 64x64. A smaller network makes every update cheaper, so
part of "parallel SAC reaches -200 in 0.2x SB3's time" is the network, not distribution. This
runs four set-ups on the same machine in one go, one seed at a time:

| set-up          | what                                                            |
| --------------- | --------------------------------------------------------------- |
| ours 64x64      | `SACTrainer.train`, the CLI default config (2 workers)                  |
| ours 256x256    | the same with SB3's network size                                |
| sb3 256x256     | SB3 SAC, RL Zoo settings (`bench/sb3.py`)                        |
| sb3 64x64       | the same with the workbook's network size                        |

Same goal (-200, 10 episodes confirmed on 20 fresh ones), the same evaluation protocol and
budget as the SB3 race. Reported: per set-up the median seconds and env steps to the goal; the
ratio ours/SB3 at each network size says how much of the gap is distribution and the
workbook's settings, with the network size held equal.
"""

from __future__ import annotations

import statistics

import ray
import torch

from bench.benchlib import Recording, parser, private_ray_tmp, seeds_of
from bench.sac import QUICK as SAC_QUICK, run_seed
from bench.sb3 import run_once
from course_lib import init_ray

TASK = "Pendulum-v1"
NETS = {"64x64": (64, 64), "256x256": (256, 256)}


def bench_matched(seeds=(0, 1, 2), quick: bool = False, log=print) -> dict:
    torch.set_num_threads(1)
    runs = []
    with private_ray_tmp():
        try:
            init_ray()
            for seed in seeds:
                for net, hidden in NETS.items():
                    overrides = {**(SAC_QUICK if quick else {}), "hidden": hidden}
                    r = run_seed(TASK, seed, 2, overrides)
                    runs.append({"side": "ours", "net": net, "seed": seed,
                                 "reached": r["reached"], "time_s": r["time_s"],
                                 "env_steps": r["env_steps"]})
                    log(f"ours {net} seed {seed}: {runs[-1]}", flush=True)
                    r = run_once(TASK, seed, quick,
                                 zoo_changes={"policy_kwargs": {"net_arch": list(hidden)}})
                    runs.append({"side": "sb3", "net": net, "seed": seed,
                                 "reached": r["reached"], "time_s": r["time_s"],
                                 "env_steps": r["env_steps"]})
                    log(f"sb3 {net} seed {seed}: {runs[-1]}", flush=True)
        finally:
            ray.shutdown()
    return {"runs": runs, "summary": summarise(runs),
            "config": {"task": TASK, "seeds": list(seeds), "quick": quick, "workers": 2}}


def summarise(runs: list[dict]) -> list[dict]:
    """Per network size: each side's medians (a run that missed counts with what it spent)
    and the time ratio ours/SB3."""
    rows = []
    for net in NETS:
        row = {"net": net}
        for side in ("ours", "sb3"):
            mine = [r for r in runs if (r["side"], r["net"]) == (side, net)]
            row[side] = {"reached": f"{sum(r['reached'] for r in mine)}/{len(mine)}",
                         "median_time_s": statistics.median(r["time_s"] for r in mine),
                         "median_env_steps": statistics.median(r["env_steps"] for r in mine)}
        row["time_ratio"] = row["ours"]["median_time_s"] / row["sb3"]["median_time_s"]
        rows.append(row)
    return rows


def section(r: dict) -> str:
    """The RESULTS.md table: one row per network size."""
    lines = ["| network (both sides) | ours reached | ours s | ours env steps | SB3 reached | "
             "SB3 s | SB3 env steps | time ours/SB3 |", "| --- | --- | --- | --- | --- | --- | "
             "--- | --- |"]
    for row in r["summary"]:
        o, s = row["ours"], row["sb3"]
        lines.append(f"| {row['net']} | {o['reached']} | {o['median_time_s']:.1f} | "
                     f"{o['median_env_steps']:,.0f} | {s['reached']} | {s['median_time_s']:.1f} | "
                     f"{s['median_env_steps']:,.0f} | {row['time_ratio']:.2f} |")
    cfg = r["meta"]["config"]
    lines.append(f"\nMedians of {len(cfg['seeds'])} seeds, {cfg['task']}, ours with "
                 f"{cfg['workers']} workers.")
    return "\n".join(lines)


def main() -> None:
    args = parser(__doc__, "matched", "one seed, tiny budgets, no goal", seeds=True).parse_args()
    recording = Recording(packages=("stable-baselines3",))
    result = bench_matched(seeds_of(args), args.quick)
    print(section(recording.write(result, args.json)))


if __name__ == "__main__":
    main()
