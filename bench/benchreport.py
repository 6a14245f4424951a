"""The tables of bench/RESULTS.md and bench/figures/*.png from each benchmark's JSON (what
`make bench` writes after running them; `python -m bench.run_all --report-only` rewrites them
alone).

The report renders figures only: tables, each result's provenance line and its plots, inside
blocks marked `<!-- generated: NAME ... -->` / `<!-- end generated: NAME -->`. The reading of
each result is prose a person writes in RESULTS.md around those blocks, from the figures; a
rewrite of the report leaves it alone (and `tests/test_narrative.py` keeps measured numbers
out of it, so that it cannot drift from the JSON).

Each benchmark has a section (`SECTIONS`: title and a function of its JSON); targets come from
each JSON's "targets", plus those that compare two benchmarks of the same run
(`comparisons`: ours against Stable-Baselines3, from bench/apex.py, bench/sac.py and
bench/sb3.py).
"""

from __future__ import annotations

import importlib
import statistics
from pathlib import Path

from bench.benchlib import load_note
from bench.plots import plot_figures

SB3_TARGET = 0.5          # time to the goal, ours / SB3, at most
#: task -> (the benchmark and variant that is "ours", its name), the first one is the target
OURS = {"CartPole-v1": [("apex", "apex-4", "Ape-X, 4 explorers (CLI default)"),
                        ("apex", "apex-2", "Ape-X, 2 explorers")],
        "Pendulum-v1": [("sac", "pendulum", "SAC, 2 workers (CLI default)")]}
#: the markers around a block the report rewrites; the text around the blocks is a person's
BEGIN = "<!-- generated: {} (bench/benchreport.py rewrites this block; write outside it) -->"
END = "<!-- end generated: {} -->"


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
            if key != "meta" and isinstance(value, dict) and "seeds" in value]
    return table(rows, [("task", "task"), ("seeds", "seeds"), ("reached", "reached"),
                        ("median env steps", "median_env_steps"),
                        ("median s", "median_time_s")])


def section_ray_overhead(r: dict) -> str:
    return table(r["rows"], [("operation", "operation"), ("Ray µs", "ray_us"),
                             ("Ray calls/s", "ray_per_s"), ("plain Python µs", "reference_us"),
                             ("Ray/plain", "ray/reference")])


