"""bench/RESULTS.md and bench/figures/*.png from each benchmark's JSON (what `make bench`
writes after running them; `python bench/run_all.py --report-only` rewrites it alone).

Each benchmark has a section (`SECTIONS`: title and a function of its JSON); targets come from
each JSON's "targets", plus those that compare two benchmarks of the same run
(`comparisons`: ours against Stable-Baselines3, from bench/apex.py, bench/sac.py and
bench/sb3.py).
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import statistics
from datetime import datetime
from pathlib import Path

PACKAGES = ("ray", "torch", "gymnasium", "numpy", "cpprb", "stable-baselines3")
SB3_TARGET = 0.5          # time to the goal, ours / SB3, at most
#: task -> (the benchmark and variant that is "ours", its name), the first one is the target
OURS = {"CartPole-v1": [("apex", "apex-4", "Ape-X, 4 explorers (CLI default)"),
                        ("apex", "apex-2", "Ape-X, 2 explorers")],
        "Pendulum-v1": [("sac", "pendulum", "SAC, 2 workers (CLI default)")]}


def machine() -> dict:
    """What the report says about the machine and the software."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        mem_gb = float("nan")
    versions = {"python": platform.python_version()}
    for package in PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return {"cpu": cpu, "cpus": os.cpu_count(), "memory_gb": round(mem_gb, 1),
            "os": f"{platform.system()} {platform.release()}", "versions": versions,
            "date": datetime.now().strftime("%Y-%m-%d %H:%M"),
            "load_average": [round(x, 2) for x in os.getloadavg()]}


