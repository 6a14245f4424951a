"""The scaling ladder read (bench/scaling.py runs it): medians over seeds with their lower
bounds, Amdahl's bound, the targets, the section of bench/RESULTS.md and its figure, and where
each run of a ladder assembled from several runs (`--add-to`) came from.

A run's seconds are a lower bound when it did not reach the goal: it stopped at the cap (or
its budget), or it was not run because its floor and compute passed the cap (`floor`). An order
statistic of a variant's seeds (median, min, max) is then a lower bound too, unless every
bounded run sits above it.
"""

from __future__ import annotations

import numpy as np

from course_lib.sizing import amdahl_ms


def bound_s(variant: str, latency_ms: float, env_steps: float, costs: dict,
            cores: int) -> float:
    """Amdahl's best case (`course_lib.sizing.amdahl_ms`): seconds for `env_steps` transitions."""
    name, _, n = variant.partition("-")
    layout = ({"envs": costs.get("envs_per_explorer", 1), "explorers": int(n), "cores": cores}
              if name == "apex" else {"envs": int(n)} if name == "vec" else {})
    return env_steps * amdahl_ms(costs["act_ms"], latency_ms, costs["update_ms"]
                                 * costs["updates_per_transition"], **layout) / 1_000


def layout(variant: str, runs: list[dict]) -> str:
    """The name `bound_s` reads: an Ape-X variant whose count was chosen at start-up
    ("apex-auto") as "apex-N", N the explorers its runs had most often."""
    if not variant.startswith("apex-") or explorers(variant):
        return variant
    counts = [r["explorers"] for r in runs if r.get("explorers")]
    return f"apex-{max(set(counts), key=counts.count)}" if counts else variant


def exact(value: float, runs: list[dict]) -> bool:
    """Whether an order statistic (median, min, max) of `runs`' seconds is exact: no run whose
    seconds are a lower bound sits at or below it (else the true value may be higher)."""
    return not any(not r["reached"] and r["seconds"] <= value for r in runs)


def summarise(runs: list[dict], costs: dict, cores: int) -> list[dict]:
    """Per (latency, variant): medians and ranges over seeds (`*_exact` False: the seconds
    are a lower bound), the bound, ratios to dqn and sb3 (`*_is`: "=", or "<=" when the
    reference's median is a lower bound, ">=" when this one's is, "?" when both are)."""
    rows = []
    for key in dict.fromkeys((r["latency_ms"], r["variant"]) for r in runs):
        mine = [r for r in runs if (r["latency_ms"], r["variant"]) == key]
        row = {"latency_ms": key[0], "variant": key[1], "seeds": len(mine),
               "reached": sum(r["reached"] for r in mine),
               "not_run": sum(bool(r.get("floor")) for r in mine)}
        for what in ("seconds", "env_steps", "cpu_s"):       # a floor has no CPU seconds
            values = [r[what] for r in mine if r[what] is not None]
            row |= {f"median_{what}": float(np.median(values)) if values else None,
                    f"min_{what}": min(values, default=None),
                    f"max_{what}": max(values, default=None)}
        row |= {f"{stat}_seconds_exact": exact(row[f"{stat}_seconds"], mine)
                for stat in ("median", "min", "max")}
        if key[1].startswith("apex-") and not explorers(key[1]):   # chosen per run: which
            row["explorers"] = [r.get("explorers") for r in mine]
        row["bound_s"] = (None if key[1] == "sb3"         # other code, other per-step costs
                          or row["median_env_steps"] is None  # no run got to an evaluation
                          else round(bound_s(layout(key[1], mine), key[0],
                                             row["median_env_steps"], costs, cores), 1))
        rows.append(row)
    for row in rows:
        for ref in ("dqn", "sb3"):
            other = next((r for r in rows if (r["latency_ms"], r["variant"]) ==
                          (row["latency_ms"], ref)), None)
            if other is not None:
                row[f"seconds_vs_{ref}"] = round(row["median_seconds"]
                                                 / other["median_seconds"], 2)
                row[f"seconds_vs_{ref}_is"] = {(True, True): "=", (True, False): "<=",
                                              (False, True): ">=", (False, False): "?"}[
                    row["median_seconds_exact"], other["median_seconds_exact"]]
    return rows


