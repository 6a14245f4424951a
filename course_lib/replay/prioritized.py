"""Proportional prioritized replay (Schaul et al. 2016) over the uniform buffer's ring."""

from __future__ import annotations

import numpy as np

from course_lib.replay.sumtree import SumTree
from course_lib.replay.uniform import ReplayBuffer, positive_int, split_batches


def check_priorities(priorities, n: int) -> np.ndarray:
    """Priorities as float64 of shape (n,), all finite and >= 0, else ValueError."""
    p = np.asarray(priorities, dtype=np.float64)
    if p.shape != (n,):
        raise ValueError(f"priorities have shape {p.shape}, expected ({n},)")
    if n and not (p.min() >= 0 and p.max() < np.inf):   # a NaN fails the first comparison
        if not np.isfinite(p).all():
            raise ValueError(f"priorities must be finite, got {p[~np.isfinite(p)][0]}")
        raise ValueError(f"priorities must be >= 0, got {p[p < 0][0]}")
    return p



def stratified_targets(total: float, k: int, rng: np.random.Generator) -> np.ndarray:
    """k prefix-sum targets for a batch of k: [0, total) cut into k equal segments, one uniform
    draw in each, so that a batch covers the whole range of priorities."""
    return (np.arange(k) + rng.random(k)) * (total / k)


def importance_weights(probs: np.ndarray, beta: float) -> np.ndarray:
    """The importance weights (N P(i))^-beta of a batch drawn with probabilities `probs`,
    divided by the largest: N cancels out in that division, so the batch's own length serves."""
    w = (len(probs) * np.asarray(probs)) ** -beta
    return w / w.max()


def draw(tree: SumTree, size: int, batch_size: int, beta: float, rng: np.random.Generator,
         targets=stratified_targets, descend=SumTree.find_prefix_sum,
         weights=importance_weights) -> tuple[np.ndarray, np.ndarray]:
    """The slots of a batch of `batch_size` from the first `size` leaves of `tree`, and their
    importance weights: one stratified target per segment (`targets`), each descended to its
    slot (`descend(tree, targets)`), each slot weighted by its probability (`weights`)."""
    slots, w = draw_many(1, tree, size, batch_size, beta, rng, targets, descend, weights)
    return slots[0], w[0]


def draw_many(count: int, tree: SumTree, size: int, batch_size: int, beta: float,
              rng: np.random.Generator, targets=stratified_targets,
              descend=SumTree.find_prefix_sum,
              weights=importance_weights) -> tuple[np.ndarray, np.ndarray]:
    """`count` batches as `count` calls of `draw` give them, as (count, batch_size) arrays of
    slots and weights: each batch its own targets and its own weights' largest, and one
    descent of the tree for all of them (its cost is mostly per call, not per target)."""
    total = tree.total
    slots = descend(tree, np.concatenate([targets(total, batch_size, rng)
                                          for _ in range(count)]))
    np.minimum(slots, size - 1, out=slots)  # rounding can step past the last leaf
    probs = (tree.leaves(slots) / total).reshape(count, batch_size)
    return slots.reshape(count, batch_size), np.stack([weights(p, beta) for p in probs])


