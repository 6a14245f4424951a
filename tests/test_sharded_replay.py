"""Sharded prioritized replay (`course_lib.replay.sharded`): sampled exactly as one buffer.

The reference is a real `PrioritizedReplayBuffer` holding every shard's priorities end to end.
Per-item frequencies over 10^6 draws are tested against its probabilities q_i / sum q with a
chi-squared test, and the importance weights against its own, for 1, 2 and 4 shards of skewed
sizes and priorities. The negative control is RLlib's old Ape-X sampler (every shard sampled at
the same rate whatever its total, weights per shard): it must fail the same tests.

`pytest tests/test_sharded_replay.py -s -k chi` prints the p-values.
"""

import numpy as np
import pytest
from scipy.stats import chisquare

from course_lib.replay import PrioritizedReplayBuffer
from course_lib.replay.sharded import (
    ReplayShard,
    ShardedReplay,
    ShardTotals,
    assemble,
    route_targets,
)
from course_lib.teaching.shards import equal_rate_items, skewed_shards

SPEC = {"item": ((), np.int64)}   # each transition stores its item number (its global id)
ALPHA, BETA = 0.6, 0.4
DRAWS, BATCH = 10**6, 500
#: shard sizes and how much larger each shard's priorities are: skewed on purpose, so that
#: the shards' totals differ from their shares of the items
LAYOUTS = {1: ((1000,), (1.0,)),
           2: ((700, 300), (1.0, 8.0)),
           4: ((400, 250, 200, 150), (1.0, 3.0, 0.3, 10.0))}


def filled(n_shards: int, seed: int = 0):
    """(the shards, one buffer holding every shard's priorities end to end, the priorities)."""
    setup = skewed_shards(LAYOUTS[n_shards], seed)
    return setup.shards, setup.one, setup.priorities


