"""bench/figures/*.png from each benchmark's JSON (bench/benchreport.py puts each figure in
its benchmark's block of RESULTS.md)."""

from __future__ import annotations

from pathlib import Path

from bench import scaling_summary


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
           "scaling": ("summary", scaling_summary.plot)}


def plot_figures(results: dict[str, dict], out_dir: Path) -> dict[str, list[str]]:
    """The PNG figures of the benchmarks that ran: {benchmark: paths relative to bench/}."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, (key, plot) in FIGURES.items():
        if key in results.get(name, {}):
            written[name] = [str(Path(p).relative_to(out_dir.parent))
                             for p in plot(plt, results[name], out_dir)]
    return written