def _fmt(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def table(rows: list[dict], columns: list[tuple[str, str]]) -> str:
    """A markdown table: `columns` holds (header, key) pairs."""
    lines = ["| " + " | ".join(h for h, _ in columns) + " |",
             "|" + "|".join(" --- " for _ in columns) + "|"]
    lines += ["| " + " | ".join(_fmt(row.get(key)) for _, key in columns) + " |"
              for row in rows]
    return "\n".join(lines)


def targets_table(targets: dict) -> str:
    rows = [{"target": name, "value": t["value"], "goal": t["target"],
             "met": "met" if t["met"] else "MISSED", "note": t.get("note", "")}
            for name, t in targets.items()]
    return table(rows, [("target", "target"), ("measured", "value"), ("goal", "goal"),
                        ("", "met"), ("note", "note")])


def section_replay(r: dict) -> str:
    parts = [table(r["buffers"], [("operation", "operation"), ("ours µs", "ours_us"),
                                  ("cpprb µs", "cpprb_us"), ("ours/cpprb", "ours/cpprb")])]
    if "transitions_per_s" in r.get("ray_ingest", {}):
        ingest = r["ray_ingest"]
        parts.append(f"Ray ingest ({ingest['explorers']} explorers, batches of "
                     f"{ingest['batch']}): {ingest['transitions_per_s']:,.0f} transitions/s.")
    return "\n\n".join(parts)


def section_apex(r: dict) -> str:
    return table(r["summary"], [("variant", "variant"), ("seeds", "seeds"),
                                ("reached", "reached"), ("median env steps", "median_env_steps"),
                                ("median s", "median_seconds"), ("s vs DQN", "seconds_vs_dqn")])


def section_sac(r: dict) -> str:
    rows = [{"task": key, **value} for key, value in r.items()
            if key != "config" and isinstance(value, dict) and "seeds" in value]
    return table(rows, [("task", "task"), ("seeds", "seeds"), ("reached", "reached"),
                        ("median env steps", "median_env_steps"),
                        ("median s", "median_time_s")])


def section_ray_overhead(r: dict) -> str:
    return table(r["rows"], [("operation", "operation"), ("Ray µs", "ray_us"),
                             ("Ray calls/s", "ray_per_s"), ("plain Python µs", "reference_us"),
                             ("Ray/plain", "ray/reference")])


def section_rllib(r: dict) -> str:
    budgets = "; ".join(f"{task}: {b['max_env_steps']:,} env steps or {b['max_time_s']:g} s"
                        for task, b in r.get("config", {}).get("budgets", {}).items())
    head = f"Budget per run: {budgets}.\n\n" if budgets else ""
    head += ("Both sides are scored by course_lib's evaluation (10 fresh episodes, 20 more to "
             "confirm a goal, the same cadence); seconds are training time, evaluation excluded "
             "on both sides.\n\n")
    return head + table(r["summary"], [
                        ("task", "task"), ("goal", "goal"), ("course_lib", "ours_name"),
                        ("reached", "ours_reached"), ("median s", "ours_median_s"),
                        ("median env steps", "ours_median_env_steps"), ("RLlib", "rllib_name"),
                        ("reached ", "rllib_reached"), ("median s ", "rllib_median_s"),
                        ("median env steps ", "rllib_median_env_steps"),
                        ("time ours/RLlib", "ratio_text")])


def _ours(results: dict, bench: str, variant: str) -> dict | None:
    """{reached, seeds, median_s, median_env_steps} of one of our variants, or None."""
    r = results.get(bench, {})
    if bench == "apex":
        row = next((x for x in r.get("summary", []) if x["variant"] == variant), None)
        return row and {"reached": row["reached"], "seeds": row["seeds"],
                        "median_s": row["median_seconds"],
                        "median_env_steps": row["median_env_steps"]}
    runs = r.get(variant, {}).get("runs")
    return runs and {"reached": sum(x["reached"] for x in runs), "seeds": len(runs),
                     "median_s": statistics.median(x["time_s"] for x in runs),
                     "median_env_steps": statistics.median(x["env_steps"] for x in runs)}


def comparisons(results: dict[str, dict]) -> tuple[list[dict], dict]:
    """Ours against SB3, per task and variant of ours (from the same run's JSON): rows for
    the sb3 section, and a target per task (ours/SB3 time <= 0.5, the CLI default's)."""
    rows, targets = [], {}
    for theirs in results.get("sb3", {}).get("summary", []):
        task = theirs["task"]
        for k, (bench, variant, name) in enumerate(OURS.get(task, [])):
            ours = _ours(results, bench, variant)
            if ours is None:
                continue
            ratio = round(ours["median_s"] / theirs["median_time_s"], 2)
            both = ours["reached"] == ours["seeds"] and theirs["reached"] == theirs["seeds"]
            rows.append({"task": task, "ours": name,
                         "ours_reached": f"{ours['reached']}/{ours['seeds']}",
                         "ours_s": ours["median_s"], "ours_steps": ours["median_env_steps"],
                         "sb3": f"SB3 {theirs['algo']}",
                         "sb3_reached": f"{theirs['reached']}/{theirs['seeds']}",
                         "sb3_s": theirs["median_time_s"],
                         "sb3_steps": theirs["median_env_steps"],
                         "ratio": ratio if both else f"{ratio} (a side missed the goal)"})
            if k == 0:
                targets[f"{task} time ours/SB3 ({name})"] = {
                    "value": ratio, "target": SB3_TARGET, "met": both and ratio <= SB3_TARGET,
                    "note": "" if both else "a seed missed the goal on one side"}
    return rows, targets


def section_sb3(r: dict) -> str:
    cfg = r.get("config", {})
    head = (f"Stable-Baselines3 {cfg.get('stable_baselines3')} with the RL Zoo's settings "
            f"(rl_zoo3 {cfg.get('rl_zoo3')}: `rl_zoo3/hyperparams/dqn.yml` CartPole-v1, "
            "`sac.yml` Pendulum-v1), on our evaluation protocol (10 episodes, 20 more to "
            "confirm, fresh seeds, our cadence, evaluation inside the clock).")
    parts = [head, table(r["summary"], [
        ("task", "task"), ("SB3", "algo"), ("goal", "goal"), ("reached", "reached"),
        ("seeds", "seeds"), ("median env steps", "median_env_steps"),
        ("median s", "median_time_s"), ("of it evaluating, s", "median_eval_s")])]
    if r.get("versus"):
        parts += ["Ours against SB3, medians of the same `make bench` run (time ratio: lower "
                  "is better):", table(r["versus"], [
                      ("task", "task"), ("ours", "ours"), ("reached", "ours_reached"),
                      ("median s", "ours_s"), ("median env steps", "ours_steps"),
                      ("SB3", "sb3"), ("reached ", "sb3_reached"), ("median s ", "sb3_s"),
                      ("median env steps ", "sb3_steps"), ("time ours/SB3", "ratio")])]
    return "\n\n".join(parts)


def section_goal_holds(r: dict) -> str:
    return ("Trained through the CLI to the goal with `--checkpoint-at-end`, then "
            "`python -m course_lib evaluate RUN --episodes 20 --seed 1000` on what was saved "
            "(holds: within 5% of the goal).\n\n" + table(r["runs"], [
                ("task", "task"), ("seed", "seed"), ("goal", "goal"), ("reached", "reached"),
                ("env steps", "env_steps"), ("s", "wall_s"),
                ("training eval", "train_eval_return"), ("episodes", "train_eval_episodes"),
                ("checkpoint, 20 fresh episodes", "checkpoint_score"), ("holds", "holds")]))


def section_overhead(r: dict) -> str:
    rows = [{"what": f"{algo} learner (updates/s)", "bare": r[algo]["learner"]["bare_updates_s"],
             "distributed": r[algo]["learner"]["distributed_updates_s"],
             "ratio": r[algo]["learner"]["ratio"]} for algo in ("apex", "sac")]
    if "learner_vs_local_replay" in r["apex"]:
        local = r["apex"]["learner_vs_local_replay"]
        rows.insert(1, {"what": "apex learner against one process sampling a local PER",
                        "bare": local["bare_updates_s"],
                        "distributed": local["distributed_updates_s"], "ratio": local["ratio"]})
    rows += [{"what": f"{e['n']} explorer(s) (env steps/s)", "bare": e["bare_steps_s"],
              "distributed": e["distributed_steps_s"], "ratio": e["ratio"]}
             for e in r["apex"]["explorers"]]
    parts = [table(rows, [("", "what"), ("bare", "bare"), ("distributed", "distributed"),
                          ("distributed/bare", "ratio")])]
    if "cpu_per_update" in r:
        parts.append(_cpu_per_update(r["cpu_per_update"]))
    d = r.get("diagnostics", {})
    if "apex_learner" in d:
        a, alone = d["apex_learner"], d["apex_learner_explorers_paused"]
        parts.append(
            f"Ape-X learner with {a['explorers']} explorers: owed {a['owed_updates_s']:,.0f} "
            f"updates/s, had work at the end of {a['saturated']:.0%} of iterations (100%: the "
            f"learner is the bottleneck); with the explorers paused it ran "
            f"{alone['updates_s']:,.0f} updates/s (Ray's cost alone, without the explorers' "
            "share of the cores).")
    if "explorer_step_costs" in d:
        c = d["explorer_step_costs"]
        parts.append("One explorer step, bare: " + ", ".join(
            f"{k.removesuffix('_us').replace('_', ' ')} {v:,.0f} µs" for k, v in c.items())
            + ".")
    if "evaluation_at_goal" in d:
        e = d["evaluation_at_goal"]
        parts.append(f"One evaluation at the goal (CartPole, 500-step episodes, one core): "
                     f"10 episodes {e['10_episodes_s']:.2f} s, 10 + 20 {e['30_episodes_s']:.2f} s.")
    if {"apex_learner", "explorer_step_costs", "evaluation_at_goal"} <= d.keys():
        parts.append(_reading(r["apex"]["learner"], d))
    return "\n\n".join(parts)


def _cpu_per_update(c: dict) -> str:
    """The CPU-per-update table: the whole Ape-X system by role against one process."""
    rows = [{"what": role, "ms": ms} for role, ms in c["by_role_ms"].items()]
    rows += [{"what": "**the whole system**", "ms": c["apex_system_ms"]},
             {"what": "one process doing the same work (env steps, n-step, local PER, update)",
              "ms": c["single_process_ms"]}]
    apart = ", ".join(f"{k} {v:.2f} ms" for k, v in c.get("not_counted_ms", {}).items())
    return ("CPU milliseconds per learner update, Ape-X with "
            f"{c['explorers']} explorers (every process, read from the OS over the learner's "
            "steady window):\n\n" + table(rows, [("", "what"), ("CPU ms / update", "ms")])
            + f"\n\nWhole system / one process: **{c['ratio']:.2f}** (target <= 1.5)."
            + (f" Not counted (not part of the run): {apart}." if apart else ""))


def _reading(learner: dict, d: dict) -> str:
    """What the diagnostics say about a missed Ape-X target, from the numbers themselves."""
    bare, alone = learner["bare_updates_s"], d["apex_learner_explorers_paused"]["updates_s"]
    steps = d["explorer_step_costs"]
    priority_share = steps["priorities_us"] / sum(steps.values())
    saturated = d["apex_learner"]["saturated"]
    verb = "is" if saturated >= 0.9 else "is not"
    text = (f"**Reading.** The Ape-X learner {verb} the bottleneck (it had work in "
            f"{saturated:.0%} of iterations). "
            f"Inside the system it runs at {learner['ratio']:.0%} of a bare update loop; with the "
            f"explorers paused at {alone / bare:.0%}")
    profile, beside = d.get("apex_learner_profile", {}), d.get(
        "bare_learner_beside_explorer_updates_s")
    sched, spy = profile.get("scheduler"), profile.get("py_spy")
    if isinstance(sched, dict) and isinstance(spy, dict) and beside and "one_update_ms" in profile:
        update = spy.get("update (torch)", 0.0)
        ray_share = sum(v for k, v in spy.items() if "sampl" in k or "Ray" in k
                        or "publish" in k)
        one = profile["one_update_ms"]
        predicted = sched["on_a_core"] * update / one["cpu"] * 1e3
        text += (
            f". Where the rest goes, measured in a run with {profile['explorers']} explorers "
            f"(`bench/learner_profile.py`, {profile['updates_s']:,.0f} updates/s under the "
            f"profiler): the learner's training thread ran on a core {sched['on_a_core']:.0%} of "
            f"the time, waited for a core {sched['waiting_for_a_core']:.0%} (the explorers and "
            f"Ray's own processes had both) and slept {sched['sleeping']:.0%} (waiting for "
            f"work from the driver). Of its samples, {update:.0%} were in the update and "
            f"{ray_share:.0%} in sampling its buffer and publishing weights. And one update "
            f"costs more CPU inside the system: {one['cpu']:.2f} ms of "
            f"CPU ({one['wall']:.2f} ms on the clock) against {1e3 / bare:.2f} ms in the bare "
            f"loop, and {1e3 / beside:.2f} ms in the bare loop beside one explorer's work in "
            f"another process (fresh batches from the replay instead of one batch, the "
            f"explorers' adds stored by its replay thread, and its caches shared with the "
            f"explorers and Ray's threads). Together: {sched['on_a_core']:.2f} x {update:.2f} / "
            f"{one['cpu']:.2f} ms "
            f"= {predicted:,.0f} updates/s, against {profile['updates_s']:,.0f} measured. ")
    else:
        text += (f", so about {1 - alone / bare:.0%} of its rate goes to the pipeline around "
                 "the update (storing the explorers' adds, publishing weights and snapshots, "
                 "sharing 2 cores with the driver and evaluator) and the "
                 "explorers' share of the cores takes the rest. ")
    return text + (
        f"Initial priorities are {priority_share:.0%} of an explorer step and the evaluation "
        f"at the goal takes {d['evaluation_at_goal']['30_episodes_s']:.2f} s: neither explains "
        "a missed time target.")


def section_soak(r: dict) -> str:
    v, cfg, samples = r["verdict"], r["config"], r["samples"]
    last = samples[-1] if samples else {}
    slopes = ", ".join(f"{k.removesuffix('_mb')} {val:+.2f}"
                       for k, val in v.get("slopes_mb_per_min", {}).items())
    return (f"Ape-X, {cfg['num_workers']} explorers on {cfg['cpus']} cores for "
            f"{cfg['minutes']:g} min (buffer {cfg['buffer_size']:,}; stopped by "
            f"{r['stopped_by']}): {last.get('env_steps', 0):,} env steps, "
            f"{last.get('learner_updates', 0):,} learner updates. Progress in "
            f"{v['windows'] - len(v['windows_without_progress_end_s'])} of {v['windows']} "
            f"{cfg['sample_every_s']:g}-s windows (in "
            f"{len(v.get('explorers_waited_end_s', []))} only the learner moved: the explorers "
            f"waited for it). Buffer full at {v['filled_at_s']} s; "
            f"memory slopes after that (MB/min, flat below {v['flat_mb_per_min']:g}): "
            f"{slopes or 'not measured (too few samples after the fill)'}.")


SECTIONS = {"replay": ("Replay buffers: ours against cpprb", section_replay),
            "apex": ("Ape-X against single-process DQN (CartPole-v1 to 475)", section_apex),
            "sac": ("Parallel SAC (Pendulum-v1 to -200)", section_sac),
            "sb3": ("Against Stable-Baselines3 (RL Zoo settings), same protocol", section_sb3),
            "goal_holds": ("The checkpoint holds the goal", section_goal_holds),
            "overhead": ("The cost of going distributed: each role against a bare loop",
                         section_overhead),
            "soak": ("Held under load: 8 explorers on 2 cores", section_soak),
            "ray_overhead": ("What Ray costs: calls and transfers against plain Python",
                             section_ray_overhead),
            "rllib": ("course_lib against RLlib, same machine, same run", section_rllib),
            "scaling": ("Where distribution pays: the env-latency ladder",
                        lambda r: _scaling().section(r)),
            "matched": ("Pendulum against SB3 with the networks matched",
                        lambda r: _bench("matched").section(r))}


def _scaling():
    """bench/scaling.py, imported when its section or figure is drawn (it imports Ray)."""
    return _bench("scaling")


def _bench(name: str):
    """bench/<name>.py, imported when its section or figure is drawn (they import Ray)."""
    import importlib

    return importlib.import_module(name)


def _load_note(r: dict) -> str:
    load = r.get("config", {}).get("load_average_before_after")
    if load is None and "load_before" in r:       # newer benchmarks: top-level, 1-min first
        load = [x[0] if isinstance(x, list) else x for x in (r["load_before"], r["load_after"])]
    wall = f"{r['wall_s']:,.0f} s" if "wall_s" in r else ""
    note = f"1-minute load average before/after: {load[0]:.1f} / {load[1]:.1f}" if load else ""
    return "; ".join(x for x in (note, f"wall time {wall}" if wall else "") if x)


def render(results: dict[str, dict], info: dict, quick: bool, figures: list[str]) -> str:
    """RESULTS.md from each benchmark's JSON (or its missing/error record)."""
    v = info["versions"]
    lines = ["# Benchmark results", "",
             f"{'QUICK SMOKE RUN: budgets too small to measure anything. ' if quick else ''}"
             f"Written by `make bench` (bench/run_all.py) on {info['date']}.", "",
             f"**Machine**: {info['cpus']} CPUs ({info['cpu']}), {info['memory_gb']} GB, "
             f"{info['os']}; 1/5/15-minute load average at the end of the run: "
             f"{' / '.join(str(x) for x in info['load_average'])}.", "",
             "**Versions**: " + ", ".join(f"{k} {val}" for k, val in v.items()) + ".", "",
             "Medians over seeds; ratios are course_lib / reference (time), lower is better.",
             "", "## Targets", ""]
    versus, cross = comparisons(results)
    if "sb3" in results and "summary" in results["sb3"]:
        results = {**results, "sb3": {**results["sb3"], "versus": versus,
                                      "targets": {**results["sb3"].get("targets", {}), **cross}}}
    all_targets = {f"{name}: {t}": check for name, r in results.items()
                   for t, check in (r.get("targets") or {}).items()}
    lines += [targets_table(all_targets) if all_targets and not quick else
              "No targets checked in this run (quick mode, or no benchmark reported one).", ""]
    for name, (title, section) in SECTIONS.items():
        if name not in results:
            continue
        r = results[name]
        lines += [f"## {title}", "", f"`python bench/{name}.py`", ""]
        if r.get("earlier_run"):
            lines += ["(Not re-run this time: the results of an earlier run.)", ""]
        if "missing" in r:
            lines += [f"Not run: {r['missing']}.", ""]
        elif "error" in r:
            lines += ["Failed:", "", "```", r["error"], "```", ""]
        else:
            try:
                lines += [section(r), ""]
            except (KeyError, TypeError) as err:
                lines += [f"(unexpected JSON layout: {type(err).__name__} {err})", ""]
            note = _load_note(r)
            lines += [note + ".", ""] if note else []
    if figures:
        lines += ["## Figures", ""] + [f"![{Path(f).stem}]({f})" for f in figures] + [""]
    return "\n".join(lines)


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    fig.clf()
    return path


def _plot_rllib(plt, rllib: dict, out_dir: Path) -> list[Path]:
    written = []
    for task in dict.fromkeys(r["task"] for r in rllib["runs"]):
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
        for run in (r for r in rllib["runs"] if r["task"] == task):
            curve = [p for p in run["curve"] if p[2] == p[2]]      # drop NaN returns
            label = f"{run['name']} (seed {run['seed']})"
            axes[0].plot([p[0] for p in curve], [p[2] for p in curve], ".-", label=label)
            axes[1].plot([p[1] for p in curve], [p[2] for p in curve], ".-", label=label)
        goal = next(row["goal"] for row in rllib["summary"] if row["task"] == task)
        for ax, xlabel in zip(axes, ("training seconds (evaluation excluded)", "env steps"),
                              strict=True):
            ax.axhline(goal, color="grey", linestyle="--", linewidth=1)
            ax.set(xlabel=xlabel, ylabel="evaluation return", title=task)
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize="small")
        written.append(_save(fig, out_dir / f"rllib_{task.split('-')[0].lower()}.png"))
        plt.close(fig)
    return written


