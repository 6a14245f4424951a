"""The training skeleton every algorithm shares (DQN, Ape-X, SAC): counters, the update debt,
seeds, and the rule that a result is only as good as the weights it scored.

A trainer keeps its counters, owes the learner updates as data arrives (`updates_due`), and
ends every iteration with an *evaluated snapshot*: the learner's state at one moment, the
counters of that moment, the training since the previous snapshot, and the returns of fresh
greedy episodes played with exactly those weights. The progress row, the stop decision, the
checkpoint and the returned weights all come from that one snapshot, so "reached 475" means the
weights you get back passed the goal's test:

    snapshot = learner state + counters + training since the last snapshot
        -> evaluate on eval_episodes fresh episodes
        -> their mean meets the goal? confirm on confirm_episodes more fresh episodes
        -> score and bound (`evaluation_columns`), row, stop?, checkpoint, weights

Stopping: the first `eval_episodes` only decide *whether* to test the goal; the confirming
episodes are the test, on their own (the mean of all of them would let a lucky 10 carry a
failing 20). One confirmation is an honest look, but a run looks every iteration, and stopping
at the first look over the goal picks a lucky one. So the stop reads `eval_lower`, a lower
confidence bound of the snapshot's mean at a level the run spends across its goal tests
(`course_lib.scoring`): a run whose snapshots all fall short says "reached" in at most
2.5% of runs, however many times it looks. `eval_return` stays the confirming episodes' mean.

A row is one moment: its counters, its score, and the training that led up to it (train
returns, rates and learner means over the window between the previous snapshot and this one).

`run_training` steps a `Trainable` (the protocol) until a stop criterion holds. `Trainer`, the
skeleton, is one: a subclass writes `step()` and the abstract hooks, and `ApexTrainer.train(cfg)`
builds one and runs it. `DQNTrainer` runs in one process, `DistributedTrainer` on Ray actors.
"""

from __future__ import annotations

import dataclasses
import os
import time
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from course_lib.config import TrainerConfig
from course_lib.errors import CheckpointError, LearnerDiedError, OutOfTime
from course_lib.results import STOP_KEYS, TrainResult, stop_reason
from course_lib.runs import Run, load_checkpoint, resume_hint
from course_lib.scoring import evaluation_columns, evaluation_score, mean_or_nan


def updates_due(inserted: int, ratio: float, learning_starts: int) -> int:
    """Learner updates owed after `inserted` transitions: `ratio` updates for every transition
    past the first `learning_starts` (those only fill the buffer, they are owed nothing).

    >>> updates_due(1_000, 0.25, 1_000), updates_due(1_400, 0.25, 1_000)
    (0, 100)
    """
    return int(ratio * max(0, inserted - learning_starts))


def derive_seed(seed: int, *stream: int | str) -> int:
    """A seed for one named stream of randomness (`derive_seed(0, "eval", 3)`), independent
    of every other stream: the one formula for explorers, evaluations, resumes and restarts."""
    words = [seed, *(s if isinstance(s, int) else int.from_bytes(s.encode(), "little")
                     for s in stream)]
    return int(np.random.SeedSequence([w % 2**63 for w in words]).generate_state(1)[0] >> 1)


def evaluation_request(cfg, returns: list[float], evaluations: int) -> tuple[int, int] | None:
    """(episodes, seed) of the next evaluation of one set of weights that has played `returns`
    so far, or None once it is scored; `evaluations` counts the run's evaluations before it.

    First `cfg.eval_episodes`; if their mean meets `cfg.target_return`, `cfg.confirm_episodes`
    more of the same weights, the goal's test; as many again, once, if those all returned the
    same (no spread seen is not no spread: `course_lib.scoring`). Every evaluation gets seeds
    no other evaluation used. The one rule for every trainer, and for RLlib in notebook 07."""
    played, first, more = len(returns), cfg.eval_episodes, cfg.confirm_episodes
    goal = cfg.target_return
    if played == 0:
        episodes = first
    elif played == first and more > 0 and goal is not None and np.mean(returns) >= goal:
        episodes = more
    elif (played == first + more > first and len(set(returns[first:])) == 1
          and returns[first] >= goal):
        episodes = more
    else:
        return None
    return episodes, derive_seed(cfg.seed, "evaluation", evaluations + 1)


