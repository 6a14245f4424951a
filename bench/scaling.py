"""Where distribution pays: time, env steps and CPU to CartPole 475 as each env step gets slower.

    python -m bench.scaling [--quick] [--latencies 0 0.5 2 5] [--explorers 1 2 4 8]
                            [--seeds 0 1 2 3 4] [--variants dqn sb3 vec apex] [--add-to]

A training env step waits `env_latency_ms` (`envs.Latency`: a sleep, no CPU), as an env whose
cost is paid elsewhere would: a simulator on another machine, a robot, a game server.
Evaluation envs stay fast. For each latency, one after the other in one Ray instance:

| variant  | what                                                                          |
| -------- | ----------------------------------------------------------------------------- |
| dqn      | the workbook's single-process DQN (the same learner as Ape-X), one env         |
| sb3      | Stable-Baselines3 DQN, RL Zoo settings (`bench/sb3.py`), its env with the latency |
| vec-N    | single-process DQN stepping N envs as one batch: one forward pass, and the N    |
|          | requests wait together (latency paid once per batch, as with async env calls)  |
| apex-N   | Ape-X with N explorers (CLI defaults otherwise: each steps `num_envs` envs)     |

Each run stops at a greedy mean return >= 475 (10 episodes, confirmed on 20 fresh ones that
meet it on their own) or at its budget. Reported per (latency, variant): the median and the
range over seeds of seconds (wall clock from the trainer's creation to the end of the
evaluation that stopped it), env steps, and CPU seconds (this process and every process it
started: Ray's daemons, actors and idle workers, read from the OS at the stopping row).

The bound beside each curve is Amdahl's, from per-step costs measured in the same run
(bare, one process): per transition, one process pays t_act + L + u t_update (u: updates per
transition); N explorers, each stepping k envs as a batch (one wait of L per batch step), at
best max((t_act + L / k) / N, u t_update, (t_act + u t_update) / cores), times the run's
own env steps to the goal (`course_lib.sizing.amdahl_ms`, the workbook's one bound;
`bench/model.py` sets the model's best count against this ladder's). A cheap env (L = 0)
leaves nothing to win; an env whose cost is paid elsewhere is where N explorers pay.

Targets (issue "Distribution that pays"): at 2 ms, the best apex-N reaches 475 in <= 0.35x
the time of dqn and of sb3 (medians); at 0 ms, the best apex-N no slower than dqn.
`--quick`: one seed, two latencies, small budgets, no goal: the script works, nothing more.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import psutil
import ray

from bench.benchlib import Recording, Stopwatch, machine, parser, private_ray_tmp
from bench.overhead import bare_learner_rate, explorer_step_costs
from course_lib import init_ray
from course_lib.apex import ApexConfig, ApexTrainer
from course_lib.dqn import DQNConfig, DQNTrainer
from course_lib.sizing import amdahl_ms

GOAL = 475.0
LATENCIES = (0.0, 0.5, 2.0, 5.0)
EXPLORERS = (1, 2, 4, 8)
VEC_ENVS = 8                       # envs of the vec-N reference (one batched forward)
FULL = {"target_return": GOAL, "max_env_steps": 150_000, "max_time_s": 600.0}
QUICK = {"target_return": None, "max_env_steps": 2_000, "max_time_s": 60.0}


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


def variant_config(variant: str, latency_ms: float, seed: int, budget: dict):
    """(train function, config) of one of our variants at one latency."""
    name, _, n = variant.partition("-")
    common = {**budget, "seed": seed, "env_latency_ms": latency_ms}
    if name == "apex":
        return ApexTrainer.train, ApexConfig().updated({**common, "num_workers": int(n)})
    if name == "vec":
        return DQNTrainer.train, DQNConfig().updated({**common, "num_envs": int(n)})
    return DQNTrainer.train, DQNConfig().updated(common)


def run_ours(variant: str, latency_ms: float, seed: int, budget: dict) -> dict:
    """One run of our trainers; what it took to the stopping row."""
    train, cfg = variant_config(variant, latency_ms, seed, budget)
    cpu_at_row: list[dict] = []
    cpu0 = cpu_seconds_tree()
    result = train(cfg, progress=lambda row: cpu_at_row.append(cpu_seconds_tree()))
    last = result.last
    return {"reached": result.stopped_by == "eval_return", "env_steps": int(last["env_steps"]),
            "seconds": round(float(last["wall_s"]), 1),
            "cpu_s": round(cpu_used(cpu0, cpu_at_row[-1]), 1),
            "eval_return": float(last["eval_return"])}


def run_sb3(latency_ms: float, seed: int, budget: dict) -> dict:
    """One SB3 DQN run (RL Zoo settings, our evaluation and stop rule) at this latency."""
    from bench import sb3  # imports Stable-Baselines3: only when its variant runs

    cpu0 = cpu_seconds_tree()
    r = sb3.run_once("CartPole-v1", seed, budget["target_return"] is None,
                     latency_ms=latency_ms, budget=budget)
    return {"reached": r["reached"], "env_steps": int(r["env_steps"]), "seconds": r["time_s"],
            "cpu_s": round(cpu_used(cpu0, cpu_seconds_tree()), 1),
            "eval_return": r["eval_return"]}


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


def bound_s(variant: str, latency_ms: float, env_steps: float, costs: dict,
            cores: int) -> float:
    """Amdahl's best case (`course_lib.sizing.amdahl_ms`): seconds for `env_steps` transitions."""
    name, _, n = variant.partition("-")
    layout = ({"envs": costs.get("envs_per_explorer", 1), "explorers": int(n), "cores": cores}
              if name == "apex" else {"envs": int(n)} if name == "vec" else {})
    return env_steps * amdahl_ms(costs["act_ms"], latency_ms, costs["update_ms"]
                                 * costs["updates_per_transition"], **layout) / 1_000


