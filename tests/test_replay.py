"""Tests for course_lib.replay: ring, prioritized sampling, n-step returns, the Ray actor."""

import functools

import numpy as np
import pytest
import ray
from hypothesis import given, settings, strategies as st

from course_lib.replay import (
    NStepBuffer,
    PrioritizedReplayBuffer,
    ReplayBuffer,
    ReplayStoreActor,
    SumTree,
    prioritized,
    stack_transitions,
    transition_spec,
)

SPEC = transition_spec(obs_shape=(4,))
EPS = 1e-6


def make_batch(start: int, n: int) -> dict:
    """n transitions whose obs[:, 0] (and reward) count up from `start`, to recognise them."""
    serial = np.arange(start, start + n)
    obs = np.zeros((n, 4), np.float32)
    obs[:, 0] = serial
    return {"obs": obs, "action": serial % 2, "reward": serial.astype(np.float32),
            "next_obs": obs + 1, "terminated": serial % 7 == 0}


def oldest_first(buffer) -> dict:
    """The stored transitions in insertion order, read straight from the ring."""
    slots = np.arange(buffer.inserted - len(buffer), buffer.inserted) % buffer.capacity
    return {name: array[slots] for name, array in buffer.storage.items()}


def snapshot(buffer) -> dict:
    state = {name: array.copy() for name, array in buffer.storage.items()}
    state["inserted"], state["size"] = buffer.inserted, len(buffer)
    if isinstance(buffer, PrioritizedReplayBuffer):
        state["sums"] = buffer.tree.sums.copy()
        state["max_priority"] = buffer.max_priority
    return state


