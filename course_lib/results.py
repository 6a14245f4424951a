"""What a training run returns and when it stops.

The loop that produces a result is `trainer.run_training` (beside the `Trainer` skeleton); run
folders and checkpoints are `course_lib.runs`; the algorithms the command line knows are
`course_lib.algorithms`. A config that wants the command line has the three stop fields
`target_return`, `max_env_steps` and `max_time_s` (None switches one off).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

#: `--stop` keys (RLlib's names) -> the config fields that hold them
STOP_KEYS = {"eval_return": "target_return", "env_steps": "max_env_steps",
             "time_s": "max_time_s"}
#: the columns every progress row starts with (a row that may reach a goal also has the
#: evaluation's bound, eval_lower: `scoring.evaluation_columns`)
ROW_KEYS = ("iteration", "time_s", "env_steps", "learner_updates", "eval_return", "train_return")


# ---------------------------------------------------------------------------------------------
# Stopping and the result of a run
# ---------------------------------------------------------------------------------------------

def stop_reason(row: dict, config) -> str | None:
    """Which stop criterion `row` meets ("eval_return", "env_steps", "time_s"), else None.

    The goal (eval_return) is met when the row's `eval_lower`, the lower confidence bound of
    the evaluated weights' mean return, reaches `config.target_return` (`scoring`: a run that
    never reaches the goal says so in at most 2.5% of runs, however many times it looks); the
    row's `eval_return` (the mean) alone never decides. The goal is checked first, so a run
    that reaches it on its last allowed step counts as reached.
    """
    goal = config.target_return
    if goal is not None:
        if "eval_lower" not in row:
            raise ValueError("this progress row has no eval_lower, so it cannot reach a goal: "
                             "build its evaluation columns with "
                             "scoring.evaluation_columns(cfg, returns, goal_tests)")
        if row["eval_lower"] >= goal:                  # NaN (nothing tested): never
            return "eval_return"
    if config.max_env_steps is not None and row["env_steps"] >= config.max_env_steps:
        return "env_steps"
    if config.max_time_s is not None and row["time_s"] >= config.max_time_s:
        return "time_s"
    return None


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
            if "eval_lower" in row:
                head += (f" (lower bound {row['eval_lower']:.1f} over {row['eval_episodes']} "
                         "episodes)")
        elif goal is not None:
            head = (f"stopped by the {self.stopped_by} budget before reaching {goal:g} "
                    f"(last eval_return {row['eval_return']:.1f})")
        else:
            head = f"finished the {self.stopped_by} budget (eval_return {row['eval_return']:.1f})"
        return (f"{algo} {env_id}: {head} after {row['env_steps']:,} env steps, "
                f"{row['learner_updates']:,} learner updates, {row['time_s']:.1f} s "
                f"(iteration {row['iteration']})" + (f"; {self.note}" if self.note else ""))