def summarise(runs: list[dict], costs: dict, cores: int) -> list[dict]:
    """Per (latency, variant): medians and ranges over seeds, the bound, ratios to dqn/sb3."""
    rows = []
    for key in dict.fromkeys((r["latency_ms"], r["variant"]) for r in runs):
        mine = [r for r in runs if (r["latency_ms"], r["variant"]) == key]
        row = {"latency_ms": key[0], "variant": key[1], "seeds": len(mine),
               "reached": sum(r["reached"] for r in mine)}
        for what in ("seconds", "env_steps", "cpu_s"):
            values = [r[what] for r in mine]
            row |= {f"median_{what}": float(np.median(values)),
                    f"min_{what}": float(min(values)), f"max_{what}": float(max(values))}
        row["bound_s"] = (None if key[1] == "sb3" else    # other code, other per-step costs
                          round(bound_s(key[1], key[0], row["median_env_steps"], costs, cores), 1))
        rows.append(row)
    for row in rows:
        for ref in ("dqn", "sb3"):
            other = next((r for r in rows if (r["latency_ms"], r["variant"]) ==
                          (row["latency_ms"], ref)), None)
            if other is not None:
                row[f"seconds_vs_{ref}"] = round(row["median_seconds"]
                                                 / other["median_seconds"], 2)
    return rows


def check_targets(rows: list[dict]) -> dict:
    """The issue's targets, from the medians (a variant counts only if every seed reached);
    a target whose latency or reference was not run is left out."""
    targets, measured = {}, {(r["latency_ms"], r["variant"]) for r in rows}
    for latency, ref, goal in ((2.0, "dqn", 0.35), (2.0, "sb3", 0.35), (0.0, "dqn", 1.0)):
        if (latency, ref) not in measured:
            continue                              # a partial ladder: not checked
        apex = [r for r in rows if r["latency_ms"] == latency and r["variant"].startswith("apex")
                and r["reached"] == r["seeds"] and f"seconds_vs_{ref}" in r]
        best = min(apex, key=lambda r: r["median_seconds"], default=None)
        targets[f"{latency:g} ms: best Ape-X time / {ref}"] = {
            "value": best[f"seconds_vs_{ref}"] if best else None,
            "variant": best["variant"] if best else None, "target": f"<= {goal}",
            "met": bool(best and best[f"seconds_vs_{ref}"] <= goal)}
    return targets


def bench_scaling(latencies, explorers, seeds, variants, quick: bool, log=print) -> dict:
    budget = QUICK if quick else FULL
    costs = step_costs(1.0 if quick else 4.0, 1_000 if quick else 5_000)
    log("bare costs: " + ", ".join(f"{k} {v:.3f}" for k, v in costs.items()))
    names = [v for v in ("dqn", "sb3") if v in variants]
    names += [f"vec-{VEC_ENVS}"] if "vec" in variants else []
    names += [f"apex-{n}" for n in explorers] if "apex" in variants else []
    runs, cpu = [], machine()["cpu"]
    with private_ray_tmp():
        init_ray(num_cpus=os.cpu_count())
        try:
            for latency in latencies:
                for variant in names:
                    for seed in seeds:
                        clock = Stopwatch()
                        r = (run_sb3(latency, seed, budget) if variant == "sb3"
                             else run_ours(variant, latency, seed, budget))
                        runs.append({"latency_ms": latency, "variant": variant, "seed": seed,
                                     **r, "process_s": round(clock.seconds, 1), "cpu": cpu})
                        log(f"{latency:>4g} ms {variant:>7} seed {seed}: "
                            f"{'reached' if r['reached'] else 'budget '} at "
                            f"{r['env_steps']:>7,} env steps, {r['seconds']:6.1f} s, "
                            f"{r['cpu_s']:6.1f} CPU s", flush=True)
        finally:
            ray.shutdown()
    rows = summarise(runs, costs, os.cpu_count())
    return {"config": {"quick": quick, "latencies_ms": list(latencies), "seeds": list(seeds),
                       "variants": names, "budget": budget, "cores": os.cpu_count()},
            "costs": costs, "runs": runs, "summary": rows,
            "targets": {} if quick else check_targets(rows)}


