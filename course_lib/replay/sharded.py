"""Prioritized replay in shards (one per node), sampled exactly as one buffer would be.

One `PrioritizedReplayBuffer` draws a batch of B by cutting its total priority [0, S) into B
equal segments, drawing one target in each (`stratified_targets`) and descending its sum tree
to the transition whose prefix-sum range holds the target. Put k shards' leaves end to end and
they are the leaves of one tree: shard k holds the range [C_k, C_k + S_k) of the prefix sums,
where S_k is its total priority and C_k = S_0 + ... + S_{k-1}. So the sampler

1. reads each shard's total priority S_k and size n_k (`ReplayShard.totals`);
2. draws B stratified targets over [0, sum S), as one buffer would (`stratified_targets`);
3. sends shard k the targets in its range, shifted by C_k (`route_targets`): target t goes to
   the shard with C_k <= t < C_k + S_k, as the local target t - C_k;
4. each shard descends its own tree (`ReplayShard.take`) and returns those transitions, their
   ids and their probability within the shard, q_i / S_k;
5. the batch is put back in target order, with importance weights from the global total and
   size (`assemble`): P(i) = (S_k / sum S) (q_i / S_k) = q_i / sum S and
   w_i = (N P(i))^-beta / max over the batch, N = sum n_k: one buffer's weights (N cancels in
   the division by the batch's largest weight, as in `prioritized.importance_weights`).

Every target lands on the transition that one buffer holding the shards' leaves end to end
would give it: per-item frequencies and weights are that buffer's (tests/test_sharded_replay.py
checks both, with a chi-squared test, for 1, 2 and 4 shards). What RLlib's old Ape-X did
instead, sample every shard at the same rate whatever its total, with weights per shard, over-
samples the shards whose priorities are low and fails the same test (the test's negative
control).

| piece           | what                                                                      |
| --------------- | ------------------------------------------------------------------------- |
| `ReplayShard`   | a `PrioritizedReplayBuffer` that reports its totals and takes a batch at   |
|                 | given local targets                                                       |
| `route_targets` | which shard each global target goes to, and its local target              |
| `assemble`      | the shards' parts in target order, with the global importance weights      |
| `ShardedReplay` | k shards in this process, sampled as one buffer: the whole scheme, no Ray  |

`course_lib.replay.server.ShardStoreActor` runs one shard as an actor on its node, and
`course_lib.replay.shard_sampler.ShardSampler` is the learner's side of it.

One difference from one buffer, on purpose: a transition added without a priority gets its
shard's largest priority so far, not the largest over every shard (Ape-X's explorers always
send initial priorities, so the learner never relies on it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from course_lib.replay.prioritized import (
    PrioritizedReplayBuffer,
    importance_weights,
    stratified_targets,
)

SHARD_PROBS = "shard_probs"   # the field of a shard's part: q_i / S_k, the probability in it


class ShardTotals(NamedTuple):
    """What a shard reports: its total priority S_k (the sum of its q) and its size n_k."""

    total: float
    size: int


class ReplayShard(PrioritizedReplayBuffer):
    """One shard of a sharded replay: a prioritized buffer that also reports its totals and
    takes transitions at targets the sampler routed to it (`take`)."""

    def totals(self) -> ShardTotals:
        return ShardTotals(self.tree.total, self.size)

    def take(self, targets, assumed_total: float | None = None) -> dict[str, np.ndarray]:
        """The transitions at local prefix-sum `targets` (each in [0, S_k)), in their order:
        the fields, "indices" (their ids, for `update_priorities`) and "shard_probs" (q_i / S_k,
        the probability of drawing each within this shard).

        `assumed_total`: the total the sampler routed the targets with. A shard whose total
        has changed since it reported it (adds, priorities written back) scales the targets to
        its total now, so that its draw follows its priorities now; the sampler's split between
        shards is then the one of its report (see `shard_sampler`). Equal totals: no scaling.
        """
        u = np.asarray(targets, dtype=np.float64)
        if u.ndim != 1:
            raise ValueError(f"targets must be a 1-D array, got shape {u.shape}")
        if len(u) and self.size == 0:
            raise ValueError("this shard is empty: route no targets to it (its total is 0)")
        total = self.tree.total
        if assumed_total is not None and assumed_total > 0 and assumed_total != total:
            u = u * (total / assumed_total)
        slots = self.tree.find_prefix_sum(u)
        np.minimum(slots, max(self.size - 1, 0), out=slots)  # rounding past the last leaf
        part = self.gather(slots)
        part["indices"] = self._ids_in(slots)
        part[SHARD_PROBS] = self.tree.leaves(slots) / total if len(slots) else np.zeros(0)
        return part


def route_targets(targets: np.ndarray, totals) -> tuple[np.ndarray, np.ndarray]:
    """(shard of each target, its local target): target t goes to the shard k whose range
    [C_k, C_k + S_k) of the shards' concatenated prefix sums holds it, as t - C_k. An empty
    shard (S_k = 0) has an empty range and gets none; a target that rounding put at or past
    the sum goes to the last shard that holds anything."""
    totals = np.asarray(totals, dtype=np.float64)
    ends = np.cumsum(totals)                             # C_k + S_k
    starts = np.concatenate(([0.0], ends[:-1]))         # C_k, exactly the previous end
    shard = np.searchsorted(ends, targets, side="right")
    np.minimum(shard, np.flatnonzero(totals > 0)[-1], out=shard)
    return shard, targets - starts[shard]


def assemble(parts: dict[int, dict[str, np.ndarray]], shard: np.ndarray, shares: np.ndarray,
             beta: float) -> dict[str, np.ndarray]:
    """One batch from the shards' parts: row j is the transition of target j (`shard[j]` says
    whose; shard k's part holds its targets' rows in target order). Adds "shard", and
    "weights": w = (N P)^-beta / max with P(i) = shares[k] * q_i / S_k, shares[k] = S_k / sum S
    as routed: the probability the draw actually gave each row."""
    first = next(iter(parts.values()))
    batch = {name: np.empty((len(shard), *array.shape[1:]), array.dtype)
             for name, array in first.items() if name != SHARD_PROBS}
    probs = np.empty(len(shard))
    for k, part in parts.items():
        rows = shard == k                 # a boolean mask keeps the targets' order
        for name, out in batch.items():
            out[rows] = part[name]
        probs[rows] = shares[k] * part[SHARD_PROBS]
    batch["shard"] = shard.astype(np.int64)
    batch["weights"] = importance_weights(probs, beta).astype(np.float32)
    return batch


def check_enough(totals: Sequence[ShardTotals], batch_size: int) -> None:
    """ValueError unless the shards hold at least `batch_size` transitions between them."""
    held = sum(t.size for t in totals)
    if held == 0:
        raise ValueError("cannot sample: every shard is empty")
    if batch_size > held:
        raise ValueError(f"batch_size {batch_size} is larger than the {held} transitions "
                         f"the {len(totals)} shards hold")


class ShardedReplay:
    """k `ReplayShard`s in this process, sampled as one buffer holding their priorities end
    to end: the maths of a sharded replay, without Ray (see the module docstring).

    | call                                         | does                                 |
    | -------------------------------------------- | ------------------------------------ |
    | `add(k, batch, priorities=None)`             | stores a batch in shard k            |
    | `sample(batch_size, beta=0.4, rng=None)`     | fields + "shard", "indices", "weights" |
    | `take(targets, beta=0.4)`                    | the same at given global targets     |
    | `update_priorities(shard, indices, prios)`   | each id's new priority, in its shard |
    """

    def __init__(self, shards: Sequence[ReplayShard], seed=None):
        if not shards:
            raise ValueError("a sharded replay needs at least one shard")
        self.shards = list(shards)
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return sum(len(s) for s in self.shards)

    def add(self, shard: int, batch, priorities=None) -> None:
        self.shards[shard].add(batch, priorities)

    def sample(self, batch_size: int, beta: float = 0.4, rng=None) -> dict[str, np.ndarray]:
        """`batch_size` transitions, drawn as one buffer holding every shard's would draw them."""
        if not beta >= 0:
            raise ValueError(f"beta must be >= 0, got {beta!r}")
        totals = [s.totals() for s in self.shards]
        check_enough(totals, batch_size)
        total = sum(t.total for t in totals)
        return self.take(stratified_targets(total, batch_size, self.rng if rng is None else rng),
                         beta, totals)

    def take(self, targets, beta: float = 0.4, totals=None) -> dict[str, np.ndarray]:
        """The transitions at global prefix-sum `targets` (in [0, sum S)), one row per target:
        `sample`'s steps 3 to 5. `totals`: the shards' `ShardTotals`, read now if None."""
        totals = totals or [s.totals() for s in self.shards]
        S = np.array([t.total for t in totals])
        shard, local = route_targets(np.asarray(targets, dtype=np.float64), S)
        parts = {k: self.shards[k].take(local[shard == k], S[k]) for k in np.unique(shard)}
        return assemble(parts, shard, S / S.sum(), beta)

    def update_priorities(self, shard, indices, priorities) -> int:
        """New priorities for sampled rows, each written to the shard it came from; returns
        how many were applied (ids overwritten since are skipped, as in one buffer)."""
        shard, indices = np.asarray(shard), np.asarray(indices)
        priorities = np.asarray(priorities)
        if not shard.shape == indices.shape == priorities.shape:
            raise ValueError(f"shard, indices and priorities must have one shape, got "
                             f"{shard.shape}, {indices.shape} and {priorities.shape}")
        return sum(self.shards[k].update_priorities(indices[shard == k], priorities[shard == k])
                   for k in np.unique(shard))
