"""Live progress: a display updated in place in a notebook, a tqdm bar in a terminal.

    progress = LiveProgress(total=10_000, desc="Ape-X", unit="steps")
    for ...:
        progress.update(env_steps, eval_return=..., updates_per_s=...)
    progress.close()

In Jupyter the display is one HTML block (a bar plus the latest metrics) rewritten through a
display handle, so the cell keeps a single, current output instead of a scrolling log; an
optional figure of one metric against the steps is redrawn through a second handle. Updates are
throttled to one every `min_interval_s`.
"""

from __future__ import annotations

import html
import math
import time

import matplotlib.pyplot as plt
from tqdm import tqdm


def in_notebook() -> bool:
    """True inside a Jupyter kernel (where display handles work): JupyterLab's, VS Code's, and
    Colab's, whose shell is a subclass of ipykernel's. False in a terminal IPython or plain
    Python. ipykernel is imported only when an IPython shell is running."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    from ipykernel.zmqshell import ZMQInteractiveShell

    return isinstance(shell, ZMQInteractiveShell)


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


class LiveProgress:
    """Progress towards `total` with the latest metrics, updated in place.

    `plot` names a metric to chart against the progress count as it arrives (notebook only).
    """

    def __init__(self, total: float, desc: str = "", unit: str = "it", plot: str | None = None,
                 min_interval_s: float = 0.5, notebook: bool | None = None):
        self.total, self.desc, self.unit, self.plot = total, desc, unit, plot
        self.min_interval_s = min_interval_s
        self.notebook = in_notebook() if notebook is None else notebook
        self.count, self.metrics = 0, {}
        self.history: list[tuple[float, float]] = []
        self.start = time.perf_counter()
        self._last_draw = 0.0
        if self.notebook:
            from IPython.display import HTML, display
            self._html = display(HTML(self._render()), display_id=True)
            self._fig_handle = None
            if plot:
                self._fig, self._ax = plt.subplots(figsize=(6, 3))
                plt.close(self._fig)  # shown only through the handle
                self._fig_handle = display(self._fig, display_id=True)
        else:
            self._bar = tqdm(total=total, desc=desc, unit=unit, dynamic_ncols=True)

    def update(self, count: float, **metrics) -> None:
        """Set the progress to `count` (absolute, not an increment) with the latest metrics.

        A NaN metric (not measured this time) keeps its previous value on the display."""
        metrics = {k: v for k, v in metrics.items() if not (isinstance(v, float) and math.isnan(v))}
        if not self.notebook:
            self._bar.update(count - self._bar.n)
        self.count = count
        self.metrics.update(metrics)
        if self.plot and metrics.get(self.plot) is not None:
            self.history.append((count, metrics[self.plot]))
        if time.perf_counter() - self._last_draw >= self.min_interval_s:
            self._draw()

    def close(self) -> None:
        """Draw the final state (and close the terminal bar)."""
        self._draw()
        if not self.notebook:
            self._bar.close()

    def _draw(self) -> None:
        self._last_draw = time.perf_counter()
        if not self.notebook:
            self._bar.set_postfix({k: _fmt(v) for k, v in self.metrics.items()}, refresh=True)
            return
        from IPython.display import HTML
        self._html.update(HTML(self._render()))
        if self._fig_handle is not None and self.history:
            xs, ys = zip(*self.history, strict=True)
            self._ax.clear()
            self._ax.plot(xs, ys, marker=".")
            self._ax.set_xlabel(self.unit)
            self._ax.set_ylabel(self.plot)
            self._ax.grid(alpha=0.3)
            self._fig_handle.update(self._fig)

    def _render(self) -> str:
        elapsed = time.perf_counter() - self.start
        frac = min(1.0, self.count / self.total) if self.total else 0.0
        cells = "".join(f"<td style='padding:0 8px'><b>{html.escape(k)}</b> {_fmt(v)}</td>"
                        for k, v in self.metrics.items())
        return (f"<div style='font-family:monospace'>{html.escape(self.desc)} "
                f"<progress value='{frac:.3f}' max='1' style='width:220px'></progress> "
                f"{_fmt(self.count)}/{_fmt(self.total)} {html.escape(self.unit)} "
                f"&middot; {elapsed:.1f} s<table><tr>{cells}</tr></table></div>")


def row_display(progress, config, algo: str):
    """(show(row), close()) for a training run's `progress` argument (see
    `trainer.run_training`): True makes a LiveProgress (notebook display or terminal bar),
    a LiveProgress is fed each row, and any other callable is given each row as it is."""
    if callable(progress) and not isinstance(progress, LiveProgress):
        return progress, lambda: None
    if progress is True:
        progress = LiveProgress(total=config.max_env_steps, desc=f"{algo} {config.env_id}",
                                unit="steps", plot="eval")

    def show(row: dict) -> None:
        metrics = {"eval": row["eval_return"], "train": row["train_return"],
                   "updates": row["learner_updates"]}
        for key, label in (("updates_per_s", "updates/s"), ("env_steps_per_s", "steps/s"),
                           ("replay_size", "replay"), ("alpha", "entropy coef")):
            if key in row:
                metrics[label] = row[key]
        progress.update(row["env_steps"], **metrics)

    return show, progress.close
