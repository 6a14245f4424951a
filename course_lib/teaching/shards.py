"""Notebook 08's appendix: a sharded replay drawn as one buffer, checked with a chi-squared test.

`course_lib.replay.sharded` splits a prioritized replay into shards (one per node) and samples
them exactly as one buffer holding their priorities end to end would. The step that makes it
exact is `route_targets`: each of a batch's prefix-sum targets goes to the shard whose range of
the concatenated prefix sums holds it. Here the notebook's exercise (the attendee writes that
step) is run through real `ReplayShard`s, and the items it draws are counted against one
buffer's probabilities q_i / sum q:

    chi2 = sum_i (count_i - D P(i))^2 / (D P(i)),   D draws, len(one) - 1 degrees of freedom

A right routing gives a p-value anywhere in (0, 1), uniformly over seeds; a wrong one (RLlib's
old Ape-X drew every shard at the same rate, `equal_rate_items`) gives p = 0. The p-value is the
chi-squared survival function, the regularized upper incomplete gamma function Q(df/2, chi2/2),
from torch (scipy is not in the attendee's install); tests/test_sharded_replay.py checks the
same property with scipy.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from course_lib.replay import PrioritizedReplayBuffer
from course_lib.replay.sharded import ReplayShard

SPEC = {"item": ((), np.int64)}          # each transition stores its item number, its global id
ALPHA = 0.6
#: shard sizes and how much larger each shard's priorities are than the first's: skewed on
#: purpose, so that a shard's share of the total priority differs from its share of the items
LAYOUT = ((300, 150, 50), (1.0, 6.0, 0.3))


class Shards(NamedTuple):
    shards: list[ReplayShard]            # the shards, items numbered end to end
    one: PrioritizedReplayBuffer         # one buffer holding every shard's priorities
    totals: np.ndarray                   # each shard's total priority S_k
    priorities: np.ndarray               # every item's priority p_i (before eps and alpha)


def skewed_shards(layout=LAYOUT, seed: int = 0) -> Shards:
    """Shards of `layout`'s sizes and priority scales, and one buffer holding the same items
    with the same priorities, end to end."""
    sizes, scales = layout
    rng = np.random.default_rng(seed)
    p = np.concatenate([scale * rng.uniform(0.2, 2.0, size)
                        for size, scale in zip(sizes, scales, strict=True)])
    one = PrioritizedReplayBuffer(len(p), SPEC, alpha=ALPHA, seed=seed)
    one.add({"item": np.arange(len(p))}, p)
    shards, first = [], 0
    for size in sizes:
        shard = ReplayShard(size, SPEC, alpha=ALPHA, seed=seed)
        shard.add({"item": np.arange(first, first + size)}, p[first:first + size])
        shards.append(shard)
        first += size
    return Shards(shards, one, np.array([s.totals().total for s in shards]), p)


def routed_items(route_targets, setup: Shards, draws: int, seed: int = 1) -> np.ndarray:
    """The items of `draws` independent targets, uniform over [0, sum S), each routed by
    `route_targets(targets, totals)` -> (shard of each target, its local target) and found by
    its shard descending its own tree (`ReplayShard.take`). Independent draws make the counts
    multinomial, as the chi-squared test assumes; a learner's stratified batch
    (`stratified_targets`) draws the same probabilities with less spread, which would push
    the test's p-value towards 1."""
    rng = np.random.default_rng(seed)
    targets = rng.random(draws) * setup.totals.sum()
    shard, local = (np.asarray(a) for a in route_targets(targets, setup.totals))
    if shard.shape != targets.shape or local.shape != targets.shape:
        raise ValueError(f"route_targets returned arrays of shapes {shard.shape} and "
                         f"{local.shape} for {targets.shape} targets: one of each per target")
    if not np.isin(shard, np.arange(len(setup.shards))).all():
        raise ValueError("route_targets sent a target to a shard that does not exist")
    items = np.empty(len(targets), dtype=np.int64)
    for k, piece in enumerate(setup.shards):
        mine = shard == k
        if mine.any():
            items[mine] = piece.take(local[mine], setup.totals[k])["item"]
    return items


def equal_rate_items(shards: list[ReplayShard], draws: int, rng) -> np.ndarray:
    """NEGATIVE CONTROL, not a sampler to use (RLlib's old Ape-X): every draw picks a shard
    with equal chances whatever its total priority, then an item in it by its priority."""
    shard = rng.integers(0, len(shards), draws)
    items = np.empty(draws, dtype=np.int64)
    for k, piece in enumerate(shards):
        mine = shard == k
        items[mine] = piece.take(rng.random(mine.sum()) * piece.totals().total)["item"]
    return items


class ChiSquared(NamedTuple):
    statistic: float
    dof: int
    pvalue: float


def chi_squared(items: np.ndarray, one: PrioritizedReplayBuffer) -> ChiSquared:
    """The items' counts against `one` buffer's probabilities q_i / sum q (see the module
    docstring): the statistic, its degrees of freedom and its p-value."""
    counts = np.bincount(items, minlength=len(one))
    expected = counts.sum() * one.tree.leaves(np.arange(len(one))) / one.tree.total
    statistic = float(((counts - expected) ** 2 / expected).sum())
    dof = len(one) - 1
    p = torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64),
                                torch.tensor(statistic / 2, dtype=torch.float64))
    return ChiSquared(statistic, dof, float(p))


def shares(items: np.ndarray, setup: Shards) -> np.ndarray:
    """The share of the draws that came from each shard."""
    ends = np.cumsum([len(s) for s in setup.shards])
    return np.bincount(np.searchsorted(ends, items, side="right"),
                       minlength=len(setup.shards)) / len(items)


def against_one_buffer(route_targets, draws: int = 200_000) -> str:
    """A table for the notebook: the shards' share of the draws and the chi-squared test
    against one buffer, for `route_targets` and for the equal-rate control."""
    setup = skewed_shards()
    rows = [("your route_targets" if getattr(route_targets, "__module__", "") == "__main__"
             else "course_lib's route_targets", routed_items(route_targets, setup, draws)),
            ("equal rate per shard (control)",
             equal_rate_items(setup.shards, draws, np.random.default_rng(1)))]
    k = len(setup.shards)
    head = (f"{'sampler':32} " + " ".join(f"shard {i}" for i in range(k))
            + f"   chi2 ({len(setup.one) - 1} dof)   p-value")
    lines = [head, f"{'one buffer: S_k / sum S':32} "
             + " ".join(f"{s:7.3f}" for s in setup.totals / setup.totals.sum())]
    for name, items in rows:
        test = chi_squared(items, setup.one)
        lines.append(f"{name:32} " + " ".join(f"{s:7.3f}" for s in shares(items, setup))
                     + f"   {test.statistic:15,.0f}   {test.pvalue:.3g}")
    return "\n".join(lines) + f"\n({draws:,} independent draws each)"
