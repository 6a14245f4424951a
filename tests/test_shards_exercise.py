"""Notebook 08's appendix exercise, `route_targets`, and the chi-squared test it is shown with
(`course_lib.teaching.shards`): wrong routings are named for what they get wrong, the right one
passes, and the test's p-value is scipy's."""

import numpy as np
import pytest
from scipy.stats import chisquare

from course_lib.replay.sharded import route_targets
from course_lib.teaching import exercises, shards


def equal_parts(targets, totals):
    """Wrong: [0, sum S) cut into equal parts, one per shard, whatever the shards' totals."""
    totals = np.asarray(totals, dtype=np.float64)
    width = totals.sum() / len(totals)
    shard = np.minimum((targets // width).astype(int), len(totals) - 1)
    return shard, (targets - shard * width) * totals[shard] / width


def starts_own_range_at_its_end(targets, totals):
    """Wrong: side="left", so a target at C_k goes to the shard before (whose range ends there)."""
    ends = np.cumsum(totals)
    shard = np.searchsorted(ends, targets, side="left")
    return shard, targets - (ends - totals)[shard]


def not_shifted(targets, totals):
    """Wrong: the right shard, but the global target, past the end of the shard's own tree."""
    return np.searchsorted(np.cumsum(totals), targets, side="right"), targets


def sorted_batch(targets, totals):
    """Wrong: right for sorted targets; a batch's rows come back in another order."""
    return route_targets(np.sort(targets), totals)


def hand_case_hard_coded(targets, totals):
    """A loophole: the checker's small case answered by rote, equal parts otherwise."""
    if list(totals) == [2.0, 0.0, 3.0]:
        return np.array([2, 0, 2, 0]), np.array([2.5, 0.5, 0.0, 1.999])
    return equal_parts(targets, totals)


@pytest.mark.parametrize("wrong,words", [
    (equal_parts, "total priority is 0"),
    (starts_own_range_at_its_end, "where shard 2's range [2, 5) starts"),
    (not_shifted, "each shard descends its own tree"),
    (sorted_batch, "in the targets' order"),
    (hand_case_hard_coded, "draw items unlike one buffer"),
])
def test_a_wrong_routing_is_named_for_what_it_gets_wrong(wrong, words):
    result = exercises.check_route_targets(wrong)
    assert not result.passed and words in result.message, repr(result)


def test_the_right_routing_passes_and_draws_each_shard_by_its_share_of_the_total():
    assert exercises.check_route_targets(route_targets).passed
    setup = shards.skewed_shards()
    drawn = shards.shares(shards.routed_items(route_targets, setup, 100_000), setup)
    assert np.allclose(drawn, setup.totals / setup.totals.sum(), atol=0.01)
    rng = np.random.default_rng(1)
    control = shards.shares(shards.equal_rate_items(setup.shards, 100_000, rng), setup)
    assert np.allclose(control, 1 / 3, atol=0.01)


def test_the_p_value_is_scipys_and_only_the_control_is_rejected():
    setup = shards.skewed_shards()
    p_values = []
    for seed in range(6):
        items = shards.routed_items(route_targets, setup, 50_000, seed=seed)
        ours = shards.chi_squared(items, setup.one)
        counts = np.bincount(items, minlength=len(setup.one))
        probs = setup.one.tree.leaves(np.arange(len(setup.one))) / setup.one.tree.total
        reference = chisquare(counts, counts.sum() * probs)
        assert ours.statistic == pytest.approx(reference.statistic)
        assert ours.pvalue == pytest.approx(reference.pvalue, abs=1e-9)
        p_values.append(ours.pvalue)
    assert min(p_values) > 1e-3 and max(p_values) < 0.999, p_values   # neither 0 nor pinned at 1
    control_items = shards.equal_rate_items(setup.shards, 50_000, np.random.default_rng(1))
    control = shards.chi_squared(control_items, setup.one)
    assert control.pvalue < 1e-12 and control.statistic > 100 * control.dof


def test_the_notebooks_table_says_whose_routing_ran():
    table = shards.against_one_buffer(route_targets, draws=20_000)
    assert "course_lib's route_targets" in table and "equal rate per shard (control)" in table
