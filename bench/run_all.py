"""Run every benchmark, then write bench/RESULTS.md and bench/figures/*.png from their JSON.

    python bench/run_all.py [--quick] [--only replay rllib ...] [--report-only]
    make bench            # the same (make bench QUICK=1 for --quick)

Each benchmark runs as its own subprocess (`python bench/<name>.py [--quick] --json
bench/results/<name>.json`) with its own RAY_TMPDIR, one after the other, so they never share
a Ray instance or the CPUs. Each measures course_lib and its reference in the same run:

| benchmark    | course_lib                      | reference                       |
| ------------ | ------------------------------- | ------------------------------- |
| replay       | numpy prioritized replay        | cpprb (C++)                     |
| apex         | Ape-X, 2 and 4 explorers        | single-process DQN              |
| sac          | parallel SAC on Pendulum        | SB3 zoo / RLlib figures (-200)  |
| ray_overhead | Ray tasks, actors, put/get      | plain calls, pickle             |
| rllib        | Ape-X; parallel SAC             | RLlib DQN; RLlib SAC            |

A benchmark whose script is missing, or that fails, is reported as such in RESULTS.md; the
others still run. `--report-only` rewrites RESULTS.md from the JSON already in bench/results.
Run it on a quiet machine: the report records the load average before and after.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
NAMES = ("replay", "apex", "sac", "ray_overhead", "rllib")
PACKAGES = ("ray", "torch", "gymnasium", "numpy", "cpprb")


# ---------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------

def run_benchmark(name: str, quick: bool, results_dir: Path, log=print) -> dict:
    """Run bench/<name>.py in a subprocess; its JSON, or {"missing"} / {"error"}."""
    script = BENCH / f"{name}.py"
    if not script.exists():
        return {"missing": f"bench/{name}.py is not in this checkout"}
    out = results_dir / f"{name}.json"
    out.unlink(missing_ok=True)
    ray_tmp = tempfile.mkdtemp(prefix=f"rt-bench-{name}-")
    env = {**os.environ, "RAY_TMPDIR": ray_tmp, "RAY_AUTH_MODE": "disabled",
           "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, str(script), "--json", str(out)] + (["--quick"] if quick else [])
    log(f"== {name}: {' '.join(cmd[1:])}")
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    seconds = round(time.perf_counter() - start, 1)
    log(proc.stdout.rstrip())
    if proc.returncode != 0 or not out.exists():
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        log(f"!! {name} failed (exit {proc.returncode}):\n{tail}")
        return {"error": f"exit code {proc.returncode}: {tail}", "wall_s": seconds}
    result = json.loads(out.read_text())
    result["wall_s"] = seconds
    return result


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


# ---------------------------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------------------------

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


SECTIONS = {"replay": ("Replay buffers: ours against cpprb", section_replay),
            "apex": ("Ape-X against single-process DQN (CartPole-v1 to 475)", section_apex),
            "sac": ("Parallel SAC (Pendulum-v1 to -200)", section_sac),
            "ray_overhead": ("What Ray costs: calls and transfers against plain Python",
                             section_ray_overhead),
            "rllib": ("course_lib against RLlib, same machine, same run", section_rllib)}


def _load_note(r: dict) -> str:
    load = r.get("config", {}).get("load_average_before_after")
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
             f"{info['os']}; 1/5/15-minute load average at the end: "
             f"{' / '.join(str(x) for x in info['load_average'])}.", "",
             "**Versions**: " + ", ".join(f"{k} {val}" for k, val in v.items()) + ".", "",
             "Medians over seeds; ratios are course_lib / reference (time), lower is better.",
             "", "## Targets", ""]
    all_targets = {f"{name}: {t}": check for name, r in results.items()
                   for t, check in (r.get("targets") or {}).items()}
    lines += [targets_table(all_targets) if all_targets and not quick else
              "No targets checked in this run (quick mode, or no benchmark reported one).", ""]
    for name, (title, section) in SECTIONS.items():
        if name not in results:
            continue
        r = results[name]
        lines += [f"## {title}", "", f"`python bench/{name}.py`", ""]
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


def plot_figures(results: dict[str, dict], out_dir: Path) -> list[str]:
    """PNG figures of the RLlib comparison curves and of Ray's call costs; relative paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    rllib = results.get("rllib", {})
    if "runs" in rllib:
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
            fig.tight_layout()
            path = out_dir / f"rllib_{task.split('-')[0].lower()}.png"
            fig.savefig(path, dpi=90)
            plt.close(fig)
            written.append(path)
    overhead = results.get("ray_overhead", {})
    if "rows" in overhead:
        fig, ax = plt.subplots(figsize=(6, 3))
        rows = overhead["rows"]
        ax.barh([r["operation"] for r in rows], [r["ray_us"] for r in rows], label="Ray")
        ax.barh([r["operation"] for r in rows], [r["reference_us"] for r in rows],
                label="plain Python")
        ax.set(xscale="log", xlabel="µs per call (log)", title="What one Ray call costs")
        ax.invert_yaxis()
        ax.legend(fontsize="small")
        fig.tight_layout()
        path = out_dir / "ray_overhead.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return [str(Path(p).relative_to(out_dir.parent)) for p in written]


def write_report(results: dict[str, dict], quick: bool, out: Path, info: dict | None = None) -> str:
    figures = plot_figures(results, out.parent / "figures")
    text = render(results, info or machine(), quick, figures)
    out.write_text(text)
    return text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="each benchmark's smoke run")
    parser.add_argument("--only", nargs="+", choices=NAMES, default=list(NAMES))
    parser.add_argument("--report-only", action="store_true",
                        help="no runs: rewrite RESULTS.md from bench/results/*.json")
    parser.add_argument("--out", type=Path, default=BENCH / "RESULTS.md")
    args = parser.parse_args(argv)
    results_dir = BENCH / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    results = {}
    for name in args.only:
        if args.report_only:
            path = results_dir / f"{name}.json"
            results[name] = (json.loads(path.read_text()) if path.exists()
                             else {"missing": f"no {path.relative_to(ROOT)}"})
        else:
            results[name] = run_benchmark(name, args.quick, results_dir)
    write_report(results, args.quick, args.out)
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    return 0 if all("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