def _plot_ray_overhead(plt, overhead: dict, out_dir: Path) -> list[Path]:
    fig, ax = plt.subplots(figsize=(6, 3))
    rows = overhead["rows"]
    ax.barh([r["operation"] for r in rows], [r["ray_us"] for r in rows], label="Ray")
    ax.barh([r["operation"] for r in rows], [r["reference_us"] for r in rows],
            label="plain Python")
    ax.set(xscale="log", xlabel="µs per call (log)", title="What one Ray call costs")
    ax.invert_yaxis()
    ax.legend(fontsize="small")
    path = _save(fig, out_dir / "ray_overhead.png")
    plt.close(fig)
    return [path]


def _plot_overhead(plt, r: dict, out_dir: Path) -> list[Path]:
    """Bare against distributed: the learners' updates/s, the explorers' env steps/s."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    groups = [("Ape-X learner", r["apex"]["learner"]), ("SAC learner", r["sac"]["learner"])]
    explorers = [(f"{e['n']} explorer{'s' if e['n'] > 1 else ''}", e)
                 for e in r["apex"]["explorers"]]
    for ax, rows, unit, title in ((axes[0], groups, "updates", "learner updates/s"),
                                  (axes[1], explorers, "steps", "explorer env steps/s")):
        x = range(len(rows))
        ax.bar([i - 0.2 for i in x], [row[f"bare_{unit}_s"] for _, row in rows], 0.4,
               label="bare loop")
        ax.bar([i + 0.2 for i in x], [row[f"distributed_{unit}_s"] for _, row in rows], 0.4,
               label="inside the distributed system")
        for i, (_, row) in zip(x, rows, strict=True):
            ax.annotate(f"{row['ratio']:.2f}x", (i + 0.2, row[f"distributed_{unit}_s"]),
                        ha="center", va="bottom", fontsize="small")
        ax.set_xticks(list(x), [name for name, _ in rows])
        ax.set(title=title)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize="small")
    path = _save(fig, out_dir / "overhead.png")
    plt.close(fig)
    return [path]


def _plot_soak(plt, r: dict, out_dir: Path) -> list[Path]:
    """Memory and progress against time; the buffer's fill as a vertical line."""
    samples = r["samples"]
    t = [s["t_s"] / 60 for s in samples]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for key, label in (("driver_rss_mb", "driver RSS"), ("replay_rss_mb", "replay actor RSS"),
                       ("learner_rss_mb", "learner actor RSS"),
                       ("object_store_mb", "object store")):
        if key not in samples[0]:                 # replay_rss_mb: runs before the replay moved
            continue
        axes[0].plot(t, [s[key] for s in samples], ".-", label=label)
    axes[0].set(xlabel="minutes", ylabel="MB", title="memory")
    axes[1].plot(t, [s["env_steps"] for s in samples], ".-", label="env steps")
    axes[1].plot(t, [s["learner_updates"] for s in samples], ".-", label="learner updates")
    axes[1].set(xlabel="minutes", title="progress")
    filled = r["verdict"].get("filled_at_s")
    for ax in axes:
        if filled is not None:
            ax.axvline(filled / 60, color="grey", linestyle="--", linewidth=1)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    path = _save(fig, out_dir / "soak.png")
    plt.close(fig)
    return [path]


#: benchmark -> (a key its JSON has when it ran, the function that draws its figures)
FIGURES = {"rllib": ("runs", _plot_rllib), "ray_overhead": ("rows", _plot_ray_overhead),
           "overhead": ("apex", _plot_overhead), "soak": ("samples", _plot_soak),
           "scaling": ("summary", lambda plt, r, out: _scaling().plot(plt, r, out))}


def plot_figures(results: dict[str, dict], out_dir: Path) -> list[str]:
    """The PNG figures of the benchmarks that ran; paths relative to bench/."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (key, plot) in FIGURES.items():
        if key in results.get(name, {}):
            written += plot(plt, results[name], out_dir)
    return [str(Path(p).relative_to(out_dir.parent)) for p in written]


def write_report(results: dict[str, dict], quick: bool, out: Path, info: dict | None = None) -> str:
    figures = plot_figures(results, out.parent / "figures")
    text = render(results, info or machine(), quick, figures)
    out.write_text(text)
    return text