@dataclasses.dataclass
class Counters:
    """A run's counters: what a checkpoint carries over to a resume (as a plain dict)."""

    iteration: int = 0                # progress rows so far
    env_steps: int = 0                # env steps played by the training workers
    inserted: int = 0                 # transitions that reached the replay buffer
    episodes: int = 0                 # training episodes finished
    learner_updates: int = 0          # gradient steps of the learner
    time_s: float = 0.0               # wall-clock seconds of training, over every start
    evaluations: int = 0              # evaluations requested (each one gets fresh seeds)
    goal_tests: int = 0               # evaluations that tested the goal (each spends a level)
    starts: int = 0                   # resumes so far (each start gets new random streams)
    worker_restarts: int = 0          # workers that died and were started again

    @classmethod
    def restored(cls, saved: dict) -> Counters:
        """The counters a checkpoint saved (`dataclasses.asdict`), one start later."""
        try:
            counters = cls(**saved)
        except TypeError:
            raise CheckpointError(f"the checkpoint's counters {sorted(saved)} are from another "
                                  "version of course_lib: retrain") from None
        counters.starts += 1          # a resume: new random streams, fresh learning_starts
        return counters


@dataclasses.dataclass
class Snapshot:
    """The learner at one moment: its state, the counters then, and its evaluation."""

    counters: Counters                # env_steps, learner_updates, time_s, ... when taken
    state: dict[str, Any]             # the learner's state_dict (what a checkpoint holds)
    weights: dict[str, np.ndarray]    # the policy's weights (what evaluation plays)
    returns: list[float] = dataclasses.field(default_factory=list)   # evaluation episodes
    # the training since the previous snapshot: train_return, env_steps_per_s, updates_per_s
    # and the learner's means (loss, ...), so a row never mixes two moments
    window: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def version(self) -> int:
        """The weights version: the learner updates behind these weights."""
        return int(self.counters.learner_updates)


class Trainable(ABC):
    """What `run_training` drives: the one trainer protocol (RLlib's wrapper in
    `rllib_compare` implements it too). `state()` and `get_weights()` must be the weights the
    last row's `eval_return` scored: the run stops on that row, saves and returns them. A row
    that may reach a goal carries the evaluation's bound (`scoring.evaluation_columns`)."""

    algo: ClassVar[str] = ""              # its name, e.g. "apex"

    @abstractmethod
    def step(self) -> dict[str, Any]:
        """One iteration; a progress row that starts with `results.ROW_KEYS`."""

    @abstractmethod
    def state(self) -> dict[str, Any]:
        """A checkpoint: {"algo", "env_id", "config", "iteration", "counters", ...}."""

    @abstractmethod
    def get_weights(self) -> dict[str, np.ndarray]:
        """The policy weights as {name: numpy array}."""

    @abstractmethod
    def close(self) -> None:
        """Release envs and actors."""

    def extras(self) -> dict[str, Any]:
        """The algorithm's own records for the result and extras.json (none by default)."""
        return {}