def assert_same_state(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def q_of(p, alpha):
    return (np.asarray(p, dtype=np.float64) + EPS) ** alpha


# --- the ring ----------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [ReplayBuffer, PrioritizedReplayBuffer])
@settings(max_examples=60, deadline=None)
@given(capacity=st.integers(1, 12), sizes=st.lists(st.integers(0, 30), min_size=1, max_size=6))
def test_ring_holds_the_newest_capacity_transitions_in_order(cls, capacity, sizes):
    buffer = cls(capacity, SPEC)
    start = 0
    for n in sizes:
        buffer.add(make_batch(start, n))
        start += n
    expected = make_batch(0, start)
    kept = min(start, capacity)
    assert len(buffer) == kept and buffer.inserted == start
    for name, array in oldest_first(buffer).items():
        np.testing.assert_array_equal(array, expected[name][start - kept:], err_msg=name)


def test_uniform_sample_has_the_spec_shapes_and_is_seeded():
    a, b = ReplayBuffer(100, SPEC, seed=3), ReplayBuffer(100, SPEC, seed=3)
    for buffer in (a, b):
        buffer.add(make_batch(0, 60))
    batch = a.sample(32)
    assert batch["obs"].shape == (32, 4) and batch["obs"].dtype == np.float32
    assert batch["action"].shape == (32,) and batch["action"].dtype == np.int64
    assert batch["terminated"].dtype == np.bool_
    np.testing.assert_array_equal(batch["obs"], b.sample(32)["obs"])  # same seed, same draws
    from_rng = [buffer.sample(32, rng=np.random.default_rng(9))["obs"] for buffer in (a, b)]
    np.testing.assert_array_equal(*from_rng)  # an explicit generator wins over the buffer's
    assert set(batch["reward"]) <= set(range(60))  # only stored transitions
    np.testing.assert_array_equal(batch["next_obs"], batch["obs"] + 1)  # rows stay together


@pytest.mark.parametrize("cls", [ReplayBuffer, PrioritizedReplayBuffer])
def test_sample_many_draws_what_as_many_samples_would(cls):
    """`sample_many(k, n)` (what the learner actor draws ahead) is k calls of `sample(n)` from
    one generator: the same rows, and for a prioritized buffer the same ids and the same
    importance weights, each batch's normalised by its own largest."""
    a, b = cls(100, SPEC, seed=4), cls(100, SPEC, seed=4)
    for buffer in (a, b):
        buffer.add(make_batch(0, 80))
        if cls is PrioritizedReplayBuffer:
            buffer.update_priorities(np.arange(80), np.linspace(0.1, 9.0, 80))
    many, one_by_one = a.sample_many(5, 16), [b.sample(16) for _ in range(5)]
    assert len(many) == 5
    for got, expected in zip(many, one_by_one, strict=True):
        assert got.keys() == expected.keys()
        for name in expected:
            np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    if cls is PrioritizedReplayBuffer:
        assert [float(batch["weights"].max()) for batch in many] == [1.0] * 5
    with pytest.raises(ValueError, match="count must be a positive integer"):
        a.sample_many(0, 16)


def test_sample_many_descends_once_as_a_draw_of_ones_own_would_batch_by_batch():
    """The buffer's own draw descends the tree once for all the batches (`draw_many`); a draw
    given to the buffer (Ape-X's `draw` slot) is called once per batch. Both draw the same."""
    own = PrioritizedReplayBuffer(100, SPEC, seed=6)
    given = PrioritizedReplayBuffer(100, SPEC, seed=6, draw=functools.partial(prioritized.draw))
    for buffer in (own, given):
        buffer.add(make_batch(0, 90), np.geomspace(0.01, 50.0, 90))
    for a, b in zip(own.sample_many(7, 12, beta=0.6), given.sample_many(7, 12, beta=0.6),
                    strict=True):
        np.testing.assert_array_equal(a["indices"], b["indices"])
        np.testing.assert_allclose(a["weights"], b["weights"], rtol=1e-6)


def test_uniform_sample_covers_the_buffer_evenly():
    buffer = ReplayBuffer(10, SPEC, seed=0)
    buffer.add(make_batch(0, 10))
    counts = np.zeros(10, int)
    for _ in range(2000):
        counts += np.bincount(buffer.sample(10)["reward"].astype(int), minlength=10)
    assert np.all(np.abs(counts - 2000) < 200)  # 2000 +- 42 expected (binomial)


# --- the trees ---------------------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(leaves=st.lists(st.integers(0, 5), min_size=1, max_size=40), data=st.data())
def test_prefix_sum_search_matches_searchsorted(leaves, data):
    """Integer priorities keep every sum exact, so both sides must agree exactly."""
    if sum(leaves) == 0:
        leaves[0] = 1
    tree = SumTree(len(leaves))
    tree.set(np.arange(len(leaves)), np.array(leaves, dtype=np.float64))
    targets = np.array(data.draw(st.lists(
        st.floats(0, sum(leaves), exclude_max=True), min_size=1, max_size=20)))
    expected = np.searchsorted(np.cumsum(leaves), targets, side="right")
    np.testing.assert_array_equal(tree.find_prefix_sum(targets), expected)


@settings(max_examples=80, deadline=None)
@given(capacity=st.integers(1, 2000), data=st.data())
def test_every_parent_holds_the_sum_of_its_children(capacity, data):
    """Random scattered updates (duplicates included) and runs, on both update paths of `set`
    and of `set_run` (level by level, then the path to the root)."""
    tree = SumTree(capacity)
    leaves = np.zeros(capacity)  # the model
    for _ in range(data.draw(st.integers(1, 5))):
        values = st.floats(0, 10)
        if data.draw(st.booleans()):
            slots = data.draw(st.lists(st.integers(0, capacity - 1), min_size=1, max_size=50))
            new = data.draw(st.lists(values, min_size=len(slots), max_size=len(slots)))
            tree.set(np.array(slots), np.array(new))
            for slot, value in zip(slots, new, strict=True):  # the last duplicate wins
                leaves[slot] = value
        else:
            first = data.draw(st.integers(0, capacity - 1))
            new = data.draw(st.lists(values, max_size=capacity - first))
            tree.set_run(first, np.array(new))
            leaves[first:first + len(new)] = new
        L = tree.first_leaf
        np.testing.assert_array_equal(tree.sums[L:L + capacity], leaves)
        np.testing.assert_array_equal(tree.sums[1:L], tree.sums[2::2] + tree.sums[3::2])
        assert tree.total == pytest.approx(leaves.sum(), rel=1e-12, abs=1e-12)


@settings(max_examples=80, deadline=None)
@given(capacity=st.integers(1, 40), alpha=st.sampled_from([0.0, 0.6, 1.0]), data=st.data())
def test_the_tree_agrees_with_the_priorities_after_random_adds_and_updates(capacity, alpha,
                                                                           data):
    """A plain dict model (id -> q) against the buffer, stale and duplicate updates included."""
    buffer = PrioritizedReplayBuffer(capacity, SPEC, alpha=alpha)
    q_by_id, max_q = {}, 1.0
    priority = st.floats(0, 100)
    for _ in range(data.draw(st.integers(1, 8))):
        if buffer.inserted == 0 or data.draw(st.booleans()):
            n = data.draw(st.integers(0, 2 * capacity))
            p = data.draw(st.none() | st.lists(priority, min_size=n, max_size=n))
            new_q = [max_q] * n if p is None else q_of(p, alpha)
            first = buffer.inserted
            buffer.add(make_batch(first, n), p)
            kept = {first + i: new_q[i] for i in range(max(0, n - capacity), n)}
            q_by_id.update(kept)
            applied_q = list(kept.values())
        else:
            ids = data.draw(st.lists(st.integers(0, buffer.inserted - 1), min_size=1,
                                     max_size=12))
            p = data.draw(st.lists(priority, min_size=len(ids), max_size=len(ids)))
            applied = buffer.update_priorities(np.array(ids), p)
            applied_q = []
            for i, q in zip(ids, q_of(p, alpha), strict=True):
                if i >= buffer.inserted - capacity:  # still stored; the last duplicate wins
                    q_by_id[i] = q
                    applied_q.append(q)
            assert applied == len(applied_q)
        max_q = max([max_q, *applied_q])  # the largest q ever stored

        stored_ids = np.arange(buffer.inserted - len(buffer), buffer.inserted)
        expected = np.array([q_by_id[i] for i in stored_ids])
        np.testing.assert_allclose(buffer.tree.leaves(stored_ids % capacity), expected,
                                   rtol=1e-15)
        assert buffer.tree.total == pytest.approx(expected.sum(), rel=1e-12)
        assert buffer.max_priority == max_q


# --- prioritized sampling ----------------------------------------------------------------------


def test_sampling_frequencies_follow_priority_to_the_alpha():
    """200K draws over 8 transitions: a chi-square test against P(i) = q_i / sum q."""
    p = np.array([0.1, 0.5, 1, 2, 3, 5, 8, 13])
    buffer = PrioritizedReplayBuffer(8, SPEC, alpha=0.6, seed=0)
    buffer.add(make_batch(0, 8), p)
    counts = np.zeros(8)
    for _ in range(25_000):
        counts += np.bincount(buffer.sample(8)["indices"], minlength=8)

    def chi_square(probabilities):
        expected = counts.sum() * probabilities
        return ((counts - expected) ** 2 / expected).sum()

    q = q_of(p, 0.6)
    assert chi_square(q / q.sum()) < 24.32  # 99.9% quantile with 7 degrees of freedom
    assert chi_square(p / p.sum()) > 1000   # the test can tell alpha=0.6 from alpha=1


def test_batch_normalised_weights_divide_by_the_batchs_largest_weight():
    """w_i = (q_i / min over the batch of q)^-beta, so each batch's
    largest weight is exactly 1, whatever the rest of the buffer holds."""
    p, alpha, beta = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]), 0.6, 0.4
    buffer = PrioritizedReplayBuffer(8, SPEC, alpha=alpha, seed=1)
    buffer.add(make_batch(0, 8), p)
    q = (p + EPS) ** alpha
    for _ in range(20):
        batch = buffer.sample(3, beta=beta)
        sampled_q = q[batch["indices"]]
        np.testing.assert_allclose(batch["weights"], (sampled_q / sampled_q.min()) ** -beta,
                                   rtol=1e-6)
        assert batch["weights"].max() == 1.0


