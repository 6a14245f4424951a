"""The guards around notebook 05's pieces in the driver (Ape-X): the explorers' epsilons, the
driver's throttle and its learner calls in flight.

Each is a slot of the driver (`apex.ApexSlots`): it calls the attendee's function through
`Guarded` (a time limit, one line naming it), built the first time it is called (the slots
object also travels, unused, to every actor: a thread does not pickle), and checks what it
must do, as the run goes:

| piece               | where         | what the guard checks                                      |
| ------------------- | ------------- | ---------------------------------------------------------- |
| `explorer_epsilons` | each explorer | n values, each Ape-X's eps_i (`dqn.epsilon_for_explorer`)  |
| `updates_allowed`   | the driver    | a whole number, the updates the replay ratio pays for      |
| `learner_chunks`    | the driver    | chunks of 1..learner_chunk, no more than is due, at most   |
|                     |               | 2 in flight (`distributed.MAX_LEARNER_CALLS`), one if none |
"""

from __future__ import annotations

import math

import numpy as np

from course_lib.teaching.pieces.guard import Guarded


class DriverSlot:
    """A slot of the driver filled with the attendee's function `key`, guarded on first use."""

    def __init__(self, key: str, fn, timeout_s: float):
        self.key, self.fn, self.timeout_s, self._piece = key, fn, timeout_s, None

    @property
    def piece(self) -> Guarded:
        if self._piece is None:
            self._piece = Guarded(self.key, self.fn, self.timeout_s, where="the driver")
        return self._piece

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_piece": None}


class Epsilons(DriverSlot):
    """Ape-X's `epsilons(n, eps, alpha)` slot from the attendee's `explorer_epsilons`,
    checked against Ape-X's formula (the run's `epsilons` and its notebook say so)."""

    def __call__(self, n: int, eps: float, alpha: float) -> list[float]:
        from course_lib.dqn.learner import epsilon_for_explorer

        piece = self.piece
        values = piece.call("explorer_epsilons()", piece.cls, n, eps, alpha)
        try:
            values = np.asarray(values, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise piece.broke(f"it returned {type(values).__name__}, not a list of "
                              "numbers") from None
        if len(values) != n:
            raise piece.broke(f"it returned {len(values)} epsilons for {n} explorers")
        expected = [epsilon_for_explorer(i, n, eps, alpha) for i in range(n)]
        if not np.allclose(values, expected, rtol=1e-6, atol=1e-12):
            wrong = int(np.flatnonzero(~np.isclose(values, expected, rtol=1e-6, atol=1e-12))[0])
            raise piece.broke(f"explorer {wrong} of {n} got epsilon {values[wrong]:.4g}, "
                              f"Ape-X's eps^(1 + alpha i/(n-1)) is {expected[wrong]:.4g}")
        return [float(v) for v in values]


class Throttle(DriverSlot):
    """The `updates_due(transitions, cfg)` slot from the attendee's `updates_allowed(inserted,
    replay_ratio, batch_size)`: the learner updates that `inserted` transitions pay for."""

    def __call__(self, inserted: int, cfg) -> int:
        self.replay_ratio, self.batch_size = cfg.replay_ratio, cfg.batch_size
        got = self.piece.call("updates_allowed()", self.piece.cls, inserted, self.replay_ratio,
                              self.batch_size)
        if isinstance(got, bool) or not isinstance(got, int | np.integer):
            raise self.piece.broke(f"it returned {type(got).__name__} {got!r}, not a whole "
                                   "number of updates")
        pays = self.replay_ratio * inserted / self.batch_size
        if got not in (int(pays), math.floor(pays + 1e-9)):
            more = "more" if got > pays else "fewer"
            raise self.piece.broke(
                f"for {inserted:,} transitions it allowed {got:,} updates, {more} than the "
                f"replay ratio {self.replay_ratio:g} with batch {self.batch_size} pays for "
                f"({int(pays):,})")
        return int(got)


class Chunks(DriverSlot):
    """The `learner_chunks` slot from the attendee's `learner_chunks(due, submitted,
    in_flight, chunk)`: the sizes of the `train` calls to send now, with at most
    `distributed.MAX_LEARNER_CALLS` in flight."""

    def __call__(self, due: int, submitted: int, in_flight: int, chunk: int) -> list[int]:
        from course_lib.distributed import MAX_LEARNER_CALLS

        self.chunk, self.most = chunk, MAX_LEARNER_CALLS
        got = self.piece.call("learner_chunks()", self.piece.cls, due, submitted, in_flight,
                              self.chunk)
        try:
            sizes = [int(n) for n in got]
        except (TypeError, ValueError):
            raise self.piece.broke(f"it returned {type(got).__name__}, not a list of "
                                   "chunk sizes") from None
        where = f"with {due - submitted:,} updates due and {in_flight} call(s) in flight"
        if any(not 1 <= n <= self.chunk for n in sizes):
            raise self.piece.broke(f"{where} it asked for chunks {sizes}: each must be 1 to "
                                   f"learner_chunk={self.chunk} updates")
        if sum(sizes) > due - submitted:
            raise self.piece.broke(f"{where} it asked for {sum(sizes):,} updates, more than "
                                   "are due")
        if in_flight + len(sizes) > self.most:
            raise self.piece.broke(f"{where} it sent {len(sizes)} more: calls in flight "
                                   f"without bound (at most {self.most})")
        if not sizes and in_flight == 0 and due > submitted:
            raise self.piece.broke(f"{where} it sent none: the learner would wait forever")
        return sizes
