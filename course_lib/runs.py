"""Run folders and checkpoints: where a training run writes what it did, as RLlib lays it out::

    results/apex_CartPole-v1_2025-06-01_12-00-00/
        params.json                 the algorithm, env and full config of the run
        progress.csv                one row per iteration (iteration, time_s, env_steps, ...)
        result.json                 the same rows, one JSON object per line
        extras.json                 the algorithm's own records (per-explorer returns, ...)
        events.out.tfevents.*       the same scalars for TensorBoard (x axis: env steps)
        checkpoints/checkpoint_000010/
            meta.json               algo, env_id, iteration, counters, config (readable)
            state.pt                the same plus network and optimiser state (torch.save)

A checkpoint is a trainer's `state()` (see `course_lib.trainer`); nothing here knows about a
particular algorithm. The training loop (`trainer.run_training`) writes through a `Run`.
"""

from __future__ import annotations

import csv
import json
import math
import os
import shlex
import shutil
from datetime import datetime
from pathlib import Path

from course_lib.errors import CheckpointError, first_line
from course_lib.tensorboard_log import hyperparameter_table, log_scalars, tensorboard_writer

CHECKPOINT_FILE, META_FILE = "state.pt", "meta.json"


class Run:
    """One run's folder: parameters, progress rows, TensorBoard events, checkpoints.

    | call                      | effect                                                 |
    | ------------------------- | ------------------------------------------------------ |
    | `Run.create(dir, algo, env_id, params)` | a new folder `dir/<algo>_<env>_<time>/` |
    | `log(row)`                | a row to progress.csv, result.json and TensorBoard     |
    | `checkpoint_due(i)`       | whether iteration i should be checkpointed             |
    | `save_checkpoint(state)`  | checkpoints/checkpoint_<iteration>/, oldest pruned     |
    | `save_extras(extras)`     | the algorithm's own records to extras.json             |
    """

    def __init__(self, path, checkpoint_freq: int = 0, checkpoint_at_end: bool = False,
                 keep_checkpoints: int | None = None):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.checkpoint_freq, self.checkpoint_at_end = checkpoint_freq, checkpoint_at_end
        self.keep_checkpoints = keep_checkpoints
        self.events = tensorboard_writer(self.path)
        self._columns: list[str] | None = None

    @classmethod
    def create(cls, results_dir, algo: str, env_id: str, params: dict, **kwargs) -> Run:
        """A fresh folder for a run, with params.json written and the config in TensorBoard."""
        stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
        base = Path(results_dir) / f"{algo}_{env_id.replace('/', '-')}_{stamp}"
        path, n = base, 1
        while path.exists():                  # two runs started in the same second
            path, n = base.with_name(f"{base.name}_{n}"), n + 1
        run = cls(path, **kwargs)
        (run.path / "params.json").write_text(json.dumps(params, indent=2, default=str) + "\n")
        run.events.add_text("hyperparameters", hyperparameter_table(params))
        return run

    def log(self, row: dict) -> None:
        """Append a row; the CSV columns are the first row's keys."""
        if self._columns is None:
            self._columns = list(row)
        csv_path = self.path / "progress.csv"
        new = not csv_path.exists()
        with open(csv_path, "a", newline="") as file:
            writer = csv.DictWriter(file, self._columns, extrasaction="ignore")
            if new:
                writer.writeheader()
            writer.writerow(row)
        with open(self.path / "result.json", "a") as file:
            file.write(json.dumps(_json_safe(row)) + "\n")
        log_scalars(self.events, row)

    def checkpoint_due(self, iteration: int, final: bool = False) -> bool:
        if final and self.checkpoint_at_end:
            return True
        return self.checkpoint_freq > 0 and iteration % self.checkpoint_freq == 0

    def save_checkpoint(self, state: dict) -> Path:
        """Write `state` to checkpoints/checkpoint_<iteration>/ and keep the newest N."""
        folder = self.path / "checkpoints" / f"checkpoint_{state['iteration']:06d}"
        save_checkpoint(folder, state)
        if self.keep_checkpoints:
            for old in list_checkpoints(self.path)[:-self.keep_checkpoints]:
                shutil.rmtree(old, ignore_errors=True)
        return folder

    def save_extras(self, extras: dict) -> None:
        """The algorithm's own records (e.g. per-explorer returns) as extras.json."""
        (self.path / "extras.json").write_text(json.dumps(extras, default=str) + "\n")

    def close(self) -> None:
        self.events.close()


