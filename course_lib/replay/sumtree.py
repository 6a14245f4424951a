"""The sum tree behind prioritized sampling, updated and searched in batches."""

from __future__ import annotations

import numpy as np


class SumTree:
    """A sum tree over `capacity` leaves, updated and searched in batches.

    A complete binary tree stored in a flat float64 array: node 1 is the root,
    node i has children 2i and 2i+1, and leaf `slot` is node L + slot, where L is the power
    of two >= capacity (the depth is log2 L, 20 levels for 2**20 leaves)::

        sums[i] = sums[2i] + sums[2i+1]           sums[1] = total priority

    Empty leaves hold 0. Level k of the tree is nodes [2^k, 2^(k+1)); the leaves are level
    `depth`.
    """

    #: `set` recomputes a whole level when it has at most this many nodes per updated leaf
    WHOLE_LEVEL_FACTOR = 4

    def __init__(self, capacity: int):
        self.first_leaf = 1 << (capacity - 1).bit_length()  # L
        self.depth = self.first_leaf.bit_length() - 1       # log2 L
        self._levels = np.arange(self.depth + 1)             # shifts from a node to its ancestors
        self.sums = np.zeros(2 * self.first_leaf)

    @property
    def total(self) -> float:
        return float(self.sums[1])

    def leaves(self, slots) -> np.ndarray:
        return self.sums[self.first_leaf + np.asarray(slots)]

    def set(self, slots: np.ndarray, values: np.ndarray) -> None:
        """Set leaves `slots` to `values`, then recompute their ancestors level by level.

        Deep levels (many nodes): only the parents of the touched nodes, all at once,
        parent = left child + right child. A parent reached twice is written twice with the
        same value, so duplicate slots are safe (for a slot given twice, the last value wins).
        Shallow levels (few nodes): the whole level in one vectorised op, cheaper than
        gathering and scattering the touched parents.
        """
        nodes = self.first_leaf + np.asarray(slots, dtype=np.int64)
        self.sums[nodes] = values
        level = self.depth  # the level `nodes` are on
        while level > 0 and 2 ** (level - 1) > self.WHOLE_LEVEL_FACTOR * len(nodes):
            nodes = nodes >> 1
            left = nodes << 1
            right = left + 1
            self.sums[nodes] = self.sums[left] + self.sums[right]
            level -= 1
        for parent_level in reversed(range(level)):
            self._recompute(2**parent_level, 2 ** (parent_level + 1))

    def set_run(self, first_slot: int, values: np.ndarray) -> None:
        """Set the consecutive leaves first_slot, first_slot + 1, ... (what a ring write touches).

        Their parents on each level are again consecutive nodes [lo, hi): recompute them level
        by level with one vectorised op on slices, until they have narrowed to one node. Above
        that node, its path to the root is recomputed in one pass (`_recompute_path`), so a
        small run does not pay one numpy call per level all the way up.
        """
        if len(values) == 0:
            return
        lo = self.first_leaf + first_slot
        hi = lo + len(values)
        self.sums[lo:hi] = values
        while hi - lo > 1:
            lo, hi = lo // 2, (hi + 1) // 2  # the parents of nodes [lo, hi)
            self._recompute(lo, hi)
        self._recompute_path(lo)

    def _recompute(self, first: int, end: int) -> None:
        """Nodes [first, end) from their children [2 first, 2 end): strided slices."""
        left, right = slice(2 * first, 2 * end, 2), slice(2 * first + 1, 2 * end, 2)
        np.add(self.sums[left], self.sums[right], out=self.sums[first:end])

    def _recompute_path(self, node: int) -> None:
        """Every ancestor of `node`, whose own value is up to date, in one vectorised pass.

        Going up, each ancestor is the previous one plus the sibling of the previous one, and
        no sibling on the path changes: so the ancestors are a cumulative sum over [node, its
        sibling, its parent's sibling, ...]. `np.add.accumulate` adds in the same order as the
        level-by-level recompute, so the sums come out bit for bit equal.
        """
        path = node >> self._levels[:node.bit_length()]   # node, its parent, ..., the root (1)
        terms = np.empty_like(path)         # node, then the sibling of each path node but the root
        terms[0], terms[1:] = node, path[:-1] ^ 1
        self.sums[path[1:]] = np.add.accumulate(self.sums[terms])[1:]

    def find_prefix_sum(self, targets: np.ndarray) -> np.ndarray:
        """For each target u in [0, total), the slot i with  sum_{j<i} v_j <= u < sum_{j<=i} v_j.

        All targets descend together from the root: go right when u >= sum of the left
        child (and subtract that sum from u), else go left.
        """
        u = np.array(targets, dtype=np.float64)
        nodes = np.ones(len(u), dtype=np.int64)  # all start at the root
        for _ in range(self.depth):
            nodes <<= 1  # the left child
            left_sums = self.sums[nodes]
            go_right = u >= left_sums
            u -= left_sums * go_right
            nodes += go_right
        return nodes - self.first_leaf