def ran(meta: dict) -> set[tuple[float, str]]:
    """The (latency, variant) pairs one recorded run measured: read from its command line (a
    merged file's config lists every rung), or its config when it recorded no command."""
    words = (meta.get("command") or "").split()
    if not words:
        return {(lat, v) for lat in meta["config"]["latencies_ms"]
                for v in meta["config"]["variants"]}

    def values(flag: str, default: list) -> list[str]:
        if flag not in words:
            return [str(x) for x in default]
        rest = words[words.index(flag) + 1:]
        return rest[:next((i for i, w in enumerate(rest) if w.startswith("--")), len(rest))]
    variants = []
    for v in values("--variants", ["dqn", "sb3", "vec", "apex"]):
        variants += ([f"apex-{n}" for n in values("--explorers", list(EXPLORERS))] if v == "apex"
                     else [f"vec-{VEC_ENVS}"] if v == "vec" else [v])
    return {(float(lat), v) for lat in values("--latencies", list(LATENCIES)) for v in variants}


#: what each run records of where and when it was measured
PROVENANCE = ("cpu", "commit", "started")


def run_provenance(result: dict) -> list[dict]:
    """{cpu, commit, started} of each run of `result`: its own fields, or for a run recorded
    before runs carried them, those of the newest recorded run (`meta`, then `earlier_meta`)
    that measured its latency and variant ("unknown" when none did)."""
    metas = [result["meta"], *result.get("earlier_meta", [])]
    measured = [(ran(m), {"cpu": m["machine"]["cpu"], "commit": m.get("commit", "unknown"),
                          "started": m.get("started", "unknown")}) for m in metas]

    def where(run: dict) -> dict:
        key = (run["latency_ms"], run["variant"])
        found = next((p for pairs, p in measured if key in pairs), {})
        return {k: run.get(k) or found.get(k, "unknown") for k in PROVENANCE}
    return [where(r) for r in result["runs"]]


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


# ---------------------------------------------------------------------------------------------
# The report: a section of bench/RESULTS.md and a figure (bench/benchreport.py calls these)
# ---------------------------------------------------------------------------------------------

def section(r: dict) -> str:
    """The ladder as a table: per latency and variant, medians, ranges and the bound."""
    c = r["costs"]
    head = (f"Bare per-transition costs measured in the same run: act + env step "
            f"{c['act_ms']:.3f} ms, learner update {c['update_ms']:.3f} ms x "
            f"{c['updates_per_transition']:.2f} updates per transition. Seconds: median "
            "[min-max] over seeds; bound: Amdahl's best case at the run's own env steps.\n\n")
    lines = ["| latency ms | variant | reached | seconds | bound s | env steps | CPU s "
             "| vs dqn | vs sb3 |", "|---|---|---|---|---|---|---|---|---|"]
    for w in r["summary"]:
        bound = "" if w["bound_s"] is None else f"{w['bound_s']:.1f}"
        lines.append(
            f"| {w['latency_ms']:g} | {w['variant']} | {w['reached']}/{w['seeds']} | "
            f"{w['median_seconds']:.1f} [{w['min_seconds']:.1f}-{w['max_seconds']:.1f}] | "
            f"{bound} | {w['median_env_steps']:,.0f} | {w['median_cpu_s']:.1f} | "
            f"{w.get('seconds_vs_dqn', '')} | {w.get('seconds_vs_sb3', '')} |")
    tail = ""
    if r.get("earlier_meta"):                     # rungs run at different times (--add-to)
        metas = [*reversed(r["earlier_meta"]), r["meta"]]
        tail = ("\n\nRun one rung at a time; 1-minute load average before/after each: " +
                ", ".join(f"{m['load_before'][0]:.1f}/{m['load_after'][0]:.1f}"
                          for m in metas) + ".\n\n" + provenance_note(r))
    return head + "\n".join(lines) + tail