class Trainer(Trainable):
    """Counters, the update debt, seeds, evaluated snapshots, rows and checkpoints."""

    config_class: ClassVar[type] = TrainerConfig   # what `train` and the command line build
    Slots: ClassVar[type | None] = None            # the parts it lets you swap (distributed)

    def __init__(self, config: TrainerConfig, restore: dict | None = None):
        self.cfg = config
        config.check()
        c = self.counters = Counters() if restore is None else Counters.restored(
            restore["counters"])
        # the replay buffer is not in a checkpoint: each start fills it again from empty
        self._updates_at_start, self._inserted_at_start = c.learner_updates, c.inserted
        self.evaluated: Snapshot | None = None
        self.start = time.perf_counter() - c.time_s
        # the training window that the next snapshot closes (see `book_episodes`, `snapshot`)
        self._window_returns: list[float] = []
        self._window_start = dataclasses.replace(c)

    @classmethod
    def train(cls, config, progress=None, run: Run | None = None, restore=None,
              slots=None) -> TrainResult:
        """Train until a stop criterion of `config` holds (`run_training`); a TrainResult.
        `progress`: True (live display or bar) or a callable given each row. `run`: a
        `runs.Run` for rows and checkpoints. `restore`: a checkpoint (path or dict) of this
        algorithm and env. `slots`: parts of your own (`distributed.Slots`), distributed only."""
        if isinstance(restore, str | os.PathLike):
            restore = load_checkpoint(restore, algo=cls.algo, env_id=config.env_id)
        if slots is not None and cls.Slots is None:
            raise ValueError(f"slots: {cls.__name__} has none; the distributed trainers do")
        trainer = cls(config, restore, **({"slots": slots} if slots is not None else {}))
        return run_training(trainer, config, progress=progress, run=run)

    @classmethod
    def check_env(cls, env) -> None:
        """ValueError (one line) if the algorithm cannot train on `env` (default: any env)."""

    # -- what an algorithm says about itself --------------------------------------------------

    @property
    @abstractmethod
    def updates_per_transition(self) -> float:
        """Learner updates owed per inserted transition (DQN: replay_ratio / batch_size)."""

    # -- the shared rules ---------------------------------------------------------------------

    @property
    def stored_now(self) -> int:
        """Transitions inserted since this start (the buffer's fill, up to its capacity)."""
        return self.counters.inserted - self._inserted_at_start

    @property
    def learning_start(self) -> int:
        """Transitions this start stores before the learner is owed anything: learning_starts,
        or one batch if that is more (a batch is the least the replay can sample)."""
        return max(self.cfg.learning_starts, self.cfg.batch_size)

    def updates_due(self, stored: int | None = None) -> int:
        """Learner updates owed now (or at `stored` transitions). One rule for every algorithm,
        also after a resume: none until this start has stored `learning_start` transitions,
        then `updates_per_transition` for every transition after that."""
        stored = self.stored_now if stored is None else stored
        return self._updates_at_start + updates_due(stored, self.updates_per_transition,
                                                    self.learning_start)

    def ratio_held(self) -> float:
        """Learner updates done per transition past `learning_start`, in this start: the
        `updates_per_transition` the run actually held (0 before the learner starts)."""
        updates = self.counters.learner_updates - self._updates_at_start
        return updates / max(1, self.stored_now - self.learning_start)

    def seed_for(self, *stream: int | str) -> int:
        """A seed for `stream` in this start of the run (a resume gets new ones)."""
        return derive_seed(self.cfg.seed, self.counters.starts, *stream)

    def book_episodes(self, returns: list[float]) -> None:
        """Training episodes that ended: their returns go into the next snapshot's window."""
        self._window_returns += returns

    def snapshot(self, state: dict, weights: dict, learner_updates: int,
                 **learner_means: float) -> Snapshot:
        """A snapshot with the counters booked by now (env steps, episodes, seconds) and the
        learner's own update count. Not a bound on the experience behind the weights: the
        learner may already have trained on transitions whose worker chunk is not booked yet.
        It closes the training window: the train returns booked and the rates since the
        previous snapshot, and `learner_means` (the learner's loss and the like over the same
        window)."""
        now = dataclasses.replace(self.counters, learner_updates=int(learner_updates),
                                  time_s=time.perf_counter() - self.start)
        w0 = self._window_start
        seconds = max(now.time_s - w0.time_s, 1e-9)
        window = {"train_return": mean_or_nan(self._window_returns),
                  "env_steps_per_s": (now.env_steps - w0.env_steps) / seconds,
                  "updates_per_s": (now.learner_updates - w0.learner_updates) / seconds,
                  **learner_means}
        self._window_returns = []
        self._window_start = now
        return Snapshot(now, state, weights, window=window)

    def next_evaluation(self, snapshot: Snapshot) -> tuple[int, int] | None:
        """(episodes, seed) of the evaluation `snapshot` needs next, or None once it is scored
        (`evaluation_request`'s rule); counts the evaluations, so seeds never repeat."""
        request = evaluation_request(self.cfg, snapshot.returns, self.counters.evaluations)
        if request is not None:
            self.counters.evaluations += 1
        return request

    def row(self, snapshot: Snapshot, **extra) -> dict[str, Any]:
        """The progress row of an iteration that evaluated `snapshot`: its counters, its score
        and bound (`evaluation_columns`) and the training window that led to it, plus `extra`
        columns. Records `snapshot` as the one to save and return."""
        c, s = self.counters, snapshot.counters
        c.iteration += 1
        self.evaluated = snapshot
        scored = evaluation_columns(self.cfg, snapshot.returns, c.goal_tests)
        c.goal_tests = scored["goal_tests"]
        return {
            "iteration": c.iteration, "time_s": s.time_s, "env_steps": s.env_steps,
            "learner_updates": s.learner_updates, "eval_return": scored["eval_return"],
            "train_return": snapshot.window["train_return"], "episodes": s.episodes,
            "eval_episodes": scored["eval_episodes"], "eval_lower": scored["eval_lower"],
            "goal_tests": c.goal_tests,
            "wall_s": time.perf_counter() - self.start,   # when this row's evaluation ended
            **{k: v for k, v in snapshot.window.items() if k != "train_return"},
            **extra,
        }

    def state(self) -> dict[str, Any]:
        """A checkpoint of the last evaluated snapshot: its learner state and its counters
        (a resume continues from exactly the weights that were scored)."""
        snap, c = self.evaluated, self.counters
        if snap is None:
            raise RuntimeError("nothing evaluated yet: call step() before state()")
        counters = dataclasses.replace(snap.counters, iteration=c.iteration,
                                       evaluations=c.evaluations, goal_tests=c.goal_tests,
                                       starts=c.starts, worker_restarts=c.worker_restarts)
        score, episodes = evaluation_score(self.cfg, snap.returns)
        return {"algo": self.algo, "env_id": self.cfg.env_id, "config": self.cfg.to_dict(),
                "iteration": c.iteration, "counters": dataclasses.asdict(counters),
                "learner": snap.state,
                "weights_version": snap.version,
                "eval_return": score, "eval_episodes": episodes}

    def get_weights(self) -> dict[str, np.ndarray]:
        """The policy weights of the last evaluated snapshot."""
        if self.evaluated is None:
            raise RuntimeError("nothing evaluated yet: call step() before get_weights()")
        return self.evaluated.weights


