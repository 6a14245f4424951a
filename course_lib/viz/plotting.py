"""Plotting helpers shared by the notebooks: learning curves, comparisons, scaling, the ladder.

The Gantt chart of tasks and actor calls is `timeline.plot_timeline`.

Each function draws on `ax` (a new figure when None) and returns the axes, so a notebook can
combine them or restyle them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np


def _axes(ax, figsize=(6, 3.5)):
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def plot_learning_curves(curves: Mapping[str, tuple[Sequence[float], Sequence[float]]], *,
                         xlabel: str = "env steps", ylabel: str = "return",
                         threshold: float | None = None, title: str = "", ax=None):
    """One line per run: `curves` maps a label to (x values, y values)."""
    ax = _axes(ax)
    for label, (xs, ys) in curves.items():
        ax.plot(xs, ys, label=label)
    if threshold is not None:
        ax.axhline(threshold, color="grey", linestyle="--", linewidth=1,
                   label=f"target {threshold:g}")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    return ax


def plot_comparison(seconds: Mapping[str, float], *, title: str = "", ax=None):
    """Horizontal bars of wall-clock seconds per variant, each labelled with its speed-up."""
    ax = _axes(ax, figsize=(6, 0.6 + 0.5 * len(seconds)))
    labels, values = list(seconds), np.array(list(seconds.values()), dtype=float)
    ax.barh(labels, values, color=["tab:red"] + ["tab:green"] * (len(values) - 1))
    for i, v in enumerate(values):
        ax.text(v, i, f" {v:.2f} s ({values[0] / v:.1f}x)", va="center", fontsize="small")
    ax.invert_yaxis()
    ax.set(xlabel="wall-clock seconds (lower is better)", title=title)
    ax.set_xlim(0, values.max() * 1.45)
    return ax


def plot_scaling(workers: Sequence[int], rates: Sequence[float], *, ylabel: str = "env steps/s",
                 title: str = "", ax=None):
    """Measured throughput against the number of workers, beside the ideal linear line."""
    ax = _axes(ax)
    workers, rates = np.asarray(workers), np.asarray(rates, dtype=float)
    ax.plot(workers, rates, marker="o", label="measured")
    ax.plot(workers, rates[0] * workers / workers[0], linestyle="--", color="grey", label="ideal")
    ax.set(xlabel="workers", ylabel=ylabel, title=title)
    ax.set_xticks(workers)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    return ax


def plot_ladder(latencies_ms: Sequence[float], measured: Mapping[str, Sequence[float]],
                bounds: Mapping[str, Sequence[float]], *, title: str = "", ax=None):
    """Throughput against env latency: per variant, its measured env steps/s as points and its
    best case (`bounds`, same keys) as a dashed line of the same colour; log scale, since the
    rates span orders of magnitude."""
    ax = _axes(ax, figsize=(6.5, 3.8))
    colors = plt.get_cmap("tab10")
    for i, (label, rates) in enumerate(measured.items()):
        ax.plot(latencies_ms, rates, marker="o", linestyle="-", color=colors(i), label=label)
        ax.plot(latencies_ms, bounds[label], linestyle="--", color=colors(i), linewidth=1)
    ax.plot([], [], linestyle="--", color="grey", linewidth=1, label="dashed: best case (Amdahl)")
    ax.set(xlabel="env step latency (ms)", ylabel="env steps/s (log)", yscale="log", title=title)
    ax.set_xticks(list(latencies_ms))
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="best", fontsize="small")
    return ax


def plot_leaderboard(tries: Mapping[str, tuple[float, bool, float | None]],
                     references: Mapping[str, float], *, ax=None):
    """One bar per try, (seconds, reached, predicted bound in seconds or None): its time to
    the goal (hatched: the goal not reached in that time), its bound as a black tick; each
    reference (label: seconds) a dashed vertical line."""
    ax = _axes(ax, figsize=(6.5, 0.8 + 0.45 * max(len(tries), 1)))
    for i, (seconds, reached, bound) in enumerate(tries.values()):
        ax.barh(i, seconds, color="tab:green" if reached else "lightgrey",
                hatch=None if reached else "//", edgecolor="grey")
        if bound:
            ax.plot([bound, bound], [i - 0.4, i + 0.4], color="black", linewidth=2)
    for j, (label, seconds) in enumerate(references.items()):
        ax.axvline(seconds, linestyle="--", color=plt.get_cmap("tab10")(j + 1), label=label)
    ax.plot([], [], color="black", linewidth=2, label="your bound (Amdahl)")
    ax.set_yticks(range(len(tries)), list(tries))
    ax.invert_yaxis()
    ax.set(xlabel="seconds to 475 (hatched: not reached)", title="your tries")
    ax.legend(loc="best", fontsize="small")
    return ax


def plot_pendulum_frames(observations: Sequence[Sequence[float]],
                         actions: Sequence[float] | None = None, *, frames: int = 8,
                         max_torque: float = 2.0, title: str = "", ax=None):
    """A strip of Pendulum-v1 frames drawn from the observations (cos θ, sin θ, θ'), no pygame.

    `frames` evenly spaced steps of the episode, side by side: the rod from the pivot to the
    bob (θ = 0 is upright, as in gymnasium's own rendering), and the torque of that step as a
    bar under the pivot (its length is torque / max_torque).
    """
    obs = np.asarray(observations, dtype=float)
    steps = np.linspace(0, len(obs) - 1, frames).round().astype(int)
    ax = _axes(ax, figsize=(1.4 * frames, 2.2))
    for k, t in enumerate(steps):
        cx = 2.6 * k
        cos_t, sin_t = obs[t, 0], obs[t, 1]
        x, y = cx - sin_t, cos_t                        # gymnasium draws the rod at θ + π/2
        ax.plot([cx, x], [0, y], color="tab:red", linewidth=4, solid_capstyle="round")
        ax.plot([cx], [0], marker="o", color="black", markersize=4)
        if actions is not None:
            torque = float(np.asarray(actions[t]).ravel()[0]) / max_torque
            ax.plot([cx, cx + torque], [-1.25, -1.25], color="tab:blue", linewidth=3)
        ax.text(cx, 1.25, f"t={t}", ha="center", fontsize="small")
    ax.set_xlim(-1.3, 2.6 * (frames - 1) + 1.3)
    ax.set_ylim(-1.45, 1.45)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title)
    return ax