def equal_rate_sample(shards, batch_size: int, beta: float) -> dict[str, np.ndarray]:
    """NEGATIVE CONTROL, not a sampler to use: RLlib's old Ape-X. Every shard gives
    batch_size / k transitions whatever its total priority, each weighted within its own
    shard (each shard's `sample`, normalised by its own part's largest weight)."""
    parts = [s.sample(batch_size // len(shards), beta) for s in shards]
    return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}


def chi_squared(items: np.ndarray, one: PrioritizedReplayBuffer):
    """Chi-squared test of the items' counts against one buffer's probabilities q_i / sum q:
    scipy's result (statistic, pvalue), len(one) - 1 degrees of freedom."""
    counts = np.bincount(items, minlength=len(one))
    probs = one.tree.leaves(np.arange(len(one))) / one.tree.total
    return chisquare(counts, counts.sum() * probs)


def said(test) -> str:
    return f"chi2 = {test.statistic:,.0f}, p = {test.pvalue:.3g}"


def batches(sample) -> np.ndarray:
    """The items of DRAWS / BATCH batches of `sample()`, end to end."""
    return np.concatenate([sample()["item"] for _ in range(DRAWS // BATCH)])


@pytest.mark.parametrize("n_shards", [1, 2, 4])
def test_chi_squared_per_item_frequencies_are_one_buffers(n_shards):
    """10^6 independent draws (each a batch of one: one uniform target over [0, sum S), routed
    to its shard), counted per item, against one buffer's q_i / sum q: a calibrated test, the
    draws being independent. The equal-rate sampler, drawn the same way, fails it."""
    shards, one, p = filled(n_shards)
    rng = np.random.default_rng(1)
    replay = ShardedReplay(shards)
    total = sum(s.totals().total for s in shards)
    exact = chi_squared(replay.take(rng.random(DRAWS) * total, BETA)["item"], one)
    print(f"\n{n_shards} shard(s), {DRAWS:,} independent draws: {said(exact)}")
    assert exact.pvalue > 0.01
    if n_shards > 1:
        control = chi_squared(equal_rate_items(shards, DRAWS, rng), one)
        print(f"{n_shards} shards, equal-rate sampler (negative control): {said(control)}")
        assert control.pvalue < 1e-6


@pytest.mark.parametrize("n_shards", [1, 2, 4])
def test_chi_squared_of_stratified_batches_as_the_learner_draws_them(n_shards):
    """10^6 draws in batches of 500 through `sample` (stratified targets, as the learner
    draws). Stratifying spreads the counts less than independent draws would, so the test is
    conservative here (p near 1 for one buffer too); the equal-rate sampler still fails."""
    shards, one, _ = filled(n_shards)
    replay = ShardedReplay(shards, seed=1)
    exact = chi_squared(batches(lambda: replay.sample(BATCH, BETA)), one)
    reference = chi_squared(batches(lambda: one.sample(BATCH, BETA)), one)
    print(f"\n{n_shards} shard(s), {DRAWS:,} draws in batches of {BATCH}: sharded "
          f"{said(exact)}; one buffer {said(reference)}")
    assert exact.pvalue > 0.01 and reference.pvalue > 0.01
    if n_shards > 1:
        control = chi_squared(batches(lambda: equal_rate_sample(shards, BATCH, BETA)), one)
        print(f"{n_shards} shards, equal-rate batches (negative control): {said(control)}")
        assert control.pvalue < 1e-6


@pytest.mark.parametrize("n_shards", [1, 2, 4])
def test_the_same_seed_draws_one_buffers_items_with_its_weights(n_shards):
    """Stratified targets over [0, sum S) routed to the shards land on the items one buffer
    draws with the same generator, and their weights are that buffer's within 1e-6."""
    shards, one, _ = filled(n_shards)
    replay = ShardedReplay(shards)
    for seed in range(200):
        mine = replay.sample(BATCH, BETA, rng=np.random.default_rng(seed))
        theirs = one.sample(BATCH, BETA, rng=np.random.default_rng(seed))
        np.testing.assert_array_equal(mine["item"], theirs["item"])
        np.testing.assert_allclose(mine["weights"], theirs["weights"], rtol=0, atol=1e-6)
        assert mine["weights"].max() == 1.0


def test_weights_come_from_the_global_total_by_hand_and_the_control_gets_them_wrong():
    shards, one, p = filled(2)
    q = (p + one.eps) ** ALPHA
    batch = ShardedReplay(shards, seed=3).sample(BATCH, BETA)
    w = (len(p) * q[batch["item"]] / q.sum()) ** -BETA      # w_i = (N q_i / sum S)^-beta / max
    np.testing.assert_allclose(batch["weights"], w / w.max(), rtol=1e-6)
    control = equal_rate_sample(shards, BATCH, BETA)        # weights per shard
    w = (len(p) * q[control["item"]] / q.sum()) ** -BETA
    assert np.abs(control["weights"] - w / w.max()).max() > 0.01


def test_each_row_says_its_shard_and_its_id_there():
    shards, _, _ = filled(4)
    batch = ShardedReplay(shards, seed=0).sample(BATCH, BETA)
    starts = np.cumsum([0, 400, 250, 200])
    np.testing.assert_array_equal(batch["item"], starts[batch["shard"]] + batch["indices"])
    assert set(batch) == {"item", "shard", "indices", "weights"}


def test_route_targets_by_hand():
    """Totals 2, 0 (empty) and 3: ranges [0, 2), [2, 2) and [2, 5)."""
    shard, local = route_targets(np.array([0.0, 1.99, 2.0, 4.9, 5.0]), [2.0, 0.0, 3.0])
    np.testing.assert_array_equal(shard, [0, 0, 2, 2, 2])     # 5.0: rounding, the last shard
    np.testing.assert_allclose(local, [0.0, 1.99, 0.0, 2.9, 3.0])
    shard, _ = route_targets(np.array([0.5, 3.0]), [1.0, 2.0, 0.0])
    np.testing.assert_array_equal(shard, [0, 1])              # past the end: not the empty one


def test_priorities_go_back_to_the_shard_each_row_came_from():
    shards, _, _ = filled(2)
    replay = ShardedReplay(shards, seed=0)
    before = [s.totals().total for s in shards]
    batch = replay.sample(BATCH, BETA)
    from_1 = batch["shard"] == 1
    new = np.where(from_1, 0.0, 50.0)        # shard 0's rows up, shard 1's rows to (0 + eps)
    applied = replay.update_priorities(batch["shard"], batch["indices"], new)
    assert applied == BATCH
    after = [s.totals().total for s in shards]
    assert after[0] > before[0] and after[1] < before[1]
    q1 = shards[1].tree.leaves(batch["indices"][from_1] % shards[1].capacity)
    np.testing.assert_allclose(q1, shards[1].eps ** ALPHA)
    with pytest.raises(ValueError, match="one shape"):
        replay.update_priorities(batch["shard"], batch["indices"], new[:3])


def test_a_shard_whose_total_moved_scales_the_targets_to_its_total_now():
    """A target routed with an older total lands at the same fraction of the total now."""
    shard = ReplayShard(4, SPEC, alpha=1.0, eps=1e-12)
    shard.add({"item": np.arange(4)}, [1.0, 1.0, 1.0, 1.0])
    assert shard.totals() == ShardTotals(pytest.approx(4.0), 4)
    np.testing.assert_array_equal(shard.take([0.5, 3.5])["item"], [0, 3])
    np.testing.assert_array_equal(shard.take([1.0, 3.9], assumed_total=2.0)["item"], [2, 3])
    part = shard.take([2.5])
    np.testing.assert_allclose(part["shard_probs"], [0.25])


def test_an_empty_shard_gets_no_targets_and_a_batch_needs_enough_transitions():
    shards, _, _ = filled(2)
    empty = ReplayShard(10, SPEC, alpha=ALPHA)
    replay = ShardedReplay([shards[0], empty, shards[1]], seed=0)
    batch = replay.sample(BATCH, BETA)
    assert 1 not in batch["shard"] and {0, 2} <= set(batch["shard"])
    with pytest.raises(ValueError, match="batch_size 1001 is larger than the 1000 transitions"):
        replay.sample(1001, BETA)
    with pytest.raises(ValueError, match="every shard is empty"):
        ShardedReplay([empty]).sample(1, BETA)
    with pytest.raises(ValueError, match="this shard is empty"):
        empty.take([0.0])
    with pytest.raises(ValueError, match="at least one shard"):
        ShardedReplay([])


def test_assemble_puts_the_parts_back_in_target_order():
    parts = {0: {"item": np.array([10, 11]), "indices": np.array([0, 1]),
                 "shard_probs": np.array([0.5, 0.5])},
             1: {"item": np.array([20]), "indices": np.array([0]),
                 "shard_probs": np.array([1.0])}}
    batch = assemble(parts, np.array([0, 1, 0]), np.array([0.5, 0.5]), beta=1.0)
    np.testing.assert_array_equal(batch["item"], [10, 20, 11])
    # P = 0.25, 0.5, 0.25: w = (3P)^-1 / max = 1, 0.5, 1
    np.testing.assert_allclose(batch["weights"], [1.0, 0.5, 1.0])


# ---------------------------------------------------------------------------------------------
# On Ray: a shard actor per node, the learner's ShardSampler
# ---------------------------------------------------------------------------------------------

def started(ray_local, priorities_per_shard, alpha=ALPHA, eps=1e-6):
    """Shard actors on this node holding `priorities_per_shard`, items numbered end to end,
    each batch added as an explorer adds it; and the local ReplayShards holding the same."""
    from course_lib.replay.shard_sampler import alive_nodes, start_shards

    node = alive_nodes()[0]
    actors = start_shards([node] * len(priorities_per_shard), 1000, SPEC, alpha=alpha, eps=eps)
    local, first = [], 0
    for actor, p in zip(actors, priorities_per_shard, strict=True):
        items = {"item": np.arange(first, first + len(p))}
        assert ray_local.get(actor.add.remote(items, p)) == len(p)    # the explorer's answer
        local.append(ReplayShard(1000, SPEC, alpha=alpha, eps=eps))
        local[-1].add(items, p)
        first += len(p)
    return actors, local


def test_shard_actors_sampled_through_ray_draw_what_the_local_replay_draws(ray_local):
    from course_lib.replay.shard_sampler import ShardSampler

    _, _, p = filled(2)
    actors, local = started(ray_local, [p[:700], p[700:]])
    sampler = ShardSampler(actors, batch_size=BATCH, beta=BETA, seed=5, prefetch=False)
    replay = ShardedReplay(local, seed=5)
    for _ in range(20):
        theirs, mine = sampler.sample(), replay.sample(BATCH, BETA)
        assert set(theirs) == set(mine)
        for name in ("item", "shard", "indices"):
            np.testing.assert_array_equal(theirs[name], mine[name])
        np.testing.assert_allclose(theirs["weights"], mine["weights"], rtol=1e-6)
    assert sampler.sampled == 20 * BATCH
    assert sum(ray_local.get([a.stats.remote() for a in actors])[k]["sampled"]
               for k in range(2)) == 20 * BATCH


def test_prefetch_keeps_the_next_batch_in_flight_and_priorities_arrive_one_update_late(
        ray_local):
    """Uniform priorities at first (every weight 1). Batch 1's rows from shard 1 get priority
    1000: batch 2, requested before they were written, is drawn without them (weights all 1
    still); batch 3 is drawn with them (shard 1 runs the write before batch 3's take). Whether
    batch 3's split between the shards has them too depends on whether the write's answer was
    back when batch 3 was requested (if it was, shard 0's share is 0.4% and batch 3 is most
    likely all shard 1's hot rows, every weight 1): so the weights are checked against each
    other, not against a number."""
    from course_lib.replay.shard_sampler import ShardSampler

    actors, _ = started(ray_local, [np.ones(100), np.ones(100)], alpha=1.0, eps=1e-9)
    sampler = ShardSampler(actors, batch_size=50, beta=1.0, seed=0, prefetch=True)
    first = sampler.sample()
    # the next batch is already drawn: the shards have given out two batches, the learner one
    assert sum(s["sampled"] for s in ray_local.get([a.stats.remote() for a in actors])) == 100
    raised = first["shard"] == 1
    sampler.update_priorities(first, np.where(raised, 1000.0, 1.0))
    second, third = sampler.sample(), sampler.sample()
    assert (second["weights"] == 1.0).all()                   # one update late
    hot = set(first["indices"][raised])
    from_1 = third["shard"] == 1
    assert np.isin(third["indices"][from_1], list(hot)).mean() > 0.9   # they dominate its draw
    is_hot = from_1 & np.isin(third["indices"], list(hot))
    if (~is_hot).any():               # drawn 1000 times likelier: a hot row weighs much less
        assert third["weights"][is_hot].max() < 0.5 * third["weights"][~is_hot].min()
    sampler.close()
    totals = sampler.refresh_totals()
    assert totals[0].total == pytest.approx(100.0)            # shard 0 untouched
    assert totals[1].total == pytest.approx(100 - len(hot) + 1000 * len(hot), rel=1e-6)
    assert [t.size for t in totals] == [100, 100]


def test_a_failed_write_back_surfaces_at_the_next_call(ray_local):
    from course_lib.replay.shard_sampler import ShardSampler

    actors, _ = started(ray_local, [np.ones(100)])
    sampler = ShardSampler(actors, batch_size=10, seed=0, prefetch=False)
    batch = sampler.sample()
    sampler.update_priorities(batch, -np.ones(10))            # refused by the shard
    with pytest.raises(ValueError, match="priorities must be >= 0"):
        sampler.close()
    with pytest.raises(ValueError, match="expected \\(10,\\) \\(one per row"):
        sampler.update_priorities(batch, np.ones(3))
    with pytest.raises(ValueError, match="batch_size 500 is larger than the 100 transitions"):
        ShardSampler(actors, batch_size=500).sample()


def test_each_shard_runs_on_its_node_and_explorers_add_to_their_own_nodes(ray_local):
    from course_lib.replay.shard_sampler import alive_nodes, shard_for_node, start_shards

    node = alive_nodes()[0]
    actor, = start_shards([node], 10, SPEC)
    assert ray_local.get(actor.stats.remote())["node"] == node
    nodes = ["a", "b", "c"]
    assert [shard_for_node(n, nodes) for n in ("c", "a", "b")] == [2, 0, 1]
    # a node without a shard (lost, say): explorers spread over the others by their index
    assert [shard_for_node("gone", nodes, index=i) for i in range(4)] == [0, 1, 2, 0]
    with pytest.raises(ValueError, match="no shards"):
        shard_for_node("a", [])
    with pytest.raises(ValueError, match="at least one node id"):
        start_shards([], 10, SPEC)