def run_training(trainer: Trainable, config, progress=None, run: Run | None = None
                 ) -> TrainResult:
    """Step `trainer` until a stop criterion of `config` holds; log, checkpoint, show progress.

    `progress`: None (quiet), True (a LiveProgress: notebook display or terminal bar), a
    LiveProgress, or a callable given each row (`progress.row_display`). The trainer is closed
    at the end, also when the loop is interrupted. When the clock runs out in the middle of an
    iteration (`OutOfTime`), the run ends on the last evaluated snapshot with stop reason
    `time_s`; it re-raises when no iteration was evaluated yet.
    """
    history, stopped_by, checkpoint, note = [], None, None, ""
    show = close_progress = lambda *row: None  # noqa: E731  (quiet unless asked)
    try:
        if all(getattr(config, key) is None for key in STOP_KEYS.values()):
            raise ValueError("no stop criterion: set target_return, max_env_steps or "
                             "max_time_s")
        if progress is not None and progress is not False:
            from course_lib.progress import row_display  # imports matplotlib: only when asked
            show, close_progress = row_display(progress, config, trainer.algo)
        while stopped_by is None:
            try:
                row = trainer.step()
            except OutOfTime as err:
                if not history:
                    raise
                stopped_by, note = "time_s", str(err)
                last = history[-1]["iteration"]
                if run is not None and run.checkpoint_due(last, final=True) \
                        and not run.checkpoint_due(last):
                    checkpoint = run.save_checkpoint(trainer.state())   # not saved yet
                break
            except LearnerDiedError as err:     # a checkpoint, and how to continue from it
                raise LearnerDiedError(f"{err}; {resume_hint(trainer, config, run, history)}"
                                       ) from None
            history.append(row)
            stopped_by = stop_reason(row, config)
            if run is not None:
                run.log(row)
                if run.checkpoint_due(row["iteration"], final=stopped_by is not None):
                    checkpoint = run.save_checkpoint(trainer.state())
            show(row)
        weights, extras = trainer.get_weights(), trainer.extras()
        if run is not None and extras:
            run.save_extras(extras)
    finally:
        close_progress()
        trainer.close()
    reached = stopped_by == "eval_return" or config.target_return is None
    return TrainResult(history, stopped_by, reached, weights, checkpoint, extras, note)
