"""The guards around notebook 04's pieces, the steps of a prioritized buffer's draw: the
attendee's `stratified_targets`, `find_prefix_sum` and `importance_weights`, or the
`prioritized_sample` they assembled from them, which replaces the draw as a whole. Together
they fill Ape-X's `draw` slot (`apex.ApexSlots`); each guard checks every call against what
the buffer's own step would have given.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from course_lib.replay import prioritized
from course_lib.teaching.pieces.guard import Guarded


class DrawSlot:
    """Ape-X's `draw` slot from the attendee's replay pieces ({key: piece}): called once in
    the learner, it gives the prioritized buffer's draw: their `prioritized_sample` if given
    (it calls their other pieces itself), else `prioritized.draw` with theirs in place of each
    step they gave."""

    def __init__(self, pieces: dict, timeout_s: float):
        self.pieces, self.timeout_s = pieces, timeout_s

    def __call__(self):
        def guarded(key: str) -> Guarded:
            return Guarded(key, self.pieces[key], self.timeout_s)

        if "prioritized_sample" in self.pieces:
            return Draw(guarded("prioritized_sample"))
        steps = {}
        if "stratified_targets" in self.pieces:
            steps["targets"] = Targets(guarded("stratified_targets"))
        if "find_prefix_sum" in self.pieces:
            steps["descend"] = Descent(guarded("find_prefix_sum"))
        if "importance_weights" in self.pieces:
            steps["weights"] = Weights(guarded("importance_weights"))
        return partial(prioritized.draw, **steps)


def as_floats(value, what: str, piece: Guarded, shape: tuple[int, ...]) -> np.ndarray:
    """`value` as a float array of `shape`, else the piece broke its contract (names `what`)."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise piece.broke(f"it returned {type(value).__name__}, not {what}") from None
    if array.shape != shape:
        raise piece.broke(f"it returned {what} of shape {array.shape}, expected {shape}")
    return array


class Targets:
    """A buffer's `stratified_targets(total, k, rng)` from the attendee's; checks that target i
    lies in segment i, [i total / k, (i + 1) total / k)."""

    def __init__(self, piece: Guarded):
        self.piece = piece

    def __call__(self, total: float, k: int, rng) -> np.ndarray:
        got = self.piece.call("stratified_targets()", self.piece.cls, total, k, rng)
        targets = as_floats(got, "targets", self.piece, (k,))
        segment = total / k
        slack = 1e-9 * segment                       # float rounding at a segment's edges
        lo = np.arange(k) * segment
        wrong = np.flatnonzero(~((targets >= lo - slack) & (targets < lo + segment + slack)))
        if len(wrong):
            i = wrong[0]
            raise self.piece.broke(f"target {i} is {targets[i]:.4g}, outside its segment "
                                   f"[{lo[i]:.4g}, {lo[i] + segment:.4g}) of [0, {total:.4g})")
        return targets


class Descent:
    """A sum tree's `find_prefix_sum(tree, targets)` built from the attendee's one-target
    descent; checks each slot against the tree's own (vectorised) descent."""

    def __init__(self, piece: Guarded):
        self.piece = piece

    def __call__(self, tree, targets: np.ndarray) -> np.ndarray:
        descend = self.piece.cls
        slots = self.piece.call("find_prefix_sum()", lambda: np.array(
            [descend(tree.sums, tree.first_leaf, float(u)) for u in targets], dtype=np.int64))
        expected = type(tree).find_prefix_sum(tree, targets)
        wrong = np.flatnonzero(slots != expected)
        if len(wrong):
            i = wrong[0]
            raise self.piece.broke(f"for target {targets[i]:.4g} it found slot {slots[i]}, "
                                   f"the tree's own descent slot {expected[i]}")
        return slots


def segment_slots(tree, k: int, last: int) -> np.ndarray:
    """The slots where the k + 1 edges of k equal segments of the prefix sums fall (by the
    tree's own descent, at most `last`): the slot of segment i's target lies in
    [bounds[i], bounds[i + 1]]."""
    edges = np.arange(k + 1) * (tree.total / k)
    edges[-1] = np.nextafter(tree.total, 0.0)
    return np.minimum(type(tree).find_prefix_sum(tree, edges), last)


def expected_weights(probs: np.ndarray, beta: float) -> np.ndarray:
    """(N P)^-beta over its largest, written as (P / P_min)^-beta: what a weight piece must give."""
    return (probs / probs.min()) ** -beta


def check_weights(piece: Guarded, weights: np.ndarray, probs: np.ndarray, beta: float) -> None:
    """The piece broke its contract unless `weights` are the importance weights of `probs`."""
    expected = expected_weights(probs, beta)
    wrong = np.flatnonzero(~np.isclose(weights, expected, rtol=1e-4, atol=1e-6))
    if len(wrong):
        i = wrong[0]
        raise piece.broke(f"for probability {probs[i]:.4g} (smallest in the batch "
                          f"{probs.min():.4g}, beta {beta:g}) it gave weight {weights[i]:.4g}, "
                          f"expected {expected[i]:.4g}")


class Weights:
    """A buffer's `importance_weights(probs, beta)` from the attendee's; checks them against
    (P / P_min)^-beta."""

    def __init__(self, piece: Guarded):
        self.piece = piece

    def __call__(self, probs: np.ndarray, beta: float) -> np.ndarray:
        got = self.piece.call("importance_weights()", self.piece.cls, probs, beta)
        weights = as_floats(got, "weights", self.piece, probs.shape)
        check_weights(self.piece, weights, probs, beta)
        return weights


class Draw:
    """A buffer's draw `(tree, size, batch_size, beta, rng)` from the attendee's
    `prioritized_sample(tree, batch_size, beta, rng)`; checks that slot i lies where segment i of
    the prefix sums does (so: one per segment, never an empty slot) and the weights against
    (P / P_min)^-beta."""

    def __init__(self, piece: Guarded):
        self.piece = piece

    def __call__(self, tree, size: int, batch_size: int, beta: float,
                 rng) -> tuple[np.ndarray, np.ndarray]:
        last = size - 1
        got = self.piece.call("prioritized_sample()", self.piece.cls, tree, batch_size, beta, rng)
        if not (isinstance(got, tuple) and len(got) == 2):
            raise self.piece.broke(f"it returned {type(got).__name__}, not (slots, weights)")
        slots = as_floats(got[0], "slots", self.piece, (batch_size,))
        if not np.array_equal(slots, np.round(slots)):
            raise self.piece.broke(f"slot {slots[slots != np.round(slots)][0]:g} is not an "
                                   "integer")
        slots = np.minimum(slots.astype(np.int64), last)   # rounding can step past the end
        bounds = segment_slots(tree, batch_size, last)
        wrong = np.flatnonzero((slots < bounds[:-1]) | (slots > bounds[1:]))
        if len(wrong):
            i = wrong[0]
            raise self.piece.broke(f"slot {i} of the batch is {slots[i]}, but segment {i} of "
                                   f"the prefix sums lies in slots {bounds[i]} to "
                                   f"{bounds[i + 1]} (one stratified target per segment)")
        q = tree.leaves(slots)
        if not q.min() > 0:
            raise self.piece.broke(f"it sampled slot {slots[q <= 0][0]}, whose priority is 0 "
                                   "(empty or never to be sampled)")
        probs = q / tree.total
        weights = as_floats(got[1], "weights", self.piece, (batch_size,))
        check_weights(self.piece, weights, probs, beta)
        return slots, weights
