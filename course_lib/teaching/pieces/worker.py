"""The guards around a worker's two slots: the attendee's `Outbox` (notebook 05) and
`WeightsFollower` (notebook 06). Each builds the worker's part from the attendee's class and
checks, as the worker goes, what the part must do and every call it makes into a real actor.

| piece             | what its guard checks                                                |
| ----------------- | -------------------------------------------------------------------- |
| `Outbox`          | each add it sends is a batch of whole transitions with one priority  |
|                   | each; by the end of `flush()` every transition given was sent and    |
|                   | is stored when it returns (it waited for its adds)                   |
| `WeightsFollower` | it pulls the name it was given, when created, at every episode end   |
|                   | and at least every `pull_every` steps                                |
"""

from __future__ import annotations

import numpy as np
import ray

from course_lib.ray_tools import get_result
from course_lib.teaching.pieces.guard import Guarded


class _CheckedReplay:
    """The replay handle the attendee's outbox is given: checks and forwards `add.remote`,
    counts the transitions sent and keeps the refs of the adds (each one's answer is the
    replay's count of stored transitions)."""

    def __init__(self, piece: Guarded, replay_actor):
        self.piece, self.replay_actor, self.sent, self.refs = piece, replay_actor, 0, []
        self.add = self

    def remote(self, batch, priorities=None):
        if not isinstance(batch, dict) or not batch:
            raise self.piece.broke(f"it sent {type(batch).__name__} to add.remote, not a batch "
                                   "(a dict of stacked fields: stack_transitions)")
        sizes = {len(np.asarray(v)) for v in batch.values()}
        if len(sizes) != 1:
            raise self.piece.broke(f"it sent a batch whose fields have lengths {sorted(sizes)}")
        n = sizes.pop()
        if priorities is not None and np.shape(priorities) != (n,):
            raise self.piece.broke(f"it sent {np.shape(priorities)} priorities with a batch of "
                                   f"{n} transitions (one each)")
        self.sent += n
        self.refs.append(self.replay_actor.add.remote(batch, priorities))
        return self.refs[-1]


class SentOutbox:
    """A worker's outbox (the `outbox` slot) built from the attendee's `Outbox`; `flush()`
    returns the replay's count of stored transitions after the last add, and checks that every
    transition given was sent and stored."""

    def __init__(self, piece: Guarded, replay_actor, send_every: int, priorities):
        self.piece, self.replay, self.given = piece, _CheckedReplay(piece, replay_actor), 0
        piece.build(self.replay, send_every, priorities)

    def add(self, transitions: list[dict]) -> None:
        for transition in transitions:
            self.piece.method("add", transition)
        self.given += len(transitions)

    def flush(self) -> int | None:
        self.piece.method("flush")
        if self.replay.sent != self.given:
            raise self.piece.broke(f"{self.given} transitions added, {self.replay.sent} sent "
                                   "by the end of flush() (flush sends what is left)")
        refs = self.replay.refs
        _, pending = ray.wait(refs, num_returns=len(refs), timeout=0) if refs else ([], [])
        if pending:
            raise self.piece.broke(f"flush() returned with {len(pending)} add(s) still in "
                                   "flight: it must wait until what it sent is stored")
        stored = [get_result(ref) for ref in refs]
        self.replay.refs = []
        return stored[-1] if stored else None


class _CountingServer:
    """The parameter server handle the attendee's follower is given: checks and counts
    `pull.remote`."""

    def __init__(self, piece: Guarded, ps, name: str):
        self.piece, self.ps, self.name, self.pulls = piece, ps, name, 0
        self.pull = self

    def remote(self, name, known_version=-1):
        if name != self.name:
            raise self.piece.broke(f"it pulled {name!r}; the weights to follow are "
                                   f"{self.name!r}")
        self.pulls += 1
        return self.ps.pull.remote(name, known_version)


class Follower:
    """A worker's weights follower (the `follower` slot) built from the attendee's
    `WeightsFollower`; checks that it pulled when created, at every episode end (where the
    worker pulls then: SAC) and at least every `pull_every` steps."""

    def __init__(self, piece: Guarded, ps, name: str, module, pull_every: int,
                 at_episode_end: bool = True):
        self.piece, self.ps, self.pull_every = piece, _CountingServer(piece, ps, name), pull_every
        self.at_episode_end = at_episode_end
        piece.build(self.ps, name, module, pull_every)
        if self.ps.pulls == 0:
            raise piece.broke("it did not pull when created (the worker would play with "
                              "random weights)")
        self.seen, self.since_pull = self.ps.pulls, 0

    def step(self, episode_done: bool) -> None:
        self.piece.method("step", bool(episode_done))
        self.since_pull += 1
        due = (self.at_episode_end and episode_done) or self.since_pull >= self.pull_every
        if self.ps.pulls > self.seen:
            self.seen, self.since_pull = self.ps.pulls, 0
        elif due:
            why = "an episode ended" if episode_done else f"{self.since_pull} steps passed"
            raise self.piece.broke(f"{why} without a pull (pull_every={self.pull_every})")