def test_sampled_rows_belong_to_their_indices_after_wrapping():
    buffer = PrioritizedReplayBuffer(6, SPEC, seed=0)
    buffer.add(make_batch(0, 10))  # keeps ids 4..9
    buffer.add(make_batch(10, 3))  # keeps ids 7..12
    batch = buffer.sample(6)
    np.testing.assert_array_equal(batch["reward"], batch["indices"])  # reward = id here
    assert batch["indices"].min() >= 7 and batch["indices"].max() <= 12


def test_rounding_in_the_descent_never_samples_an_empty_slot():
    """With these leaves, float rounding walks the highest target past the last stored leaf
    (slot 7 of 8, empty); sample() must clamp it to the last stored transition."""
    leaves = np.array([0.011678571849171994, 0.06382107350911125, 0.0034295369906724026,
                       10.087804284439912, 19.720303030041627, 0.033878182268915105])
    buffer = PrioritizedReplayBuffer(6, SPEC)
    buffer.add(make_batch(0, 6))
    buffer.tree.set_run(0, leaves)
    highest_target = np.nextafter(buffer.tree.total, 0.0)
    assert buffer.tree.find_prefix_sum([highest_target])[0] == 7  # the rounding, shown

    class HighestDraw:  # stands in for the Generator: every uniform draw is just below 1
        def random(self, n):
            return np.full(n, np.nextafter(1.0, 0.0))

    batch = buffer.sample(1, rng=HighestDraw())
    assert batch["indices"][0] == 5 and np.isfinite(batch["weights"]).all()


