"""The guards around notebook 05's pieces (Ape-X): the explorers' epsilons, the driver's
throttle and the driver's learner calls in flight.

Each guard calls the attendee's function through `Guarded` (a time limit, one line naming it)
and checks what it must do, as the run goes:

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

from course_lib.pieces import Guarded


def explorer_epsilon(piece: Guarded, index: int, n: int, eps: float, alpha: float) -> float:
    """Explorer `index`'s epsilon from the attendee's `explorer_epsilons(n, eps, alpha)`,
    checked against Ape-X's formula (the run's `epsilons` and its notebook say so)."""
    from course_lib.dqn.learner import epsilon_for_explorer

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
        raise piece.broke(f"explorer {wrong} of {n} got epsilon {values[wrong]:.4g}, Ape-X's "
                          f"eps^(1 + alpha i/(n-1)) is {expected[wrong]:.4g}")
    return float(values[index])


class Throttle:
    """The driver's throttle from the attendee's `updates_allowed(inserted, replay_ratio,
    batch_size)`: the learner updates that `inserted` transitions pay for."""

    def __init__(self, piece: Guarded, replay_ratio: float, batch_size: int):
        self.piece, self.replay_ratio, self.batch_size = piece, replay_ratio, batch_size

    def __call__(self, inserted: int) -> int:
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


class Chunks:
    """The driver's learner calls from the attendee's `learner_chunks(due, submitted,
    in_flight, chunk)`: the sizes of the `train` calls to send now, with at most `most` in
    flight (`distributed.MAX_LEARNER_CALLS`)."""

    def __init__(self, piece: Guarded, chunk: int, most: int):
        self.piece, self.chunk, self.most = piece, chunk, most

    def __call__(self, due: int, submitted: int, in_flight: int) -> list[int]:
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
