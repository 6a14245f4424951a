"""TensorBoard: a run folder's event files, written by TensorBoard's own writer (through torch),
and TensorBoard itself shown in a notebook. `runs.Run` writes the files; nothing here knows
about an algorithm."""

from __future__ import annotations

import math
from pathlib import Path
from urllib.parse import urlparse

# logdir (resolved) -> URL of the TensorBoard this process serves it with: one per logdir
_SERVING: dict[Path, str] = {}


def tensorboard_writer(folder):
    """TensorBoard's writer for a run folder (`events.out.tfevents.*` in `folder`).

    Flushed every second, so that a TensorBoard opened beside a running training
    (`show_tensorboard("results")` in a notebook) follows it live. Imported here, not at the
    top: the command line checks its input before torch and TensorBoard load.
    """
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(log_dir=str(folder), flush_secs=1)


def hyperparameter_table(params: dict) -> str:
    """`params` (nested dicts flattened to dotted keys) as a Markdown table, which
    TensorBoard's Text tab renders as a table."""
    rows = "\n".join(f"|{key}|{value}|" for key, value in _flatten(params).items())
    return f"|param|value|\n|-|-|\n{rows}"


def log_scalars(writer, row: dict) -> None:
    """Every finite number of a progress row as a scalar, with env steps as the x axis (the
    axis on which runs with different numbers of workers compare fairly)."""
    step = int(row["env_steps"])
    for key, value in row.items():
        if key != "env_steps" and isinstance(value, int | float) and math.isfinite(value):
            writer.add_scalar(key, value, global_step=step)


def show_tensorboard(logdir: str | Path = "results", height: int = 800) -> None:
    """TensorBoard on `logdir`, served from this Python process and shown in the notebook.

    Why not `%tensorboard`: that magic starts the `tensorboard` command it finds on the PATH,
    and a kernel that JupyterLab starts from `.venv/bin/jupyter` (what `make lab` runs) has no
    `.venv/bin` on its PATH. Here TensorBoard runs as a thread of the kernel instead: nothing to
    find, no second process left behind (it stops with the kernel), and it serves its own web
    pages (no network). It takes the first free port from 6006; a second call for the same
    folder shows the TensorBoard already running.
    """
    from tensorboard import notebook

    folder = Path(logdir).resolve()
    if folder not in _SERVING:
        from tensorboard import program

        server = program.TensorBoard()
        # load_fast="false": read the event files in this process, not in the separate
        # data-server program TensorBoard would otherwise start
        server.configure(logdir=str(folder), host="localhost", load_fast="false")
        _SERVING[folder] = server.launch()
    url = _SERVING[folder]
    print(f"TensorBoard on {logdir}: {url} (it stops with this kernel)")
    notebook.display(port=urlparse(url).port, height=height)


def _flatten(params: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in params.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