def test_new_transitions_get_the_largest_priority_so_far():
    buffer = PrioritizedReplayBuffer(10, SPEC, alpha=1.0)
    buffer.add(make_batch(0, 2))
    np.testing.assert_allclose(buffer.tree.leaves([0, 1]), 1.0)
    buffer.add(make_batch(2, 2), [5.0, 0.5])
    buffer.add(make_batch(4, 1))
    assert buffer.tree.leaves([4])[0] == pytest.approx(5.0 + EPS)


def test_update_priorities_sets_q_and_skips_overwritten_transitions():
    buffer = PrioritizedReplayBuffer(4, SPEC, alpha=0.5, seed=0)
    buffer.add(make_batch(0, 4), [1.0, 1.0, 1.0, 1.0])
    batch = buffer.sample(4)
    buffer.add(make_batch(4, 2), [9.0, 9.0])  # ids 4, 5 overwrite slots 0, 1 (ids 0, 1)
    applied = buffer.update_priorities(batch["indices"], np.full(4, 100.0))
    fresh = batch["indices"] >= 2
    assert applied == fresh.sum()
    np.testing.assert_allclose(buffer.tree.leaves([0, 1]), (9.0 + EPS) ** 0.5)
    updated = batch["indices"][fresh] % 4
    np.testing.assert_allclose(buffer.tree.leaves(updated), (100.0 + EPS) ** 0.5)
    untouched = np.setdiff1d([2, 3], updated)
    np.testing.assert_allclose(buffer.tree.leaves(untouched), 1.0)
    assert buffer.update_priorities([0, 1], [7.0, 7.0]) == 0  # both stale


# --- n-step transitions ------------------------------------------------------------------------


def run_episode(nstep: NStepBuffer, rewards, ending: str) -> list[dict]:
    """Feed one episode (obs s_t = [t], action t) and collect what comes out."""
    out = []
    for t, r in enumerate(rewards):
        last = t == len(rewards) - 1
        out += nstep.add(np.array([t], np.float32), t, r, np.array([t + 1], np.float32),
                         terminated=last and ending == "terminated",
                         truncated=last and ending == "truncated")
    return out