def check_targets(rows: list[dict]) -> dict:
    """The issue's targets, from the medians (a variant counts only if every seed reached);
    a target whose latency or reference was not run is left out. Against a reference capped
    or floored, the ratio is an upper bound: met if it meets the goal, else undecided."""
    targets, measured = {}, {(r["latency_ms"], r["variant"]) for r in rows}
    for latency, ref, goal in ((2.0, "dqn", 0.35), (2.0, "sb3", 0.35), (0.0, "dqn", 1.0)):
        if (latency, ref) not in measured:
            continue                              # a partial ladder: not checked
        apex = [r for r in rows if r["latency_ms"] == latency and explorers(r["variant"])
                and r["reached"] == r["seeds"] and f"seconds_vs_{ref}" in r]
        best = min(apex, key=lambda r: r["median_seconds"], default=None)
        value = best[f"seconds_vs_{ref}"] if best else None
        met = bool(best and value <= goal)
        targets[f"{latency:g} ms: best Ape-X time / {ref}"] = {
            "value": value, "variant": best["variant"] if best else None, "target": f"<= {goal}",
            "met": met, **({"note": f"undecided: {ref}'s median is a lower bound"}
                           if best and not met and best[f"seconds_vs_{ref}_is"] == "<=" else {})}
    for auto in (r for r in rows if r["variant"] == "apex-auto"):
        fixed = [r for r in rows if r["latency_ms"] == auto["latency_ms"]
                 and explorers(r["variant"]) and r["reached"] == r["seeds"]]
        best = min(fixed, key=lambda r: r["median_seconds"], default=None)
        value = (round(auto["median_seconds"] / best["median_seconds"], 2)
                 if best and auto["reached"] == auto["seeds"] else None)
        targets[f"{auto['latency_ms']:g} ms: apex-auto time / best apex-N"] = {
            "value": value, "variant": best["variant"] if best else None, "target": "<= 1.25",
            "met": value is not None and value <= 1.25}
    return targets


def ran(meta: dict) -> set[tuple[float, str]] | None:
    """The (latency, variant) pairs one recorded run measured, for runs that do not carry
    their own provenance (measured before `stamped`): read from its command line (a merged
    file's config lists every rung), its config filling in what the command leaves out; None
    (any pair) when neither names them."""
    words, cfg = (meta.get("command") or "").split(), meta.get("config", {})

    def values(flag: str, default: list | None) -> list[str] | None:
        if flag not in words:
            return None if default is None else [str(x) for x in default]
        rest = words[words.index(flag) + 1:]
        return rest[:next((i for i, w in enumerate(rest) if w.startswith("--")), len(rest))]
    names, latencies = values("--variants", cfg.get("variants")), values(
        "--latencies", cfg.get("latencies_ms"))
    if names is None or latencies is None:
        return None
    variants = []        # the older form: `--variants dqn sb3 vec apex --explorers 1 2 4 8`
    for v in names:
        variants += ([f"apex-{n}" for n in values("--explorers", [1, 2, 4, 8])] if v == "apex"
                     else ["vec-8"] if v == "vec" else [v])
    return {(float(lat), v) for lat in latencies for v in variants}


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
        found = next((p for pairs, p in measured if pairs is None or key in pairs), {})
        return {k: run.get(k) or found.get(k, "unknown") for k in PROVENANCE}
    return [where(r) for r in result["runs"]]


# ---------------------------------------------------------------------------------------------
# The report: a section of bench/RESULTS.md and a figure (bench/benchreport.py calls these)
# ---------------------------------------------------------------------------------------------

def seconds_text(w: dict, stat: str) -> str:
    """A row's median, min or max seconds, "≥" before one that is a lower bound (a row
    recorded before bounds were: exact)."""
    return ("" if w.get(f"{stat}_seconds_exact", True) else "≥") + f"{w[f'{stat}_seconds']:.1f}"


def cpu_text(w: dict) -> str:
    """A row's median CPU seconds ("-" when none of its seeds was run)."""
    return "-" if w["median_cpu_s"] is None else f"{w['median_cpu_s']:.1f}"


def steps_text(w: dict) -> str:
    """A row's median env steps ("-" when no seed got to an evaluation)."""
    return "-" if w["median_env_steps"] is None else f"{w['median_env_steps']:,.0f}"


