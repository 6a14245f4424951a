"""Which part of a distributed run failed, said in one line, and no actor left behind.

A distributed trainer is several actors that call one another, so an error seldom reaches the
driver from the actor at fault: when the learner dies, a worker's `add` to its replay buffer
fails and the worker's task carries the learner's death to the driver. `Parts` knows every
actor of a run by its Ray actor id and names the one that really failed:

| what reached the driver                                  | the message names            |
| -------------------------------------------------------- | ---------------------------- |
| a task failed because the actor running it died         | that actor                   |
| a task raised because an actor it called died           | the actor it called          |
| a task raised an error of its own                        | the actor that ran the task  |
| an actor's `__init__` raised, during start-up            | that actor, "could not start"|

During start-up `Parts.start` awaits each actor in turn; if anything fails (an exception, or
Ctrl-C), `Parts.kill_all` kills every actor created so far, so that their CPUs are free for the
next run in the same process (on 2 CPUs that run would otherwise wait forever).
"""

from __future__ import annotations

import ray
from ray.exceptions import RayActorError, RayTaskError

from course_lib.errors import first_line


class WorkerDiedError(RuntimeError):
    """A worker kept dying: the run stops instead of resending its work forever."""


class StartError(RuntimeError):
    """A part of a distributed trainer could not start (every actor created was killed)."""


class PartFailedError(RuntimeError):
    """A part of a running distributed trainer failed; the message starts with its name."""


class PieceError(RuntimeError):
    """An attendee's piece (`course_lib.pieces`) failed, hung or broke its contract; the
    message names the piece and the actor it ran in, and is the run's one line."""


def crash_report(err: Exception, run_path) -> str:
    """The one line a crashed run shows (the part that failed, or the error's first line);
    the full traceback goes to the run folder's `error.txt`."""
    import traceback
    from pathlib import Path

    (Path(run_path) / "error.txt").write_text("".join(traceback.format_exception(err)))
    named = isinstance(err, PartFailedError | StartError | WorkerDiedError)
    return (f"{err if named else 'the run crashed: ' + first_line(err)}; results so far in "
            f"{run_path} (traceback in error.txt)")


def reason(err: BaseException) -> str:
    """One line saying why `err` happened: the original error of a task (`Type: message`),
    the last line of the traceback of an actor whose `__init__` raised, or Ray's own first
    line (for an actor killed or lost with its process)."""
    if isinstance(err, RayTaskError):
        return reason(err.cause) if err.cause is not None else _last_line(str(err))
    if isinstance(err, RayActorError) and err.actor_init_failed:
        line = _last_line(str(err))        # "...Traceback...\nModule.Error: what went wrong"
        return line.split("PieceError: ", 1)[-1]   # a piece's message says it all
    if isinstance(err, RayActorError):     # Ray's line, then its "\tkey: value" details,
        lines = str(err).strip().splitlines() or [type(err).__name__]   # then why, if known
        why = [line.strip() for line in lines[1:] if line.strip() and not line.startswith("\t")]
        return " ".join(lines[:1] + why[-1:])
    return first_line(err)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "unknown error"


def actor_died(err: BaseException) -> RayActorError | None:
    """The RayActorError behind `err`: `err` itself (the actor running the task died) or the
    error its task raised (an actor it called died); None for any other error."""
    if isinstance(err, RayTaskError):      # checked first: Ray subclasses it per cause type
        return err.cause if isinstance(err.cause, RayActorError) else None
    return err if isinstance(err, RayActorError) else None


class Parts:
    """Every actor of one run, by name ("parameter server", "learner", "explorer 0", ...)."""

    def __init__(self):
        self.names: dict[str, str] = {}    # Ray actor id (hex) -> name
        self.actors: list = []

    def add(self, name: str, actor):
        """Register `actor` under `name`; returns it."""
        self.names[actor._actor_id.hex()] = name
        self.actors.append(actor)
        return actor

    def name_of(self, actor_id: str | None, default: str) -> str:
        return self.names.get(actor_id, default) if actor_id else default

    def start(self, name: str, ref: ray.ObjectRef):
        """`ray.get(ref)` of a call that shows `name` has started; StartError naming it if
        not ("explorer 0 could not start: NameNotFound: ...")."""
        try:
            return ray.get(ref)
        except ray.exceptions.RayError as err:
            dead = actor_died(err)
            part = self.name_of(dead.actor_id, name) if dead is not None else name
            hint = ("; register the env in a module the workers import (an env registered "
                    "only in a notebook is unknown to the actors)"
                    if "gymnasium.error" in str(err) and "NotFound" in str(err) else "")
            raise StartError(f"{part} could not start: {reason(err)}{hint}") from None

    def failure(self, err: BaseException, part: str) -> PartFailedError:
        """The error to raise when a task of `part` failed with `err` (see the table above)."""
        dead = actor_died(err)
        if dead is not None:
            return PartFailedError(f"the {self.name_of(dead.actor_id, part)} died: "
                                   f"{reason(dead)}")
        if isinstance(getattr(err, "cause", None), PieceError):
            return PartFailedError(str(err.cause))       # it names the piece and the actor
        return PartFailedError(f"{part} failed: {reason(err)}")

    def is_own_death(self, err: BaseException, part: str) -> bool:
        """Whether `err` says that `part` itself died (not an actor it called)."""
        dead = actor_died(err)
        return dead is not None and self.name_of(dead.actor_id, part) == part

    def kill_all(self) -> None:
        """Kill every actor registered (they are gone for good: no restarts)."""
        for actor in self.actors:
            ray.kill(actor)