def _json_safe(row: dict) -> dict:
    """NaN and inf are not JSON: write them as null."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in row.items()}


# ---------------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------------

def save_checkpoint(folder, state: dict) -> Path:
    """`state` (from a trainer's `state()`) to `folder`/state.pt plus a readable meta.json.

    Written to a temporary folder first and renamed, so a crash never leaves half a checkpoint.
    """
    import torch  # here, not at the top: the command line checks its input before torch loads

    folder = Path(folder)
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    torch.save(state, tmp / CHECKPOINT_FILE)
    meta = {key: state[key] for key in ("algo", "env_id", "iteration", "counters", "config",
                                        "weights_version", "eval_return", "eval_episodes")
            if key in state}
    (tmp / META_FILE).write_text(json.dumps(_json_safe(meta), indent=2) + "\n")
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)
    return folder


def list_checkpoints(run_path) -> list[Path]:
    """The checkpoint folders of a run, oldest first."""
    return sorted(p for p in (Path(run_path) / "checkpoints").glob("checkpoint_*")
                  if p.is_dir() and not p.name.endswith(".tmp"))


def find_checkpoint(path) -> Path:
    """The checkpoint folder `path` names: a checkpoint folder, its state.pt, or a run folder
    (its newest checkpoint). CheckpointError if there is none."""
    path = Path(path)
    if path.is_file() and path.name in (CHECKPOINT_FILE, META_FILE):
        path = path.parent
    if path.is_dir() and not (path / META_FILE).exists() and (path / "checkpoints").is_dir():
        found = list_checkpoints(path)
        if not found:
            raise CheckpointError(f"run folder {path} has no checkpoints")
        path = found[-1]
    if not path.exists():
        raise CheckpointError(f"no checkpoint at {path}")
    if not (path / META_FILE).is_file() or not (path / CHECKPOINT_FILE).is_file():
        raise CheckpointError(f"{path} is not a checkpoint (expected {META_FILE} and "
                              f"{CHECKPOINT_FILE} in it)")
    return path


def read_checkpoint_meta(path, algo: str | None = None, env_id: str | None = None) -> dict:
    """meta.json of a checkpoint (cheap: no torch), checked against `algo` and `env_id`."""
    folder = find_checkpoint(path)
    try:
        meta = json.loads((folder / META_FILE).read_text())
        missing = {"algo", "env_id", "iteration", "config"} - meta.keys()
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError) as err:
        raise CheckpointError(f"corrupt checkpoint {folder}: {META_FILE} is unreadable "
                              f"({first_line(err)})") from None
    if missing:
        raise CheckpointError(f"corrupt checkpoint {folder}: {META_FILE} lacks "
                              f"{', '.join(sorted(missing))}")
    if algo is not None and meta["algo"] != algo:
        raise CheckpointError(f"checkpoint {folder} is from algorithm {meta['algo']!r}, "
                              f"not {algo!r}")
    if env_id is not None and meta["env_id"] != env_id:
        raise CheckpointError(f"checkpoint {folder} was trained on {meta['env_id']}, "
                              f"not {env_id}")
    meta["path"] = str(folder)
    return meta


def load_checkpoint(path, algo: str | None = None, env_id: str | None = None) -> dict:
    """The full state saved by `save_checkpoint`, checked like `read_checkpoint_meta`.

    Loaded with `weights_only=True`: tensors and plain containers only, no arbitrary pickles.
    """
    import torch

    meta = read_checkpoint_meta(path, algo, env_id)
    try:
        state = torch.load(Path(meta["path"]) / CHECKPOINT_FILE, map_location="cpu",
                           weights_only=True)
    except Exception as err:  # torch raises many kinds for a damaged file
        raise CheckpointError(f"corrupt checkpoint {meta['path']}: {CHECKPOINT_FILE} does not "
                              f"load ({first_line(err)})") from None
    if not isinstance(state, dict) or state.get("algo") != meta["algo"]:
        raise CheckpointError(f"corrupt checkpoint {meta['path']}: {CHECKPOINT_FILE} and "
                              f"{META_FILE} disagree")
    state["path"] = meta["path"]
    return state


def crash_report(err: BaseException, run_path) -> str:
    """The one line a crashed run shows (the actor that failed, or the error's first line);
    the full traceback goes to the run folder's `error.txt`."""
    import traceback

    from course_lib.errors import ActorFailedError, OneLineError, StartError

    (Path(run_path) / "error.txt").write_text("".join(traceback.format_exception(err)))
    named = isinstance(err, ActorFailedError | StartError | OneLineError)
    return (f"{err if named else 'the run crashed: ' + first_line(err)}; results so far in "
            f"{run_path} (traceback in error.txt)")


def resume_hint(trainer, config, run: Run | None, history: list[dict]) -> str:
    """How to continue a run whose learner died: its last evaluated snapshot, saved now if it
    was not yet (the driver holds a copy of its state), and the command that resumes it, with
    this run's folder and checkpoint options (a continued run that checkpoints as this one
    did), quoted for a shell."""
    if run is None:
        return "no checkpoint to continue from (train with a run folder: course_lib train)"
    if not history:
        return "no iteration was evaluated yet, so there is no checkpoint: start the run again"
    last = history[-1]["iteration"]
    path = (run.path / "checkpoints" / f"checkpoint_{last:06d}" if run.checkpoint_due(last)
            else run.save_checkpoint(trainer.state()))
    options = [("--results-dir", run.path.parent), ("--checkpoint-freq", run.checkpoint_freq),
               ("--keep-checkpoints", run.keep_checkpoints)]
    command = ["python", "-m", "course_lib", "train", "--algo", trainer.algo, "--env",
               config.env_id, "--restore", path, *[str(x) for option, value in options
                                                  if value for x in (option, value)],
               *(["--checkpoint-at-end"] if run.checkpoint_at_end else [])]
    return (f"the last checkpoint is {path} (iteration {last}); continue with: "
            f"{shlex.join(str(x) for x in command)}")