def caps_text(cfg: dict) -> str:
    """The cap per run: one figure, or (a ladder sized from this machine's costs) one per rung."""
    caps = cfg.get("caps_s")
    if not caps or len(set(caps.values())) == 1:
        return f"{(next(iter(caps.values())) if caps else cfg['cap_s']):g} s"
    return ("; ".join(f"{v:g} s at {k} ms" for k, v in caps.items())
            + f" ({cfg['cap_s']:g} s scaled by this machine's bare costs)")


def section(r: dict) -> str:
    """The ladder as a table: per latency and variant, medians, ranges and the bound."""
    c, cfg = r["costs"], r["meta"]["config"]
    head = (f"Bare per-transition costs measured in the same run: act + env step "
            f"{c['act_ms']:.3f} ms, learner update {c['update_ms']:.3f} ms x "
            f"{c['updates_per_transition']:.2f} updates per transition. Seconds: median "
            "[min-max] over seeds; bound: Amdahl's best case at the run's own env steps."
            + (f" Each run stopped at {caps_text(cfg)} of training: ≥ marks a time it did "
               "not reach the goal in (a lower bound), and, in \"not run\", the runs of a "
               "repeatable reference whose floor (its env steps to the goal times the "
               "latency) and nine-tenths of its compute at the first latency passed the cap."
               if "cap_s" in cfg else "") + "\n\n")
    lines = ["| latency ms | variant | reached | not run | seconds | bound s | env steps | CPU s "
             "| vs dqn | vs sb3 |", "|---|---|---|---|---|---|---|---|---|---|"]
    for w in r["summary"]:
        bound = "" if w["bound_s"] is None else f"{w['bound_s']:.1f}"
        vs = [f"{'' if w.get(f'seconds_vs_{ref}_is', '=') == '=' else w[f'seconds_vs_{ref}_is']}"
              f"{w[f'seconds_vs_{ref}']}" if f"seconds_vs_{ref}" in w else ""
              for ref in ("dqn", "sb3")]
        lines.append(
            f"| {w['latency_ms']:g} | {w['variant']}"
            + (f" ({', '.join(map(str, w['explorers']))} explorers)" if w.get("explorers") else "")
            + f" | {w['reached']}/{w['seeds']} | "
            f"{w.get('not_run', 0)} | {seconds_text(w, 'median')} [{seconds_text(w, 'min')}-"
            f"{seconds_text(w, 'max')}] | {bound} | {steps_text(w)} | "
            f"{cpu_text(w)} | {vs[0]} | {vs[1]} |")
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


def explorers(variant: str) -> int | None:
    """N of "apex-N" (a point on the explorers axis); None for any other variant (a line)."""
    name, _, n = variant.partition("-")
    return int(n) if name == "apex" and n.isdigit() else None


def plot(plt, r: dict, out_dir) -> list:
    """Seconds to the goal against explorers, one panel per latency: Ape-X's medians with
    their range, its bound, and the single-process references as horizontal lines."""
    from matplotlib.ticker import LogLocator, ScalarFormatter

    latencies = r["meta"]["config"]["latencies_ms"]
    fig, axes = plt.subplots(1, len(latencies), figsize=(3.2 * len(latencies), 3.4),
                             sharey=True, squeeze=False)
    for ax, latency in zip(axes[0], latencies, strict=True):
        rows = [w for w in r["summary"] if w["latency_ms"] == latency]
        apex = [w for w in rows if explorers(w["variant"])]
        n = [explorers(w["variant"]) for w in apex]
        ax.errorbar(n, [w["median_seconds"] for w in apex],
                    yerr=[[w["median_seconds"] - w["min_seconds"] for w in apex],
                          [w["max_seconds"] - w["median_seconds"] for w in apex]],
                    fmt="o-", capsize=3, label="Ape-X (median, range)")
        ax.plot(n, [w["bound_s"] for w in apex], "k:", label="Ape-X bound (Amdahl)")
        for w, style in zip((w for w in rows if not explorers(w["variant"])),
                            ("--", "-.", ":", (0, (1, 3))), strict=False):
            ax.axhline(w["median_seconds"], linestyle=style, color="grey", linewidth=1)
            ax.annotate(("" if w.get("median_seconds_exact", True) else "≥") + w["variant"],
                        (max(n, default=1), w["median_seconds"]),
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
