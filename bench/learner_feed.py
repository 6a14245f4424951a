"""What feeds the Ape-X learner: the CLI's default against the learner as it was, pinning, and
drawing ahead on a thread.

    python -m bench.learner_feed [--quick] [--repeats 2] [--json bench/results/learner_feed.json]

`bench/overhead.py` compares the Ape-X learner of the CLI's default config (4 explorers) with
its bare update loop (the target: 0.8). Four things set how close it gets, and the default
now has the first two:

| setting          | what it is                                                            |
| ---------------- | --------------------------------------------------------------------- |
| default          | the CLI's config: the learner draws `batches_per_draw` (4) batches   |
|                  | at once and writes their priorities back together; explorers send    |
|                  | `send_every` 200 transitions per add; weights published every 100    |
| as before        | one batch per draw, adds of 50, weights published every 25: the     |
|                  | defaults until the learner drew ahead                                 |
| pin_learner      | the default, with the learner alone on the last core and every       |
|                  | worker on the others (Linux, one machine: `run_actors.check_pinning`) |
| sample_ahead     | the default, with the next batches drawn (and the priorities written  |
|                  | back) on a thread of the learner while its updates run               |

Each run is the same Ape-X config with one setting changed; the settings take turns (default,
as before, pin_learner, sample_ahead, default, ...), so that a drift of the machine falls on
all of them.
Reported per setting, the medians of

- the learner's steady rate against the bare loop measured in the same run (`overhead`'s
  window and its `saturated` share: a learner that waited for data ran at the rate it was
  owed, not at its own);
- the whole system's CPU milliseconds per learner update, read from the OS, against one plain
  process doing the same work (`overhead.single_process_cpu_per_update`).

The replay ratio, the explorers and every other setting are the CLI default's throughout.
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

#: each setting's changes to the CLI's default config
SETTINGS = {"default": {},
            "as before": {"batches_per_draw": 1, "send_every": 50, "publish_every": 25},
            "pin_learner": {"pin_learner": True},
            "sample_ahead": {"sample_ahead": True}}


def bench_learner_feed(repeats: int = 2, quick: bool = False, log=print) -> dict:
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
                for name, changes in SETTINGS.items():
                    samples = run_for(ApexTrainer, cfg.updated(changes), times["apex_s"])
                    window = learner_window(samples, cfg.learner_chunk)
                    cpu = system_cpu_per_update(samples)["cpu_ms_per_update"]
                    runs.append({"setting": name, "repeat": repeat, **window,
                                 "ratio": window["updates_s"] / bare, "cpu_ms_per_update": cpu})
                    log(f"{name}, run {repeat + 1}: {window['updates_s']:,.0f} "
                        f"updates/s ({runs[-1]['ratio']:.2f} of bare, saturated "
                        f"{window['saturated']:.0%}), {cpu:.2f} CPU ms per update", flush=True)
        finally:
            ray.shutdown()
    summary = summarise(runs, single)
    result = {"bare_updates_s": round(bare, 1), "single_process_ms": round(single, 3),
              "runs": runs, "summary": summary,
              "config": {"quick": quick, "repeats": 1 if quick else repeats,
                         "explorers": cfg.num_workers, "window_s": times["apex_s"]}}
    result["targets"] = {} if quick else targets(summary)
    return result


def targets(summary: list[dict]) -> dict:
    """The overhead target (learner >= 0.8 of its bare loop), for the CLI's default."""
    row = next(row for row in summary if row["setting"] == "default")
    return {"apex learner distributed/bare, the CLI's default": {
        "value": round(row["ratio"], 3), "target": f">= {TARGET}",
        "met": bool(row["ratio"] >= TARGET),
        "note": "" if row["saturated"] >= 0.5 else "the learner waited for data most of the "
                "window: its rate is what it was owed"}}


def summarise(runs: list[dict], single_ms: float) -> list[dict]:
    """Per setting: the medians over its runs, and the CPU per update against one process."""
    rows = []
    for name in SETTINGS:
        mine = [r for r in runs if r["setting"] == name]
        if not mine:                  # a setting this run did not measure (an older file's)
            continue
        row = {"setting": name, "runs": len(mine)}
        for key in ("updates_s", "ratio", "saturated", "cpu_ms_per_update"):
            row[key] = statistics.median(r[key] for r in mine)
        row["cpu_vs_one_process"] = row["cpu_ms_per_update"] / single_ms
        rows.append(row)
    return rows


def section(r: dict) -> str:
    """The RESULTS.md table: one row per setting."""
    lines = ["| setting | runs | learner updates/s | / bare | saturated | system CPU ms per "
             "update | / one process |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for row in r["summary"]:
        lines.append(f"| {row['setting']} | {row['runs']} | {row['updates_s']:,.0f} | "
                     f"{row['ratio']:.2f} | {row['saturated']:.0%} | "
                     f"{row['cpu_ms_per_update']:.2f} | {row['cpu_vs_one_process']:.2f} |")
    cfg = r["meta"]["config"]
    lines.append(f"\nMedians of {cfg['repeats']} runs per setting, taking turns, each "
                 f"{cfg['window_s']:g} s of the CLI default's Ape-X ({cfg['explorers']} "
                 f"explorers). Bare learner loop: {r['bare_updates_s']:,.0f} updates/s; one "
                 f"process doing all the work: {r['single_process_ms']:.2f} CPU ms per update.")
    return "\n".join(lines)


def main() -> None:
    cli = parser(__doc__, "learner_feed", "one short run of each setting")
    cli.add_argument("--repeats", type=int, default=2, help="runs per setting (default 2)")
    args = cli.parse_args()
    recording = Recording()
    result = bench_learner_feed(args.repeats, args.quick)
    print(section(recording.write(result, args.json)))


if __name__ == "__main__":
    main()