@pytest.mark.parametrize("ending", ["terminated", "truncated"])
def test_nstep_returns_match_a_hand_computation(ending):
    out = run_episode(NStepBuffer(n=3, gamma=0.5), [1, 2, 3, 4, 5], ending)
    # (reward, next state, discount) by hand, gamma = 0.5
    expected = [(1 + 0.5 * 2 + 0.25 * 3, 3, 0.125),
                (2 + 0.5 * 3 + 0.25 * 4, 4, 0.125),
                (3 + 0.5 * 4 + 0.25 * 5, 5, 0.125),  # the last full window
                (4 + 0.5 * 5, 5, 0.25),              # flushed at the end
                (5, 5, 0.5)]
    assert len(out) == 5
    for t, (transition, (reward, next_state, discount)) in enumerate(
            zip(out, expected, strict=True)):
        assert transition["obs"][0] == t and transition["action"] == t
        assert transition["reward"] == pytest.approx(reward)
        assert transition["next_obs"][0] == next_state
        assert transition["discount"] == pytest.approx(discount)
        true_end = ending == "terminated" and next_state == 5
        assert transition["terminated"] == true_end  # a time limit still bootstraps


def test_nstep_emits_one_transition_per_step_once_the_window_is_full():
    nstep = NStepBuffer(n=3, gamma=0.9)
    counts = [len(nstep.add(np.zeros(1), 0, 1.0, np.zeros(1), False, False)) for _ in range(6)]
    assert counts == [0, 0, 1, 1, 1, 1]
    assert len(nstep.flush()) == 2 and nstep.flush() == []


@pytest.mark.parametrize("ending", ["terminated", "truncated"])
def test_nstep_episode_shorter_than_n(ending):
    out = run_episode(NStepBuffer(n=5, gamma=0.5), [1, 2], ending)
    assert [t["reward"] for t in out] == [1 + 0.5 * 2, 2]
    assert [t["discount"] for t in out] == [0.25, 0.5]
    assert [t["next_obs"][0] for t in out] == [2, 2]
    assert [t["terminated"] for t in out] == [ending == "terminated"] * 2


def test_one_step_buffer_passes_transitions_through():
    out = run_episode(NStepBuffer(n=1, gamma=0.9), [1, 2, 3], "terminated")
    assert [t["reward"] for t in out] == [1, 2, 3]
    assert [t["discount"] for t in out] == pytest.approx([0.9] * 3)
    assert [t["terminated"] for t in out] == [False, False, True]


def test_nstep_transitions_stack_into_a_prioritized_buffer():
    out = run_episode(NStepBuffer(n=3, gamma=0.5), [1, 2, 3, 4], "truncated")
    spec = transition_spec(obs_shape=(1,), n_step=True)
    buffer = PrioritizedReplayBuffer(10, spec)
    buffer.add(stack_transitions(out))
    stored = oldest_first(buffer)
    np.testing.assert_allclose(stored["reward"], [2.75, 4.5, 5, 4])
    np.testing.assert_allclose(stored["discount"], [0.125, 0.125, 0.25, 0.5])
    assert not stored["terminated"].any()


# --- saving ------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [ReplayBuffer, PrioritizedReplayBuffer])
def test_save_load_round_trip(cls, tmp_path):
    buffer = cls(7, SPEC)
    cls = type(buffer)
    buffer.add(make_batch(0, 5))
    if cls is PrioritizedReplayBuffer:
        buffer.add(make_batch(5, 5), np.arange(5.0))  # wraps around, with priorities
    else:
        buffer.add(make_batch(5, 5))
    path = tmp_path / "replay.npz"
    buffer.save(path)
    loaded = cls.load(path)
    assert type(loaded) is cls
    assert_same_state(snapshot(loaded), snapshot(buffer))
    if cls is PrioritizedReplayBuffer:
        assert (loaded.alpha, loaded.eps) == (buffer.alpha, buffer.eps)
        np.testing.assert_array_equal(loaded.sample(5, rng=np.random.default_rng(0))["indices"],
                                      buffer.sample(5, rng=np.random.default_rng(0))["indices"])
    for b in (buffer, loaded):  # the position is restored: the next add lands in the same slot
        b.add(make_batch(10, 1))
    assert_same_state(snapshot(loaded), snapshot(buffer))


