"""Run folders, checkpoints and the training loop every algorithm shares (DQN, Ape-X, SAC).

A run folder, as RLlib lays it out::

    results/apex_CartPole-v1_2025-06-01_12-00-00/
        params.json                 the algorithm, env and full config of the run
        progress.csv                one row per iteration (iteration, time_s, env_steps, ...)
        result.json                 the same rows, one JSON object per line
        extras.json                 the algorithm's own records (per-explorer returns, ...)
        events.out.tfevents.*       the same scalars for TensorBoard (x axis: env steps)
        checkpoints/checkpoint_000010/
            meta.json               algo, env_id, iteration, counters, config (readable)
            state.pt                the same plus network and optimiser state (torch.save)

Nothing here knows about a particular algorithm. A *trainer* is any object with

| member              | meaning                                                          |
| ------------------- | ---------------------------------------------------------------- |
| `algo`              | its name, e.g. "apex"                                            |
| `step()`            | run one iteration, return a row: iteration, time_s, env_steps,   |
|                     | learner_updates, eval_return, train_return, ... (same keys always) |
| `state()`           | a checkpoint: {"algo", "env_id", "config", "iteration", "counters", ...} |
| `get_weights()`     | the policy weights as {name: numpy array}                        |
| `close()`           | release envs and actors                                          |

`state()` and `get_weights()` must be the weights the last row's `eval_return` scored (see
`course_lib.trainer`): the run stops on that row, and saves and returns those weights.

and `run_training(trainer, config, ...)` drives it until a stop criterion of the config holds.
A config that wants the command line has the three stop fields `target_return`,
`max_env_steps` and `max_time_s` (None switches one off).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import shutil
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from course_lib.errors import first_line
from course_lib.tensorboard_log import hyperparameter_table, log_scalars, tensorboard_writer

#: `--stop` keys (RLlib's names) -> the config fields that hold them
STOP_KEYS = {"eval_return": "target_return", "env_steps": "max_env_steps",
             "time_s": "max_time_s"}
#: the columns every progress row starts with
ROW_KEYS = ("iteration", "time_s", "env_steps", "learner_updates", "eval_return", "train_return")
CHECKPOINT_FILE, META_FILE = "state.pt", "meta.json"


class Algorithm(NamedTuple):
    """What the command line needs to know about an algorithm (see `course_lib.cli`)."""

    config: type                          # the Config dataclass
    train: Callable                       # train(cfg, progress=, run=, restore=) -> TrainResult
    policy: Callable                      # checkpoint dict -> act(obs) -> action (greedy)
    check_env: Callable                   # check_env(env): ValueError if the env is unsuitable


class CheckpointError(ValueError):
    """A checkpoint is missing, unreadable, or from another algorithm or environment."""


# ---------------------------------------------------------------------------------------------
# Stopping and the result of a run
# ---------------------------------------------------------------------------------------------

def stop_reason(row: dict, config) -> str | None:
    """Which stop criterion `row` meets ("eval_return", "env_steps", "time_s"), else None.

    The goal (eval_return) is checked first, so a run that reaches it on its last allowed
    step counts as reached.
    """
    goal = config.target_return
    if goal is not None and not math.isnan(row["eval_return"]) and row["eval_return"] >= goal:
        return "eval_return"
    if config.max_env_steps is not None and row["env_steps"] >= config.max_env_steps:
        return "env_steps"
    if config.max_time_s is not None and row["time_s"] >= config.max_time_s:
        return "time_s"
    return None


class OutOfTime(RuntimeError):
    """The wall-clock budget (`max_time_s`) ran out in the middle of an iteration: a driver
    that waits on actors stops waiting there, drops the iteration's unscored snapshot, and the
    run ends on its last evaluated snapshot (stop reason `time_s`)."""


@dataclasses.dataclass
class TrainResult:
    """What a training run returns."""

    history: list[dict]                   # one row per iteration
    stopped_by: str                       # "eval_return", "env_steps" or "time_s"
    reached: bool                         # the goal was met (or there was none)
    weights: dict                         # final policy weights {name: numpy array}
    checkpoint: Path | None = None        # the last checkpoint written, if any
    extras: dict = dataclasses.field(default_factory=dict)  # algorithm-specific records
    note: str = ""                        # how the run ended, when it did not end on a row

    @property
    def last(self) -> dict:
        return self.history[-1]

    def summary(self, algo: str, env_id: str, goal: float | None = None) -> str:
        """One line: did it reach the goal, after how many steps, updates and seconds."""
        row = self.last
        if self.stopped_by == "eval_return":
            head = f"reached eval_return {row['eval_return']:.1f} >= {goal:g}"
        elif goal is not None:
            head = (f"stopped by the {self.stopped_by} budget before reaching {goal:g} "
                    f"(last eval_return {row['eval_return']:.1f})")
        else:
            head = f"finished the {self.stopped_by} budget (eval_return {row['eval_return']:.1f})"
        return (f"{algo} {env_id}: {head} after {row['env_steps']:,} env steps, "
                f"{row['learner_updates']:,} learner updates, {row['time_s']:.1f} s "
                f"(iteration {row['iteration']})" + (f"; {self.note}" if self.note else ""))


def run_training(trainer, config, progress=None, run: Run | None = None) -> TrainResult:
    """Step `trainer` until a stop criterion of `config` holds; log, checkpoint, show progress.

    `progress`: None (quiet), True (a LiveProgress: notebook display or terminal bar), a
    LiveProgress, or a callable given each row. The trainer is closed at the end, also when
    the loop is interrupted. When the clock runs out in the middle of an iteration
    (`OutOfTime`), the run ends on the last evaluated snapshot with stop reason
    `time_s`; it re-raises when no iteration was evaluated yet.
    """
    history, stopped_by, checkpoint, note = [], None, None, ""
    close_progress = _nothing
    try:
        if all(getattr(config, key) is None for key in STOP_KEYS.values()):
            raise ValueError("no stop criterion: set target_return, max_env_steps or "
                             "max_time_s")
        show, close_progress = _progress_callback(progress, config, trainer.algo)
        while stopped_by is None:
            try:
                row = trainer.step()
            except OutOfTime as err:
                if not history:
                    raise
                stopped_by, note = "time_s", str(err)
                if run is not None and run.checkpoint_due(history[-1]["iteration"], final=True) \
                        and not run.checkpoint_due(history[-1]["iteration"]):
                    checkpoint = run.save_checkpoint(trainer.state())   # not saved yet
                break
            history.append(row)
            stopped_by = stop_reason(row, config)
            if run is not None:
                run.log(row)
                if run.checkpoint_due(row["iteration"], final=stopped_by is not None):
                    checkpoint = run.save_checkpoint(trainer.state())
            show(row)
        weights = trainer.get_weights()
        extras = trainer.extras() if hasattr(trainer, "extras") else {}
        if run is not None and extras:
            run.save_extras(extras)
    finally:
        close_progress()
        trainer.close()
    reached = stopped_by == "eval_return" or config.target_return is None
    return TrainResult(history, stopped_by, reached, weights, checkpoint, extras, note)


def _nothing(*args) -> None:
    pass


def _progress_callback(progress, config, algo: str):
    """(show(row), close()) for the kinds of `progress` that run_training accepts."""
    if progress is None or progress is False:
        return _nothing, _nothing
    if callable(progress) and not hasattr(progress, "update"):
        return progress, _nothing
    if progress is True:
        from course_lib.progress import LiveProgress  # imports matplotlib: only when asked
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


# ---------------------------------------------------------------------------------------------
# The run folder
# ---------------------------------------------------------------------------------------------

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
