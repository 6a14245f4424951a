"""TensorBoard: a run folder's event files, written by TensorBoard's own writer (through torch).
`results.Run` writes them; nothing here knows about an algorithm."""

from __future__ import annotations

import math


def tensorboard_writer(folder):
    """TensorBoard's writer for a run folder (`events.out.tfevents.*` in `folder`).

    Flushed every second, so that a TensorBoard opened beside a running training
    (`%tensorboard --logdir results` in a notebook) follows it live. Imported here, not at the
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


def _flatten(params: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in params.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
