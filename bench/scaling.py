"""Where distribution pays: time, env steps and CPU to CartPole 475 as each env step gets slower.

    python -m bench.scaling [--quick] [--latencies 0 0.5 2 5] [--seeds 0 1 2]
                            [--variants dqn sb3 vec-8 apex-1 apex-2 apex-4 apex-auto] [--cap-s 45]
                            [--add-to]

A training env step waits `env_latency_ms` (`envs.Latency`: a sleep, no CPU), as an env whose
cost is paid elsewhere would: a simulator on another machine, a robot, a game server.
Evaluation envs stay fast. For each latency, one after the other in one Ray instance, each
variant of `VARIANTS` (a new one is one line there; `--variants NAME --add-to` adds its runs
to the committed ladder):

| variant  | what                                                                          |
| -------- | ----------------------------------------------------------------------------- |
| dqn      | the workbook's single-process DQN (the same learner as Ape-X), one env         |
| sb3      | Stable-Baselines3 DQN, RL Zoo settings (`bench/sb3.py`), its env with the latency |
| vec-8    | single-process DQN stepping 8 envs as one batch: one forward pass, and the 8    |
|          | requests wait together (latency paid once per batch, as with async env calls)  |
| apex-N   | Ape-X with N explorers (CLI defaults otherwise: each steps `num_envs` envs)     |
| apex-auto| Ape-X with `--num-workers auto`: the model's count from costs measured at the   |
|          | run's start (`sizing.auto_explorers`; the second it takes is in its time)      |

Each run stops at a greedy mean return >= 475 (10 episodes, confirmed on 20 fresh ones that
meet it on their own) or at its budget. Reported per (latency, variant): the median and the
range over seeds of seconds (wall clock from the trainer's creation to the end of the
evaluation that stopped it), env steps, and CPU seconds (this process and every process it
started: Ray's daemons, actors and idle workers, read from the OS at the stopping row).

Sized to about half an hour on 2 cores (the estimate is in CONTRIBUTING.md), it keeps what the
2-3 h ladder it replaces showed, with three rules:
- **3 seeds** (it had 5), the range shown beside each median;
- **a cap per run**, `CAP_S` (45 s) of training: a run that reaches it has not reached the goal
  in that time, and its seconds are a lower bound (shown "≥"). The best Ape-X took 20-35 s at
  every latency in the earlier ladder, so the cap decides where distribution pays and costs
  only the slow references' runs. On a slower machine each rung's cap grows by how much longer
  a bare transition takes there (`cap_at`, from the costs measured at the start). The
  repeatable references at the first latency run to the goal (`FULL`'s budget): their env
  steps are the floors below;
- **floors for the repeatable references** (dqn, vec-8, sb3: one process, seeded, evaluated
  at fixed env-step counts, so a seed learns step for step the same at every latency; the
  earlier ladder's dqn and vec-8 took the same env steps at all four): a run of them must wait
  at least its env steps to the goal times the latency (once per batch of `steps_per_wait`
  envs). Its compute is the same too: the seconds it took at the first latency, less that
  latency's waits. When the floor plus `COMPUTE_SHARE` (0.9) of that compute passes the cap,
  the run is not made (it would stop at the cap): the larger of the floor and the cap is
  reported, as a lower bound; the 0.1 left out is room for the machine being faster later in
  the run. Ape-X learns differently at every latency (its explorers run asynchronously) and
  is always run.
The variants are those of the earlier ladder that mattered: apex-8 was never the fastest and
was slower than apex-4 at every latency but the highest, where the seeds' ranges overlapped.

The bound beside each curve is Amdahl's, from per-step costs measured in the same run
(bare, one process): per transition, one process pays t_act + L + u t_update (u: updates per
transition); N explorers, each stepping k envs as a batch (one wait of L per batch step), at
best max((t_act + L / k) / N, u t_update, (t_act + u t_update) / cores), times the run's
own env steps to the goal (`course_lib.sizing.amdahl_ms`, the workbook's one bound;
`bench/model.py` sets the model's best count against this ladder's). A cheap env (L = 0)
leaves nothing to win; an env whose cost is paid elsewhere is where N explorers pay.

Targets (issue "Distribution that pays"): at 2 ms, the best apex-N reaches 475 in <= 0.35x
the time of dqn and of sb3 (medians); at 0 ms, the best apex-N no slower than dqn; and (issue
"Past one learner's buffer") at every latency, apex-auto within 1.25x of the best apex-N.
Against a reference whose median is a lower bound, the ratio is an upper bound: it decides a
target it meets, and leaves one it does not undecided.
`--quick`: one seed, two latencies, small budgets, no goal: the script works, nothing more.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import psutil
import ray

from bench.benchlib import Recording, Stopwatch, machine, parser, private_ray_tmp, seeds_of
from bench.overhead import bare_learner_rate, explorer_step_costs
from bench.scaling_summary import (
    check_targets,
    cpu_text,
    run_provenance,
    seconds_text,
    steps_text,
    summarise,
)
from course_lib import init_ray
from course_lib.apex import ApexConfig, ApexTrainer
from course_lib.dqn import DQNTrainer
from course_lib.errors import OutOfTime
from course_lib.sizing import auto_explorers

GOAL = 475.0
LATENCIES = (0.0, 0.5, 2.0, 5.0)
SEEDS = (0, 1, 2)
CAP_S = 45.0                       # seconds of training per run, at CAP_COSTS (--cap-s)
#: the bare costs (ms) of the ladder CAP_S was sized from (d8717cc, an Intel Xeon, where the best
#: Ape-X took 20-35 s): on a slower machine each rung's cap grows with them (`cap_at`)
CAP_COSTS = {"act_ms": 0.0924, "update_ms": 1.404}
FULL = {"target_return": GOAL, "max_env_steps": 150_000, "max_time_s": 600.0}
#: the share of a repeatable reference's compute (its seconds at the first latency, less that
#: latency's waits) that a later run of the same seed is sure to spend again
COMPUTE_SHARE = 0.9
QUICK = {"target_return": None, "max_env_steps": 2_000, "max_time_s": 60.0}


@dataclass(frozen=True)
class Variant:
    """One contender: our `trainer` with `changes` to its config's defaults, or Stable-Baselines3
    (`trainer` None, `bench/sb3.py`). `changes` may be a function of the latency in ms that
    returns them, for a setting chosen at start-up (an explorer count from a model). Each run
    records the explorers it had (`num_workers`), which the bound uses. `repeatable`: it
    learns the same at every latency (the floor rule, module docstring), each wait of the
    latency serving `steps_per_wait` env steps."""

    trainer: type | None
    changes: dict | Callable[[float], dict] = field(default_factory=dict)
    repeatable: bool = False
    steps_per_wait: int = 1


def auto_count(latency_ms: float) -> dict:
    """apex-auto's explorers: `--num-workers auto` as the command line runs it, the model's
    count from costs measured now on this machine (`sizing.auto_explorers`, about a second,
    which `run_one` counts in the run's seconds)."""
    cfg, _ = auto_explorers(ApexConfig().updated({"env_latency_ms": latency_ms}))
    return {"num_workers": cfg.num_workers}


#: the ladder's variants, in its order (one line adds one)
VARIANTS = {
    "dqn": Variant(DQNTrainer, repeatable=True),
    "sb3": Variant(None, repeatable=True),
    "vec-8": Variant(DQNTrainer, {"num_envs": 8}, repeatable=True, steps_per_wait=8),
    "apex-1": Variant(ApexTrainer, {"num_workers": 1}),
    "apex-2": Variant(ApexTrainer, {"num_workers": 2}),
    "apex-4": Variant(ApexTrainer, {"num_workers": 4}),
    "apex-auto": Variant(ApexTrainer, auto_count),
}


def cpu_seconds_tree() -> dict[int, float]:
    """{pid: CPU seconds (user + system)} of this process and every live process below it."""
    me, out = psutil.Process(), {}
    for proc in [me, *me.children(recursive=True)]:
        try:
            times = proc.cpu_times()
            out[proc.pid] = times.user + times.system
        except psutil.Error:                  # gone meanwhile
            pass
    return out


def cpu_used(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds spent between two `cpu_seconds_tree` readings by the processes alive at
    the second (a process started meanwhile counts from 0; one that ended is not seen)."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


def run_one(name: str, latency_ms: float, seed: int, budget: dict) -> dict:
    """One run of variant `name`; what it took to its stopping row."""
    variant, cpu0 = VARIANTS[name], cpu_seconds_tree()
    if variant.trainer is None:
        from bench import sb3  # imports Stable-Baselines3: only when its variant runs

        r = sb3.run_once("CartPole-v1", seed, budget["target_return"] is None,
                         latency_ms=latency_ms, budget=budget)
        return {"reached": r["reached"], "env_steps": int(r["env_steps"]),
                "seconds": r["time_s"], "cpu_s": round(cpu_used(cpu0, cpu_seconds_tree()), 1),
                "eval_return": r["eval_return"], "explorers": None}
    chose = Stopwatch()                  # choosing at start-up is part of the run's time
    changes = variant.changes(latency_ms) if callable(variant.changes) else variant.changes
    setup_s = chose.seconds
    cfg = variant.trainer.config_class().updated(
        {**budget, **changes, "seed": seed, "env_latency_ms": latency_ms})
    explorers = getattr(cfg, "num_workers", None)      # None: one process
    cpu_at_row: list[dict] = []
    try:
        result = variant.trainer.train(
            cfg, progress=lambda row: cpu_at_row.append(cpu_seconds_tree()))
    except OutOfTime:            # the cap came before its first evaluation: at least the cap
        return {"reached": False, "env_steps": None, "seconds": round(cfg.max_time_s + setup_s, 1),
                "cpu_s": round(cpu_used(cpu0, cpu_seconds_tree()), 1), "eval_return": None,
                "explorers": explorers}
    last = result.last
    return {"reached": result.stopped_by == "eval_return", "env_steps": int(last["env_steps"]),
            "seconds": round(float(last["wall_s"]) + setup_s, 1),
            "cpu_s": round(cpu_used(cpu0, cpu_at_row[-1]), 1),
            "eval_return": float(last["eval_return"]), "explorers": explorers}


def cap_at(latency_ms: float, costs: dict[str, float], cap_s: float = CAP_S) -> float:
    """The cap of a run at `latency_ms` on this machine: `cap_s` times how much longer one
    transition takes here, bare, than at `CAP_COSTS` (act + env step, the latency, and the
    updates it owes: t_act + L + u t_update), never less than `cap_s`. A cap sized on a faster
    machine would otherwise stop runs that a slower one needs only a little longer for (on an
    AMD EPYC with 3x the act and 1.5x the update cost, 45 s censored 24 of 36 Ape-X runs)."""
    def per_transition(c: dict[str, float]) -> float:
        return c["act_ms"] + latency_ms + costs["updates_per_transition"] * c["update_ms"]
    return round(cap_s * max(1.0, per_transition(costs) / per_transition(CAP_COSTS)), 1)


def budget_for(name: str, latency_ms: float, latencies, cap_s: float, quick: bool) -> dict:
    """A run's stop settings: the cap, except a repeatable reference at the first latency,
    which runs to the goal (its env steps are the floors of the others)."""
    if quick:
        return QUICK
    if VARIANTS[name].repeatable and latency_ms == min(latencies):
        return FULL
    return {**FULL, "max_time_s": cap_s}


def steps_known(runs: list[dict], name: str, seed: int) -> int | None:
    """The most env steps a run of this variant and seed has measured (None: no run yet): its
    env steps to the goal when one reached it, else at least that many."""
    return max((r["env_steps"] for r in runs if (r["variant"], r["seed"]) == (name, seed)
                and not r.get("floor") and r["env_steps"] is not None), default=None)


def floor_s(name: str, latency_ms: float, steps: int | None) -> float | None:
    """The seconds a repeatable variant must at least wait at `latency_ms` to reach the goal:
    its env steps to it (`steps_known`, the same at every latency) times the latency, once per
    `steps_per_wait` env steps. None when it is not repeatable or no steps are known."""
    variant = VARIANTS[name]
    if not variant.repeatable or steps is None:
        return None
    return steps * latency_ms / 1_000 / variant.steps_per_wait


def compute_s(runs: list[dict], name: str, seed: int) -> float:
    """The seconds the first run of this variant and seed spent beside its waits (its seconds
    less its floor at its own latency): the same work a later run of a repeatable variant does
    again. 0 when it has none."""
    for r in runs:
        if (r["variant"], r["seed"]) == (name, seed) and not r.get("floor") \
                and r["env_steps"] is not None:
            return max(0.0, r["seconds"] - (floor_s(name, r["latency_ms"], r["env_steps"]) or 0))
    return 0.0


def not_run(name: str, latency_ms: float, seed: int, runs: list[dict], cap: float) -> dict | None:
    """The record of a run not worth making, or None: a repeatable variant whose floor plus
    `COMPUTE_SHARE` of its compute (`compute_s`) passes the cap would stop at the cap. Its
    seconds are the larger of the floor and the cap, a lower bound."""
    steps = steps_known(runs, name, seed)
    floor = floor_s(name, latency_ms, steps)
    if floor is None:
        return None
    expected = floor + COMPUTE_SHARE * compute_s(runs, name, seed)
    if expected < cap:
        return None
    return {"reached": False, "env_steps": steps, "seconds": round(max(floor, cap), 1),
            "cpu_s": None, "eval_return": None, "floor": True, "floor_s": round(floor, 1),
            "expected_s": round(expected, 1)}


def step_costs(seconds: float, steps: int) -> dict[str, float]:
    """Bare per-transition costs in ms (one process, no Ray): an explorer's act + env step +
    n-step window + initial priority (`overhead.explorer_step_costs`), one learner update
    (the CLI-default learner), and the updates owed per transition."""
    pieces = explorer_step_costs(steps)
    cfg = ApexConfig()
    return {"act_ms": sum(pieces.values()) / 1_000,
            "update_ms": 1_000 / bare_learner_rate("apex", seconds),
            "updates_per_transition": cfg.replay_ratio / cfg.batch_size,
            "envs_per_explorer": cfg.num_envs}


def bench_scaling(latencies, seeds, variants, quick: bool, cap_s: float = CAP_S,
                  log=print) -> dict:
    """The ladder in one private Ray instance: per latency, each variant, each seed (a run, or its
    floor when that and its compute pass the cap: `not_run`)."""
    costs = step_costs(1.0 if quick else 4.0, 1_000 if quick else 5_000)
    log("bare costs: " + ", ".join(f"{k} {v:.3f}" for k, v in costs.items()))
    caps = {latency: cap_at(latency, costs, cap_s) for latency in latencies}
    log("cap per run: " + ", ".join(f"{k:g} ms {v:g} s" for k, v in caps.items()))
    runs, cpu = [], machine()["cpu"]
    with private_ray_tmp():
        init_ray(num_cpus=os.cpu_count())
        try:
            for latency in latencies:
                for name in variants:
                    for seed in seeds:
                        clock = Stopwatch()
                        r = None if quick else not_run(name, latency, seed, runs, caps[latency])
                        if r is None:
                            r = run_one(name, latency, seed,
                                        budget_for(name, latency, latencies, caps[latency],
                                                   quick))
                        runs.append({"latency_ms": latency, "variant": name, "seed": seed, **r,
                                     "process_s": round(clock.seconds, 1), "cpu": cpu})
                        log(f"{latency:>4g} ms {name:>9} seed {seed}: " + (
                            f"not run, its floor {r['floor_s']:.1f} s and its compute "
                            f"({r['expected_s']:.1f} s in all) pass the {caps[latency]:g} s cap"
                            if r.get("floor") else
                            f"stopped at {r['seconds']:g} s, before its first evaluation"
                            if r["env_steps"] is None else
                            f"{'reached' if r['reached'] else 'stopped'} at "
                            f"{r['env_steps']:>7,} env steps, {r['seconds']:6.1f} s, "
                            f"{r['cpu_s']:6.1f} CPU s") + (
                            f", {r['explorers']} explorer(s)" if callable(
                                VARIANTS[name].changes) and r.get("explorers") else ""),
                            flush=True)
        finally:
            ray.shutdown()
    rows = summarise(runs, costs, os.cpu_count())
    return {"config": {"quick": quick, "latencies_ms": list(latencies), "seeds": list(seeds),
                       "variants": list(variants), "cap_s": cap_s, "cap_costs": CAP_COSTS,
                       "caps_s": {f"{k:g}": v for k, v in caps.items()}, "full": FULL,
                       "budget": QUICK if quick else {**FULL, "max_time_s": cap_s},
                       "cores": os.cpu_count()},
            "costs": costs, "runs": runs, "summary": rows,
            "targets": {} if quick else check_targets(rows)}


def stamped(runs: list[dict], meta: dict) -> list[dict]:
    """`runs` measured now, each with the commit and start time of this run's `meta`, so that
    a merged ladder keeps per row where it came from."""
    return [{**r, "commit": meta["commit"], "started": meta["started"]} for r in runs]


def merged(earlier: dict, new: dict, log=print) -> dict:
    """`new` with the runs of `earlier` it did not repeat (same latency, variant and seed), the
    summary and targets recomputed: a ladder run one rung at a time. Only runs measured on the
    same CPU as `new` are kept (times from two machines do not compare); the others are
    dropped, and said so. Each kept run carries its own CPU, commit and start time
    (`run_provenance`), and the meta of each earlier run is kept (`earlier_meta`: its load, its
    machine); the bound uses the newest per-step costs."""
    done = {(r["latency_ms"], r["variant"], r["seed"]) for r in new["runs"]}
    cpu = new["runs"][0].get("cpu") if new["runs"] else None
    kept = []
    for run, where in zip(earlier["runs"], run_provenance(earlier), strict=True):
        if (run["latency_ms"], run["variant"], run["seed"]) in done:
            continue
        if cpu is not None and where["cpu"] != cpu:
            log(f"dropped: {run['latency_ms']:g} ms {run['variant']} seed {run['seed']}, "
                f"measured on {where['cpu']}, not on this machine's {cpu}")
            continue
        kept.append({**run, **where})
    runs = kept
    runs = sorted(runs + new["runs"], key=lambda r: (r["latency_ms"], r["variant"], r["seed"]))
    rows = summarise(runs, new["costs"], new["config"]["cores"])
    earlier_meta = [earlier["meta"], *earlier.get("earlier_meta", [])]
    config = {**new["config"], "latencies_ms": sorted({r["latency_ms"] for r in runs}),
              "seeds": sorted({r["seed"] for r in runs}),
              "variants": list(dict.fromkeys(r["variant"] for r in runs))}
    return {**new, "config": config, "runs": runs, "summary": rows, "earlier_meta": earlier_meta,
            "targets": {} if config["quick"] else check_targets(rows)}


def main() -> None:
    cli = parser(__doc__, "scaling", "one seed, 0 and 2 ms, no goal", seeds=True)
    cli.add_argument("--latencies", type=float, nargs="+", default=None,
                     help="env step latencies in ms (default 0 0.5 2 5)")
    cli.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    cli.add_argument("--cap-s", type=float, default=CAP_S,
                     help=f"seconds of training per run on a machine as fast as the one it "
                          f"was sized on (default {CAP_S:g}); each rung's cap grows with this "
                          "machine's bare costs")
    cli.add_argument("--add-to", action="store_true",
                     help="keep the runs already in --json that this one does not repeat")
    args = cli.parse_args()
    if any(not np.isfinite(x) or x < 0 for x in args.latencies or ()):
        cli.error("--latencies must be finite numbers >= 0 (milliseconds)")
    if not args.cap_s > 0:
        cli.error("--cap-s must be a number of seconds > 0")
    latencies = args.latencies or ((0.0, 2.0) if args.quick else LATENCIES)
    seeds = seeds_of(args, SEEDS)
    recording = Recording(packages=("stable-baselines3",))
    result = bench_scaling(latencies, seeds, args.variants, args.quick, args.cap_s)
    result["runs"] = stamped(result["runs"], recording.meta)
    if args.add_to and Path(args.json).exists():
        result = merged(json.loads(Path(args.json).read_text()), result)
    for row in result["summary"]:
        print(f"{row['latency_ms']:>4g} ms {row['variant']:>9}: {row['reached']}/{row['seeds']} "
              f"reached, median {seconds_text(row, 'median')} s "
              f"[{seconds_text(row, 'min')}-{seconds_text(row, 'max')}], bound "
              f"{row['bound_s'] or math.nan:6.1f} s, {steps_text(row):>8} env steps, "
              f"{cpu_text(row)} CPU s")
    for name, check in result["targets"].items():
        print(f"target {name}: {check['value']} ({check['variant']}) {check['target']}: "
              + ("met" if check["met"] else check.get("note", "MISSED")))
    recording.write(result, args.json)


if __name__ == "__main__":
    main()