class PrioritizedReplayBuffer(ReplayBuffer):
    """Proportional prioritized replay (Schaul et al. 2016) over the same FIFO ring.

    A priority p_i >= 0 (typically |TD error|) is stored as q_i = (p_i + eps)^alpha, and

        P(i) = q_i / sum_j q_j                        sampling probability
        w_i  = (N P(i))^-beta / max_j (N P(j))^-beta  importance weight, N = len(buffer)
             = (q_i / min_j q_j)^-beta

    The paper leaves open which j the max runs over. Here it is the sampled batch (as pfrl and
    Dopamine), so each batch's largest weight is 1 and the buffer needs no min tree, which
    makes every add and update cheaper. OpenAI Baselines takes every stored transition: weights
    are then comparable between batches, but one tiny priority anywhere shrinks them all (with
    eps=1e-6 they averaged 0.06 in the measurement below; `bench/is_weights.py` keeps that
    variant as a subclass of its own).

    Why the batch: `bench/is_weights.py` trained the single-process DQN on CartPole-v1 to 475
    (6 seeds, env steps to the goal): batch 16.5K median (21K mean), buffer with eps 1e-6
    26.5K (30K), buffer with eps 1e-3 26.5K (25K), buffer with eps 1e-2 35K (33K); "batch"
    needed fewer steps than "buffer"/1e-6 on 5 of the 6 seeds. The spread between seeds is
    large (7K to 45K for "batch" alone), so read it as "no slower, and cheaper", not as a
    proven speed-up. A larger eps does not help: it flattens the priorities too.

    Sampling is stratified: the total is cut into batch_size equal segments and one target
    is drawn uniformly in each, so a batch covers the whole range of priorities. Its steps are
    the module's `draw`: `stratified_targets`, `tree.find_prefix_sum`, then
    `importance_weights`; a buffer given another `draw` (Ape-X's `draw` slot) samples with it.

    `sample` returns the fields plus
      "indices": int64 (B,), the ids of the sampled transitions (see `ReplayBuffer`): pass them
                 back to `update_priorities`, which skips any whose slot has been overwritten
                 since (an id is stale once id < inserted - capacity).
      "weights": float32 (B,), the importance weights w_i.
    New transitions get the largest priority q seen so far (1.0 at first), unless given.
    """

    def __init__(self, capacity: int, spec, alpha: float = 0.6, eps: float = 1e-6, seed=None,
                 draw=None):
        if not alpha >= 0:
            raise ValueError(f"alpha must be >= 0, got {alpha!r}")
        if not eps > 0:
            raise ValueError(f"eps must be > 0, got {eps!r}")
        if {"indices", "weights"} & set(spec):
            raise ValueError("'indices' and 'weights' are added by sample(): rename those fields")
        super().__init__(capacity, spec, seed=seed)
        self.alpha, self.eps = float(alpha), float(eps)
        self.tree = SumTree(self.capacity)
        self.max_priority = 1.0  # largest stored q so far: what a new transition gets
        # (tree, size, batch_size, beta, rng) -> (slots, weights); the parameter hides the
        # module's own `draw`
        self._draw = draw if draw is not None else globals()["draw"]

    def add(self, batch, priorities=None) -> None:
        """Append a batch with priorities (B,) >= 0, or the max priority so far if None."""
        arrays, n = self._check_batch(batch)
        if priorities is None:
            q = np.full(n, self.max_priority)
        else:
            q = self._to_q(check_priorities(priorities, n))
        first, kept = self._write(arrays, n)
        if kept:
            q = q[n - kept:]  # a batch longer than the capacity keeps its newest
            head = self.capacity - first
            self.tree.set_run(first, q[:head])  # the slots written are one run,
            if kept > head:                     # or two when the ring wraps around
                self.tree.set_run(0, q[head:])
            self.max_priority = max(self.max_priority, float(q.max()))

    def sample(self, batch_size: int, beta: float = 0.4, rng=None) -> dict[str, np.ndarray]:
        """`batch_size` transitions drawn with P(i) = q_i / sum q, plus "indices" and "weights"."""
        return self.sample_many(1, batch_size, beta, rng)[0]

    def sample_many(self, count: int, batch_size: int, beta: float = 0.4,
                    rng=None) -> list[dict[str, np.ndarray]]:
        """`count` batches, each drawn as `sample` draws one (its own stratified targets, its
        own importance weights), at today's priorities: what the learner actor trains on
        before it writes their new priorities back (`DistributedConfig.batches_per_draw`)."""
        self._check_sample_size(batch_size)
        if not beta >= 0:
            raise ValueError(f"beta must be >= 0, got {beta!r}")
        count, rng = positive_int(count, "count"), self.rng if rng is None else rng
        if self._draw is draw:                    # the module's own: one descent for all
            slots, weights = draw_many(count, self.tree, self.size, batch_size, beta, rng)
        else:                                     # a draw of the slot's: one call per batch
            slots, weights = map(np.stack, zip(*(self.draw(batch_size, beta, rng)
                                                 for _ in range(count)), strict=True))
        fields = self.gather(slots)
        fields["indices"] = self._ids_in(slots)
        fields["weights"] = weights.astype(np.float32)
        return split_batches(fields)

    def draw(self, batch_size: int, beta: float, rng) -> tuple[np.ndarray, np.ndarray]:
        """The slots of a batch and their importance weights (the module's `draw`, or the
        one this buffer was given)."""
        return self._draw(self.tree, self.size, batch_size, beta, rng)

    def update_priorities(self, indices, priorities) -> int:
        """Set new priorities for sampled ids; ids overwritten since are skipped.

        Returns how many priorities were applied. If an id appears twice, the last one wins.
        """
        ids = self._check_ids(indices)
        p = check_priorities(priorities, len(ids))
        fresh = ids >= self.inserted - self.capacity  # not overwritten since it was sampled
        q = self._to_q(p[fresh])
        if len(q):
            self.tree.set(ids[fresh] % self.capacity, q)
            self.max_priority = max(self.max_priority, float(q.max()))
        return len(q)

    # -- plumbing ---------------------------------------------------------------------------

    def _to_q(self, p: np.ndarray) -> np.ndarray:
        return (p + self.eps) ** self.alpha

    def _ids_in(self, slots: np.ndarray) -> np.ndarray:
        """The id of the transition now in each slot.

        The ring is at position pos = inserted % capacity; slots before pos were written in
        the current pass over the ring, the others in the previous one.
        """
        position = self.inserted % self.capacity
        pass_start = self.inserted - position
        return pass_start + slots - self.capacity * (slots >= position)

    def _check_ids(self, indices) -> np.ndarray:
        ids = np.asarray(indices)
        if ids.ndim != 1 or not (np.issubdtype(ids.dtype, np.integer) or ids.size == 0):
            raise ValueError(f"indices must be a 1-D integer array, got dtype {ids.dtype} "
                             f"and shape {ids.shape}")
        ids = ids.astype(np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self.inserted):
            bad = ids[(ids < 0) | (ids >= self.inserted)][0]
            raise ValueError(f"index {bad} is out of range: the ids added so far are "
                             f"[0, {self.inserted})")
        return ids

    def _state(self) -> dict[str, np.ndarray]:
        state = super()._state()
        state.update({"meta.alpha": np.float64(self.alpha), "meta.eps": np.float64(self.eps),
                      "meta.max_priority": np.float64(self.max_priority),
                      "meta.q": self.tree.leaves(np.arange(self.size))})
        return state

    @classmethod
    def _from_state(cls, state: dict[str, np.ndarray], seed=None):
        if "meta.q" not in state:
            raise ValueError("this file holds a ReplayBuffer, not a PrioritizedReplayBuffer: "
                             "load it with ReplayBuffer.load")
        options = {"alpha": float(state["meta.alpha"]), "eps": float(state["meta.eps"])}
        buffer = super()._from_state(state, seed, **options)
        buffer.tree.set_run(0, state["meta.q"])
        buffer.max_priority = float(state["meta.max_priority"])
        return buffer

