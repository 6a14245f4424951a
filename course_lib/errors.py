"""Every error a training run can end with, and the one line each is shown as.

A command or a notebook never shows a traceback from deep inside Ray or torch: it shows the
error's first line (`first_line`), which names what failed and what to do. The classes:

| error               | raised when                                                        |
| ------------------- | ------------------------------------------------------------------ |
| `RayStartError`     | Ray could not be started or reached (`ray_tools.init_ray`)        |
| `CheckpointError`   | a checkpoint is missing, corrupt, or of another algorithm or env   |
| `NonFiniteError`    | an env returned NaN or infinity (`envs.check_finite`)              |
| `UnknownNameError`  | the parameter server holds no weights under that name             |
| `OutOfTime`         | `max_time_s` ran out in the middle of an iteration                 |
| `StartError`        | an actor of a distributed run could not start, or be placed        |
| `NoGPUError`        | the learner asks for a GPU that this Ray instance cannot get       |
| `ActorFailedError`  | an actor of a running distributed run failed (the line names it)   |
| `WorkerDiedError`   | a worker kept dying past `max_worker_restarts`                     |
| `LearnerDiedError`  | the learner died: the line names the checkpoint to `--restore`     |
| `UnawaitedCallError`| a call the learner did not wait for (`publish`) failed             |
| `OneLineError`      | base of errors whose message is the whole story (shown as it is)   |

The cluster's errors are in `course_lib.cluster.common`, the command line's in `course_lib.cli`.
"""

from __future__ import annotations


def first_line(err: BaseException) -> str:
    """`Type: first line of the message` (just the type's name for an empty message)."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


class OneLineError(RuntimeError):
    """An error whose message already says where it came from and what to do: wherever it
    surfaces (inside an actor, through Ray), the run's one line is its message, unprefixed.
    The attendee's pieces raise a subclass (`teaching.pieces.PieceError`)."""


class RayStartError(RuntimeError):
    """Ray could not be started or reached; the message says what to do."""


class CheckpointError(ValueError):
    """A checkpoint that cannot be used here; the message says why and what to do."""


class NonFiniteError(ValueError):
    """An env returned a NaN or infinite observation, reward or action."""


class UnknownNameError(KeyError):
    """No weights under this name. A KeyError whose message prints without quotes."""

    def __str__(self) -> str:
        return str(self.args[0])


class OutOfTime(RuntimeError):
    """The wall-clock budget (`max_time_s`) ran out in the middle of an iteration: a driver
    that waits on actors stops waiting there, drops the iteration's unscored snapshot, and the
    run ends on its last evaluated snapshot (stop reason `time_s`)."""


class StartError(RuntimeError):
    """An actor of a distributed run could not start or could not be placed (every actor
    created was killed); the message names it, what it needs and what holds the resources."""


class NoGPUError(StartError, ValueError):
    """The learner asks for a GPU that this Ray instance does not have and cannot get."""


class ActorFailedError(RuntimeError):
    """An actor of a running distributed run failed; the message starts with its name."""


class WorkerDiedError(ActorFailedError):
    """A worker kept dying: the run stops instead of resending its work forever."""


class LearnerDiedError(ActorFailedError):
    """The learner's process died: its network and optimiser state are gone, so the run ends;
    the message names the last checkpoint and the command that continues from it."""


class UnawaitedCallError(RuntimeError):
    """A call the learner sent without waiting for it (`publish`) failed."""
