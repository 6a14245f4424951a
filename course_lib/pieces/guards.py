"""The guards around the attendee's pieces, one per piece: each builds the actor's piece from
the attendee's class or function (through `Guarded`) and checks, as the actor goes, what the
piece must do (see `course_lib.pieces`)."""

from __future__ import annotations

import math

from course_lib.pieces import Guarded


class _CountingReplay:
    """The replay handle the attendee's outbox is given: forwards `add.remote` and counts the
    transitions sent; keeps the last add's ref (the replay's count of stored transitions)."""

    def __init__(self, replay):
        self.replay, self.sent, self.last = replay, 0, None
        self.add = self

    def remote(self, batch, priorities=None):
        self.sent += len(next(iter(batch.values())))
        self.last = self.replay.add.remote(batch, priorities)
        return self.last


class SentOutbox:
    """A worker's outbox built from the attendee's `Outbox`; `flush()` returns the replay's
    count of stored transitions after the last add, and checks that every transition given
    was sent."""

    def __init__(self, piece: Guarded, replay, send_every: int, priorities):
        self.piece, self.replay, self.given = piece, _CountingReplay(replay), 0
        piece.build(self.replay, send_every, priorities)

    def add(self, transitions: list[dict]) -> None:
        for transition in transitions:
            self.piece.method("add", transition)
        self.given += len(transitions)

    def flush(self) -> int | None:
        from course_lib.param_server import get_result

        self.piece.method("flush")
        if self.replay.sent != self.given:
            raise self.piece.broke(f"{self.given} transitions added, {self.replay.sent} sent "
                                   "by the end of flush() (flush sends what is left)")
        return None if self.replay.last is None else get_result(self.replay.last)


class _CountingServer:
    """The parameter server handle the attendee's follower is given: counts `pull.remote`."""

    def __init__(self, ps):
        self.ps, self.pulls = ps, 0
        self.pull = self

    def remote(self, name, known_version=-1):
        self.pulls += 1
        return self.ps.pull.remote(name, known_version)


class Follower:
    """A worker's weights follower built from the attendee's `WeightsFollower`; checks that it
    pulled when created, at every episode end and at least every `pull_every` steps."""

    def __init__(self, piece: Guarded, ps, name: str, module, pull_every: int):
        self.piece, self.ps, self.pull_every = piece, _CountingServer(ps), pull_every
        piece.build(self.ps, name, module, pull_every)
        if self.ps.pulls == 0:
            raise piece.broke("it did not pull when created (the worker would play with "
                              "random weights)")
        self.seen, self.since_pull = self.ps.pulls, 0

    def step(self, episode_done: bool) -> None:
        self.piece.method("step", bool(episode_done))
        self.since_pull += 1
        due = episode_done or self.since_pull >= self.pull_every
        if self.ps.pulls > self.seen:
            self.seen, self.since_pull = self.ps.pulls, 0
        elif due:
            why = "an episode ended" if episode_done else f"{self.since_pull} steps passed"
            raise self.piece.broke(f"{why} without a pull (pull_every={self.pull_every})")


def steps_per_pull(pull_every: int, num_envs: int) -> int:
    """A follower steps once per step of all `num_envs` envs: `pull_every` env steps in those."""
    return max(1, math.ceil(pull_every / num_envs))