# --- bad input ---------------------------------------------------------------------------------


def without(batch, name):
    return {k: v for k, v in batch.items() if k != name}


def changed(batch, **fields):
    return {**batch, **fields}


GOOD = make_batch(100, 3)
BAD_ADDS = {
    "missing field": (without(GOOD, "reward"), "missing \\['reward'\\]"),
    "extra field": (changed(GOOD, value=np.zeros(3)), "unexpected \\['value'\\]"),
    "wrong obs shape": (changed(GOOD, obs=np.zeros((3, 5), np.float32)), "field 'obs' has shape"),
    "no batch axis": (changed(GOOD, reward=np.float32(1)), "field 'reward' has shape"),
    "float action": (changed(GOOD, action=np.zeros(3)), "field 'action' has dtype float64"),
    "float terminated": (changed(GOOD, terminated=np.zeros(3)), "field 'terminated'"),
    "lengths differ": (changed(GOOD, reward=np.zeros(2, np.float32)), "different lengths"),
    "not a dict": ([1, 2, 3], "must be a dict"),
}


@pytest.mark.parametrize("cls", [ReplayBuffer, PrioritizedReplayBuffer])
@pytest.mark.parametrize("case", BAD_ADDS)
def test_bad_batches_are_refused_and_change_nothing(cls, case):
    buffer = cls(4, SPEC)
    buffer.add(make_batch(0, 3))
    before = snapshot(buffer)
    batch, message = BAD_ADDS[case]
    with pytest.raises(ValueError, match=message):
        buffer.add(batch)
    assert_same_state(snapshot(buffer), before)


BAD_PRIORITIZED_CALLS = {
    "negative priority": (lambda b: b.add(GOOD, [1.0, -1.0, 1.0]), ">= 0"),
    "NaN priority": (lambda b: b.add(GOOD, [1.0, np.nan, 1.0]), "finite"),
    "infinite priority": (lambda b: b.add(GOOD, [1.0, np.inf, 1.0]), "finite"),
    "too few priorities": (lambda b: b.add(GOOD, [1.0, 2.0]), "shape"),
    "update negative": (lambda b: b.update_priorities([0, 1], [1.0, -2.0]), ">= 0"),
    "update NaN": (lambda b: b.update_priorities([0, 1], [np.nan, 1.0]), "finite"),
    "update length": (lambda b: b.update_priorities([0, 1], [1.0]), "shape"),
    "index too large": (lambda b: b.update_priorities([0, 3], [1.0, 1.0]), "index 3"),
    "index negative": (lambda b: b.update_priorities([-1], [1.0]), "index -1"),
    "float index": (lambda b: b.update_priorities([0.5], [1.0]), "integer"),
    "sample too many": (lambda b: b.sample(4), "larger than the 3"),
    "sample zero": (lambda b: b.sample(0), "batch_size must be a positive integer"),
    "sample negative": (lambda b: b.sample(-2), "batch_size must be a positive integer"),
    "negative beta": (lambda b: b.sample(2, beta=-0.1), "beta"),
}


@pytest.mark.parametrize("case", BAD_PRIORITIZED_CALLS)
def test_bad_prioritized_calls_are_refused_and_change_nothing(case):
    buffer = PrioritizedReplayBuffer(4, SPEC)
    buffer.add(make_batch(0, 3), [1.0, 2.0, 3.0])
    before = snapshot(buffer)
    call, message = BAD_PRIORITIZED_CALLS[case]
    with pytest.raises(ValueError, match=message):
        call(buffer)
    assert_same_state(snapshot(buffer), before)