def section_rllib(r: dict) -> str:
    budgets = "; ".join(f"{task}: {b['max_env_steps']:,} env steps or {b['max_time_s']:g} s"
                        for task, b in r["meta"]["config"].get("budgets", {}).items())
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
    cfg, versions = r["meta"]["config"], r["meta"]["versions"]
    head = (f"Stable-Baselines3 {versions.get('stable-baselines3')} with the RL Zoo's settings "
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
    drift = r.get("diagnostics", {}).get("bare_learner_drift")
    if drift:
        parts.append("The learners' bare loops ran before the systems and again after them; "
                     "their rows above are the mean of the two: " + "; ".join(
                         f"{algo} {d['before_updates_s']:,.0f} before, {d['after_updates_s']:,.0f}"
                         f" after (after / before {d['after_over_before']:.2f})"
                         for algo, d in drift.items()) + ".")
    if "cpu_per_update" in r:
        parts.append(_cpu_per_update(r["cpu_per_update"]))
    d = r.get("diagnostics", {})
    if {"apex_learner", "apex_learner_explorers_paused"} <= d.keys():
        parts.append("What the reading of the Ape-X learner rests on (`diagnostics` in the "
                     "JSON):\n\n" + table(diagnostics(r["apex"]["learner"], d),
                                           [("", "what"), ("measured", "value")]))
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


def diagnostics(learner: dict, d: dict) -> list[dict]:
    """The figures behind the Ape-X learner's rate, as (what, value) rows: how busy it was,
    its rate against the bare loop, where its time went when profiled, one update's CPU, and
    what an explorer step and an evaluation cost."""
    bare, apex = learner["bare_updates_s"], d["apex_learner"]
    alone = d["apex_learner_explorers_paused"]["updates_s"]
    rows = [("iterations that ended with work waiting (the learner is the bottleneck at 100%)",
             f"{apex['saturated']:.0%}"),
            (f"updates/s owed by {apex['explorers']} explorers", round(apex["owed_updates_s"])),
            ("learner rate / bare loop", f"{learner['ratio']:.0%}"),
            ("learner rate with the explorers paused / bare loop", f"{alone / bare:.0%}")]
    profile = d.get("apex_learner_profile", {})
    sched, spy = profile.get("scheduler"), profile.get("py_spy")
    beside = d.get("bare_learner_beside_explorer_updates_s")
    if isinstance(sched, dict) and isinstance(spy, dict) and beside and "one_update_ms" in profile:
        update = spy.get("update (torch)", 0.0)
        ray_share = sum(v for k, v in spy.items() if "sampl" in k or "Ray" in k
                        or "publish" in k)
        one = profile["one_update_ms"]
        rows += [(f"profiled run ({profile['explorers']} explorers, "
                  "`bench/learner_profile.py`): updates/s", round(profile["updates_s"])),
                 ("training thread on a core", f"{sched['on_a_core']:.0%}"),
                 ("training thread waiting for a core", f"{sched['waiting_for_a_core']:.0%}"),
                 ("training thread asleep (waiting for work)", f"{sched['sleeping']:.0%}"),
                 ("its samples in the update", f"{update:.0%}"),
                 ("its samples sampling the buffer and publishing weights", f"{ray_share:.0%}"),
                 ("one update inside the system, CPU ms", f"{one['cpu']:.2f}"),
                 ("one update inside the system, clock ms", f"{one['wall']:.2f}"),
                 ("one update in the bare loop, ms", f"{1e3 / bare:.2f}"),
                 ("one update in the bare loop beside an explorer's work, ms",
                  f"{1e3 / beside:.2f}"),
                 ("on a core x in the update / CPU per update, updates/s",
                  round(sched["on_a_core"] * update / one["cpu"] * 1e3))]
    if "explorer_step_costs" in d:
        steps = d["explorer_step_costs"]
        rows += [(f"explorer step, bare: {k.removesuffix('_us').replace('_', ' ')}, µs",
                  round(v)) for k, v in steps.items()]
        if "priorities_us" in steps:
            rows.append(("initial priorities / explorer step",
                         f"{steps['priorities_us'] / sum(steps.values()):.0%}"))
    if "evaluation_at_goal" in d:
        e = d["evaluation_at_goal"]
        rows += [("evaluation at the goal, 10 episodes, s", f"{e['10_episodes_s']:.2f}"),
                 ("evaluation at the goal, 10 + 20 episodes, s", f"{e['30_episodes_s']:.2f}")]
    return [{"what": what, "value": value} for what, value in rows]


def section_soak(r: dict) -> str:
    v, cfg, samples = r["verdict"], r["meta"]["config"], r["samples"]
    last = samples[-1] if samples else {}
    rows = [("explorers", cfg["num_workers"]), ("cores", r["meta"]["machine"]["cores"]),
            ("minutes", cfg["minutes"]), ("buffer", cfg["buffer_size"]),
            ("stopped by", r["stopped_by"]), ("env steps", last.get("env_steps", 0)),
            ("learner updates", last.get("learner_updates", 0)),
            (f"{cfg['sample_every_s']:g}-s windows with progress",
             f"{v['windows'] - len(v['windows_without_progress_end_s'])} of {v['windows']}"),
            ("windows where only the learner moved (the explorers waited)",
             len(v.get("explorers_waited_end_s", []))),
            ("buffer full at, s", v["filled_at_s"])]
    rows += [(f"memory slope after the fill, {k.removesuffix('_mb')}, MB/min "
              f"(flat below {v['flat_mb_per_min']:g})", f"{val:+.2f}")
             for k, val in v.get("slopes_mb_per_min", {}).items()]
    return table([{"what": w, "value": x} for w, x in rows], [("", "what"), ("", "value")])


def _section(section) -> str:
    """A section function, or the name of the module whose `section` draws it, imported only
    then (those modules import Ray): a table of names imports nothing on its own."""
    return section if callable(section) else importlib.import_module(section).section


SECTIONS = {"replay": ("Replay buffers: ours against cpprb", section_replay),
            "apex": ("Ape-X against single-process DQN (CartPole-v1 to 475)", section_apex),
            "sac": ("Parallel SAC (Pendulum-v1 to -200)", section_sac),
            "sb3": ("Against Stable-Baselines3 (RL Zoo settings), same protocol", section_sb3),
            "goal_holds": ("The checkpoint holds the goal", section_goal_holds),
            "overhead": ("The cost of going distributed: each role against a bare loop",
                         section_overhead),
            "learner_feed": ("Feeding the Ape-X learner: settings that could, measured",
                             "bench.learner_feed"),
            "soak": ("Held under load: 8 explorers on 2 cores", section_soak),
            "ray_overhead": ("What Ray costs: calls and transfers against plain Python",
                             section_ray_overhead),
            "rllib": ("course_lib against RLlib, same machine, same run", section_rllib),
            "scaling": ("Where distribution pays: the env-latency ladder",
                        "bench.scaling_summary"),
            "matched": ("Pendulum against SB3 with the networks matched", "bench.matched"),
            "model": ("The scaling model, against the ladder and on paper", "bench.model"),
            "stop_rule": ("Can repeated looks fool \"reached\"? The stop rule, simulated",
                          "bench.stop_rule"),
            "chaos": ("Faults survived: actors killed, goals reached", "bench.chaos"),
            "node_loss": ("A node lost: sharded replay on 3 nodes, learning kept",
                          "bench.node_loss")}


def _meta_note(meta: dict) -> str:
    """One line on where a result came from: its commit, when, the load, the wall time."""
    commit = str(meta.get("commit", "unknown"))
    parts = [f"commit {commit if commit.startswith('unknown') else commit[:10] + commit[40:]}"]
    parts += [f"started {meta['started']}"] if meta.get("started") else []
    parts += [load_note(meta)] if meta.get("load_before") and meta.get("load_after") else []
    parts += [f"wall time {meta['wall_s']:,.0f} s"] if meta.get("wall_s") else []
    return "; ".join(parts) + "."


def header(results: dict[str, dict], quick: bool) -> str:
    """Quick mode or not, the machines and the versions the results record."""
    metas = [r["meta"] for r in results.values() if "meta" in r]
    machines = dict.fromkeys(f"{m['cores']} cores ({m['cpu']}), {m['memory_gb']} GB, {m['os']}"
                             for m in (x.get("machine") for x in metas) if m)
    versions: dict[str, dict] = {}                # package -> its versions, in order seen
    for m in metas:
        for package, version in m.get("versions", {}).items():
            versions.setdefault(package, {})[version] = None
    lines = [("QUICK SMOKE RUN: budgets too small to measure anything.\n\n" if quick else "")
             + "Written by `make bench` (bench/run_all.py) from bench/results/*.json; each "
             "section gives the commit, start time and load of its own run."]
    if machines:
        lines.append("**Machine**: " + "; ".join(machines) + ".")
    if versions:
        lines.append("**Versions**: " + ", ".join(
            f"{k} {' / '.join(found)}" for k, found in versions.items()) + ".")
    lines.append("Medians over seeds; ratios are course_lib / reference (time), lower is better.")
    return "\n\n".join(lines)


def blocks(results: dict[str, dict], quick: bool,
           figures: dict[str, list[str]]) -> dict[str, str]:
    """{block name: its text}: the header, the targets, and one block per benchmark (its
    command, tables, the line on where it came from, and its figures)."""
    out = {"header": header(results, quick)}
    versus, cross = comparisons(results)
    if "sb3" in results and "summary" in results["sb3"]:
        results = {**results, "sb3": {**results["sb3"], "versus": versus,
                                      "targets": {**results["sb3"].get("targets", {}), **cross}}}
    all_targets = {f"{name}: {t}": check for name, r in results.items()
                   for t, check in (r.get("targets") or {}).items()}
    out["targets"] = (targets_table(all_targets) if all_targets and not quick else
                      "No targets checked in this run (quick mode, or no benchmark reported one).")
    for name, (_, section) in SECTIONS.items():
        if name not in results:
            continue
        r = results[name]
        lines = [f"`python -m bench.{name}`"]
        if r.get("earlier_run"):
            lines.append("(Not re-run this time: the results of an earlier run.)")
        if "missing" in r:
            lines.append(f"Not run: {r['missing']}.")
        elif "error" in r:
            lines.append(f"Failed:\n\n```\n{r['error']}\n```")
        else:
            try:
                lines.append(_section(section)(r))
            except (KeyError, TypeError) as err:
                lines.append(f"(unexpected JSON layout: {type(err).__name__} {err})")
            lines.append(_meta_note(r.get("meta", {})))
        lines += [f"![{Path(f).stem}]({f})" for f in figures.get(name, [])]
        out[name] = "\n\n".join(lines)
    return out


def render(results: dict[str, dict], quick: bool, figures: dict[str, list[str]],
           previous: str = "") -> str:
    """`previous` (the current RESULTS.md) with each generated block rewritten between its
    markers; the text outside the markers, a person's reading of the figures, is kept. A block
    with no markers yet is added at the end under its title."""
    titles = {"header": None, "targets": "Targets",
              **{name: title for name, (title, _) in SECTIONS.items()}}
    text = previous or "# Benchmark results\n"
    for name, body in blocks(results, quick, figures).items():
        begin, end = BEGIN.format(name), END.format(name)
        if begin in text and end in text:
            head, rest = text.split(begin, 1)
            text = f"{head}{begin}\n{body}\n{end}{rest.split(end, 1)[1]}"
        else:
            title = f"## {titles[name]}\n\n" if titles[name] else ""
            text = f"{text.rstrip()}\n\n{title}{begin}\n{body}\n{end}\n"
    return text


def write_report(results: dict[str, dict], quick: bool, out: Path) -> str:
    """Draw the figures and rewrite the generated blocks of `out` (RESULTS.md)."""
    figures = plot_figures(results, out.parent / "figures")
    text = render(results, quick, figures, out.read_text() if out.exists() else "")
    out.write_text(text)
    return text