def provenance_note(r: dict) -> str:
    """Which rows were measured when, from which commit and on which CPU (`run_provenance`)."""
    groups: dict[tuple, dict] = {}
    for run, where in zip(r["runs"], run_provenance(r), strict=True):
        rows = groups.setdefault((where["started"], where["commit"], where["cpu"]), {})
        rows.setdefault(run["latency_ms"], {})[run["variant"]] = None
    short = {c: c if c.startswith("unknown") else c[:10] + c[40:] for _, c, _ in groups}
    parts = [f"started {started}, commit {short[commit]}, {cpu}: "
             + "; ".join(f"{lat:g} ms " + ", ".join(variants) for lat, variants in rows.items())
             for (started, commit, cpu), rows in sorted(groups.items())]
    return "Where each row's runs come from (`runs` in the JSON):\n\n" + "\n".join(
        f"- {p}" for p in parts)


def plot(plt, r: dict, out_dir) -> list:
    """Seconds to the goal against explorers, one panel per latency: Ape-X's medians with
    their range, its bound, and the single-process references as horizontal lines."""
    from matplotlib.ticker import LogLocator, ScalarFormatter

    latencies = r["meta"]["config"]["latencies_ms"]
    fig, axes = plt.subplots(1, len(latencies), figsize=(3.2 * len(latencies), 3.4),
                             sharey=True, squeeze=False)
    for ax, latency in zip(axes[0], latencies, strict=True):
        rows = [w for w in r["summary"] if w["latency_ms"] == latency]
        apex = [w for w in rows if w["variant"].startswith("apex")]
        n = [int(w["variant"].split("-")[1]) for w in apex]
        ax.errorbar(n, [w["median_seconds"] for w in apex],
                    yerr=[[w["median_seconds"] - w["min_seconds"] for w in apex],
                          [w["max_seconds"] - w["median_seconds"] for w in apex]],
                    fmt="o-", capsize=3, label="Ape-X (median, range)")
        ax.plot(n, [w["bound_s"] for w in apex], "k:", label="Ape-X bound (Amdahl)")
        for w, style in zip((w for w in rows if not w["variant"].startswith("apex")),
                            ("--", "-.", ":"), strict=False):
            ax.axhline(w["median_seconds"], linestyle=style, color="grey", linewidth=1)
            ax.annotate(w["variant"], (max(n, default=1), w["median_seconds"]),
                        fontsize="small", ha="right", va="bottom")
        ax.set(xscale="log", yscale="log", xlabel="explorers", title=f"env step + {latency:g} ms")
        ax.minorticks_off()
        ax.set_xticks(n, [str(k) for k in n])
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("seconds to 475 (log)")
    axes[0][0].legend(fontsize="small")
    fig.tight_layout()
    path = out_dir / "scaling.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return [path]


def main() -> None:
    cli = parser(__doc__, "scaling", "one seed, 0 and 2 ms, no goal")
    cli.add_argument("--latencies", type=float, nargs="+", default=None,
                     help="env step latencies in ms (default 0 0.5 2 5)")
    cli.add_argument("--explorers", type=int, nargs="+", default=list(EXPLORERS))
    cli.add_argument("--seeds", type=int, nargs="+", default=None, help="default: 0-4")
    cli.add_argument("--variants", nargs="+", default=["dqn", "sb3", "vec", "apex"],
                     choices=["dqn", "sb3", "vec", "apex"])
    cli.add_argument("--add-to", action="store_true",
                     help="keep the runs already in --json that this one does not repeat")
    args = cli.parse_args()
    if any(not np.isfinite(x) or x < 0 for x in args.latencies or ()):
        cli.error("--latencies must be finite numbers >= 0 (milliseconds)")
    latencies = args.latencies or ((0.0, 2.0) if args.quick else LATENCIES)
    seeds = args.seeds or ((0,) if args.quick else (0, 1, 2, 3, 4))
    recording = Recording(packages=("stable-baselines3",))
    result = bench_scaling(latencies, args.explorers, seeds, args.variants, args.quick)
    result["runs"] = stamped(result["runs"], recording.meta)
    if args.add_to and Path(args.json).exists():
        result = merged(json.loads(Path(args.json).read_text()), result)
    for row in result["summary"]:
        print(f"{row['latency_ms']:>4g} ms {row['variant']:>7}: {row['reached']}/{row['seeds']} "
              f"reached, median {row['median_seconds']:6.1f} s "
              f"[{row['min_seconds']:.1f}-{row['max_seconds']:.1f}], bound "
              f"{row['bound_s'] or math.nan:6.1f} s, {row['median_env_steps']:>8,.0f} env steps, "
              f"{row['median_cpu_s']:6.1f} CPU s")
    for name, check in result["targets"].items():
        print(f"target {name}: {check['value']} ({check['variant']}) {check['target']}: "
              + ("met" if check["met"] else "MISSED"))
    recording.write(result, args.json)


if __name__ == "__main__":
    main()