@pytest.mark.parametrize("cls", [ReplayBuffer, PrioritizedReplayBuffer])
def test_sampling_an_empty_or_too_small_buffer_is_refused(cls):
    buffer = cls(4, SPEC)
    with pytest.raises(ValueError, match="empty"):
        buffer.sample(1)
    buffer.add(make_batch(0, 2))
    with pytest.raises(ValueError, match="batch_size 3 is larger than the 2"):
        buffer.sample(3)
    with pytest.raises(ValueError, match="positive integer"):
        buffer.sample(0)


@pytest.mark.parametrize("make", [
    lambda: ReplayBuffer(0, SPEC),
    lambda: PrioritizedReplayBuffer(-3, SPEC),
    lambda: ReplayBuffer(2.5, SPEC),
    lambda: ReplayBuffer(10, {}),
    lambda: PrioritizedReplayBuffer(10, SPEC, alpha=-1),
    lambda: PrioritizedReplayBuffer(10, SPEC, eps=0),
    lambda: PrioritizedReplayBuffer(10, {**SPEC, "weights": ((), np.float32)}),
    lambda: NStepBuffer(n=0),
    lambda: NStepBuffer(n=3, gamma=1.5),
])
def test_bad_constructor_arguments_are_refused(make):
    with pytest.raises(ValueError):
        make()


# --- the Ray actor -----------------------------------------------------------------------------


def test_replay_actor_with_two_concurrent_explorers(ray_local, tmp_path):
    @ray.remote
    def explore(replay, batches: list[dict], priority: float) -> int:
        """Push every batch without waiting in between (uses only ray and numpy: this test
        module cannot be imported by Ray workers)."""
        ray.get([replay.add.remote(batch, np.full(len(batch["obs"]), priority))
                 for batch in batches])
        return sum(len(batch["obs"]) for batch in batches)

    replay = ReplayStoreActor.remote(2000, SPEC, seed=0)
    batches = {e: [make_batch(1000 * e + 50 * i, 50) for i in range(10)] for e in (1, 2)}
    pushed = ray.get([explore.remote(replay, batches[e], 1.0 + e) for e in (1, 2)])
    stats = ray.get(replay.stats.remote())
    assert stats == {"size": 1000, "inserted": 1000, "sampled": 0, "ratio": 0.0}
    assert sum(pushed) == 1000

    # each explorer's transitions all arrived, in its own order
    ray.get(replay.__ray_call__.remote(lambda store, path: store.buffer.save(path),
                                       str(tmp_path / "actor.npz")))
    rewards = oldest_first(PrioritizedReplayBuffer.load(tmp_path / "actor.npz"))["reward"]
    for explorer in (1, 2):
        mine = rewards[(rewards >= 1000 * explorer) & (rewards < 1000 * explorer + 500)]
        np.testing.assert_array_equal(mine, np.arange(1000 * explorer, 1000 * explorer + 500))

    # the learner's side: sample, update, and the counters add up
    for _ in range(3):
        batch = ray.get(replay.sample.remote(64, 0.4))
        assert batch["obs"].shape == (64, 4) and batch["weights"].shape == (64,)
        applied = ray.get(replay.update_priorities.remote(batch["indices"], np.ones(64)))
        assert applied == 64
    stats = ray.get(replay.stats.remote())
    assert stats == {"size": 1000, "inserted": 1000, "sampled": 192, "ratio": 0.192}
    assert ray.get(replay.size.remote()) == 1000

    # a bad batch comes back to the caller as the ValueError, and nothing is stored
    with pytest.raises(ValueError, match="missing \\['reward'\\]"):
        ray.get(replay.add.remote(without(make_batch(0, 5), "reward")))
    assert ray.get(replay.stats.remote())["inserted"] == 1000

