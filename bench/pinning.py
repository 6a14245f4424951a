"""Does a core of its own lift the Ape-X learner? `pin_learner` off and on, in alternation.

    python -m bench.pinning [--quick] [--repeats 3] [--json bench/results/pinning.json]

`bench/overhead.py` finds the Ape-X learner of the CLI's default config (4 explorers) below
0.8 of its bare update loop, and its profile puts part of the gap on the scheduler: the
learner's thread is often runnable but waiting for a core that an explorer, the evaluator or
one of Ray's processes holds. `pin_learner` (Linux, one machine: `course_lib.placement`) gives
the learner the last core alone and every worker the others. This runs the same Ape-X config
with it off and on, alternately (off, on, off, on, ...), so that a drift of the machine falls
on both, and reports per setting the medians of

- the learner's steady rate against the bare loop measured in the same run (`overhead`'s
  window and its `saturated` share: a learner that waited for data ran at the rate it was
  owed, not at its own);
- the whole system's CPU milliseconds per learner update, read from the OS, against one plain
  process doing the same work (`overhead.single_process_cpu_per_update`).

The replay ratio, the explorers and every other setting are the CLI default's on both sides.
`--quick`: one short run of each.
"""

from __future__ import annotations

import os
import statistics

import ray

from bench.benchlib import Recording, parser, private_ray_tmp
from bench.overhead import (
    FULL,
    QUICK,
    TARGET,
    bare_learner_rate,
    learner_window,
    run_for,
    single_process_cpu_per_update,
    system_cpu_per_update,
)
from course_lib import init_ray
from course_lib.apex import ApexConfig, ApexTrainer

SETTINGS = {"off": False, "on": True}


def bench_pinning(repeats: int = 3, quick: bool = False, log=print) -> dict:
    times = QUICK if quick else FULL
    bare = bare_learner_rate("apex", times["bare_s"])        # before Ray starts any process
    single = single_process_cpu_per_update(times["bare_s"] * 2)["cpu_ms_per_update"]
    log(f"bare Ape-X learner: {bare:,.0f} updates/s; one process: {single:.2f} CPU ms/update")
    cfg = ApexConfig().updated({"target_return": None, "max_env_steps": None,
                                "max_time_s": None})
    runs = []
    with private_ray_tmp():
        try:
            init_ray(num_cpus=os.cpu_count())
            for repeat in range(1 if quick else repeats):
                for name, pin in SETTINGS.items():
                    samples = run_for(ApexTrainer, cfg.updated({"pin_learner": pin}),
                                      times["apex_s"])
                    window = learner_window(samples, cfg.learner_chunk)
                    cpu = system_cpu_per_update(samples)["cpu_ms_per_update"]
                    runs.append({"pin_learner": name, "repeat": repeat, **window,
                                 "ratio": window["updates_s"] / bare, "cpu_ms_per_update": cpu})
                    log(f"pin_learner {name}, run {repeat + 1}: {window['updates_s']:,.0f} "
                        f"updates/s ({runs[-1]['ratio']:.2f} of bare, saturated "
                        f"{window['saturated']:.0%}), {cpu:.2f} CPU ms per update", flush=True)
        finally:
            ray.shutdown()
    summary = summarise(runs, single)
    result = {"bare_updates_s": round(bare, 1), "single_process_ms": round(single, 3),
              "runs": runs, "summary": summary,
              "config": {"quick": quick, "repeats": 1 if quick else repeats,
                         "explorers": cfg.num_workers, "window_s": times["apex_s"]}}
    on = next(row for row in summary if row["pin_learner"] == "on")
    result["targets"] = {} if quick else {"apex learner distributed/bare, pin_learner on": {
        "value": round(on["ratio"], 3), "target": f">= {TARGET}", "met": on["ratio"] >= TARGET,
        "note": "a labelled variant: the CLI's default leaves pin_learner off"}}
    return result


def summarise(runs: list[dict], single_ms: float) -> list[dict]:
    """Per setting: the medians over its runs, and the CPU per update against one process."""
    rows = []
    for name in SETTINGS:
        mine = [r for r in runs if r["pin_learner"] == name]
        row = {"pin_learner": name, "runs": len(mine)}
        for key in ("updates_s", "ratio", "saturated", "cpu_ms_per_update"):
            row[key] = statistics.median(r[key] for r in mine)
        row["cpu_vs_one_process"] = row["cpu_ms_per_update"] / single_ms
        rows.append(row)
    return rows


def section(r: dict) -> str:
    """The RESULTS.md table: one row per setting."""
    lines = ["| pin_learner | runs | learner updates/s | / bare | saturated | system CPU ms per "
             "update | / one process |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for row in r["summary"]:
        lines.append(f"| {row['pin_learner']} | {row['runs']} | {row['updates_s']:,.0f} | "
                     f"{row['ratio']:.2f} | {row['saturated']:.0%} | "
                     f"{row['cpu_ms_per_update']:.2f} | {row['cpu_vs_one_process']:.2f} |")
    cfg = r["meta"]["config"]
    lines.append(f"\nMedians of {cfg['repeats']} runs per setting, alternating, each "
                 f"{cfg['window_s']:g} s of the CLI default's Ape-X ({cfg['explorers']} "
                 f"explorers). Bare learner loop: {r['bare_updates_s']:,.0f} updates/s; one "
                 f"process doing all the work: {r['single_process_ms']:.2f} CPU ms per update.")
    return "\n".join(lines)


def main() -> None:
    cli = parser(__doc__, "pinning", "one short run of each setting")
    cli.add_argument("--repeats", type=int, default=3, help="runs per setting (default 3)")
    args = cli.parse_args()
    recording = Recording()
    result = bench_pinning(args.repeats, args.quick)
    print(section(recording.write(result, args.json)))


if __name__ == "__main__":
    main()
