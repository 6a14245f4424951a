"""Parallel policy gradient: each piece on hand-made data, then short parallel runs."""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from course_lib.nets import get_weights, set_weights
from course_lib.pg import (
    PGConfig,
    advantages,
    discounted_returns,
    make_policy,
    make_workers,
    mean_greedy_return,
    policy_gradient_loss,
    sample_episodes,
    time_steps,
    train_async,
    train_sync,
)

# Two episodes in one batch: rewards [1, 2, 3] then [10, 1], gamma 0.9.
REWARDS = np.array([1.0, 2.0, 3.0, 10.0, 1.0])
DONES = np.array([False, False, True, False, True])
RETURNS = np.array([1 + 0.9 * 2 + 0.81 * 3, 2 + 0.9 * 3, 3.0, 10 + 0.9 * 1, 1.0])


# --- returns and advantages --------------------------------------------------------------------

def test_discounted_returns_by_hand_with_an_episode_boundary():
    np.testing.assert_allclose(discounted_returns(REWARDS, DONES, 0.9), RETURNS, rtol=1e-6)


def test_discounted_returns_with_gamma_one_is_the_reward_to_go():
    np.testing.assert_allclose(discounted_returns(REWARDS, DONES, 1.0), [6, 5, 3, 11, 1])


@settings(max_examples=50, deadline=None)
@given(lengths=st.lists(st.integers(1, 6), min_size=1, max_size=4),
       gamma=st.floats(0.0, 1.0), seed=st.integers(0, 1000))
def test_discounted_returns_match_the_definition(lengths, gamma, seed):
    rewards = np.random.default_rng(seed).normal(size=sum(lengths))
    dones = np.zeros(sum(lengths), bool)
    dones[np.cumsum(lengths) - 1] = True
    expected, start = [], 0
    for n in lengths:                       # G_t = sum_k gamma^(k-t) r_k within the episode
        ep = rewards[start:start + n]
        expected += [sum(gamma ** (k - t) * ep[k] for k in range(t, n)) for t in range(n)]
        start += n
    np.testing.assert_allclose(discounted_returns(rewards, dones, gamma), expected,
                               rtol=1e-5, atol=1e-5)


def test_time_steps_restart_after_each_episode():
    np.testing.assert_array_equal(time_steps(DONES), [0, 1, 2, 0, 1])


def test_time_baseline_is_the_mean_of_the_other_episodes_returns_at_each_step():
    # leave-one-out: at t=0 episode 1's baseline is episode 2's return and vice versa; at t=2
    # only episode 1 is still running, so nothing else is there to compare with: baseline 0
    expected = [RETURNS[0] - RETURNS[3], RETURNS[1] - RETURNS[4], RETURNS[2],
                RETURNS[3] - RETURNS[0], RETURNS[4] - RETURNS[1]]
    adv = advantages(RETURNS, DONES, baseline="time", normalize=False)
    np.testing.assert_allclose(adv, expected, rtol=1e-5, atol=1e-6)


def test_time_baseline_of_a_single_episode_leaves_the_returns_as_they_are():
    dones = np.array([False, False, True])
    adv = advantages(RETURNS[:3], dones, baseline="time", normalize=False)
    np.testing.assert_allclose(adv, RETURNS[:3], rtol=1e-6)


@settings(max_examples=50, deadline=None)
@given(lengths=st.lists(st.integers(1, 5), min_size=1, max_size=4),
       seed=st.integers(0, 1000), data=st.data())
def test_time_baseline_does_not_depend_on_the_steps_own_return(lengths, seed, data):
    """What makes the baseline unbiased: raising G_t by d raises A_t by exactly d."""
    returns = np.random.default_rng(seed).normal(size=sum(lengths)).astype(np.float32)
    dones = np.zeros(sum(lengths), bool)
    dones[np.cumsum(lengths) - 1] = True
    i = data.draw(st.integers(0, len(returns) - 1))
    bumped = returns.copy()
    bumped[i] += 10.0
    before = advantages(returns, dones, baseline="time", normalize=False)
    after = advantages(bumped, dones, baseline="time", normalize=False)
    assert after[i] == pytest.approx(before[i] + 10.0, abs=1e-4)


def test_normalized_advantages_have_zero_mean_unit_std_and_keep_their_order():
    raw = advantages(RETURNS, DONES, baseline="none", normalize=False)
    np.testing.assert_allclose(raw, RETURNS, rtol=1e-6)
    adv = advantages(RETURNS, DONES, baseline="none", normalize=True)
    assert abs(adv.mean()) < 1e-6 and abs(adv.std() - 1) < 1e-5
    np.testing.assert_array_equal(np.argsort(adv), np.argsort(RETURNS))


def test_unknown_baseline_is_refused():
    with pytest.raises(ValueError, match="baseline"):
        advantages(RETURNS, DONES, baseline="value")


# --- the loss ------------------------------------------------------------------------------------

def test_loss_value_and_gradient_direction_on_a_toy_case():
    logits = torch.zeros(1, 2, requires_grad=True)           # pi = (0.5, 0.5)
    loss = policy_gradient_loss(logits, torch.tensor([0]), torch.tensor([1.0]))
    assert loss.item() == pytest.approx(math.log(2))          # -log(0.5) * 1
    loss.backward()
    # descending the loss raises the logit of the action with a positive advantage
    assert logits.grad[0, 0] < 0 < logits.grad[0, 1]


def test_negative_advantage_pushes_the_action_down():
    logits = torch.zeros(1, 2, requires_grad=True)
    policy_gradient_loss(logits, torch.tensor([0]), torch.tensor([-1.0])).backward()
    assert logits.grad[0, 0] > 0 > logits.grad[0, 1]


def test_minimising_the_loss_learns_a_two_armed_bandit():
    torch.manual_seed(0)
    logits = torch.zeros(2, requires_grad=True)
    optimizer = torch.optim.Adam([logits], lr=0.05)
    for _ in range(200):
        actions = torch.distributions.Categorical(logits=logits).sample((64,))
        rewards = (actions == 1).float()                      # arm 1 pays, arm 0 does not
        adv = rewards - rewards.mean()
        loss = policy_gradient_loss(logits.expand(64, 2), actions, adv)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert torch.softmax(logits, 0)[1] > 0.95


# --- policy, sampling, weights -------------------------------------------------------------------

def test_sample_episodes_returns_whole_episodes_with_consistent_fields():
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    torch.manual_seed(0)
    policy = make_policy(env)
    batch = sample_episodes(env, policy, min_steps=100, rng=np.random.default_rng(0))
    n, episodes = len(batch["reward"]), len(batch["ep_return"])
    assert n >= 100 and batch["obs"].shape == (n, 4) and batch["action"].shape == (n,)
    assert batch["ep_length"].sum() == n and batch["done"].sum() == episodes
    assert batch["done"][-1]
    np.testing.assert_array_equal(np.flatnonzero(batch["done"]) + 1, batch["ep_length"].cumsum())
    ends = np.concatenate([[0], batch["ep_length"].cumsum()])
    for i in range(episodes):
        assert batch["ep_return"][i] == batch["reward"][ends[i]:ends[i + 1]].sum()
    assert set(np.unique(batch["action"])) <= {0, 1}


def test_weights_round_trip_and_are_copies():
    env = gym.make("CartPole-v1")
    a, b = make_policy(env), make_policy(env)
    weights = get_weights(a)
    assert all(isinstance(v, np.ndarray) for v in weights.values())
    set_weights(b, weights)
    obs = torch.randn(5, 4)
    torch.testing.assert_close(a(obs), b(obs))
    before = {k: v.copy() for k, v in weights.items()}
    with torch.no_grad():
        for p in a.parameters():
            p.add_(1.0)
    for key in weights:                           # changing the module left the dict alone
        np.testing.assert_array_equal(weights[key], before[key])


def test_mean_greedy_return_accepts_a_module_or_its_weights():
    policy = make_policy(gym.make("CartPole-v1"))
    by_module = mean_greedy_return(policy, episodes=2, seed=3)
    assert by_module == mean_greedy_return(get_weights(policy), episodes=2, seed=3)
    assert 1 <= by_module <= 500


def test_continuous_actions_are_refused_up_front():
    with pytest.raises(ValueError, match="Discrete"):
        make_policy(gym.make("Pendulum-v1"))


def _scripted_evaluations(monkeypatch, *means):
    """Replace the greedy evaluation by one that records (episodes, seed) and plays episodes
    whose returns average the next of `means` (1 either side of it, so that a confirmation
    shows a spread and is not extended): the stop decision on known returns."""
    import course_lib.pg.reinforce as reinforce

    calls, scripted = [], iter(means)

    def returns(policy, env_id, episodes, seed, hidden=(64, 64)):
        calls.append((episodes, seed))
        return next(scripted) + np.resize([-1.0, 1.0], episodes)

    monkeypatch.setattr(reinforce, "greedy_returns", returns)
    return calls


@pytest.mark.parametrize("means, played, stops", [
    ((100.0,), 10, False),                 # below the goal: no confirmation
    ((500.0, 470.0), 20, True),            # met, and the 20 confirming episodes meet it alone
    ((500.0, 440.0), 20, False),           # the 30 average 460 >= 450, but the 20 alone miss
    ((500.0, 300.0), 20, False),           # a lucky ten that 20 fresh episodes overturn
])
def test_pg_evaluation_confirms_a_goal_like_every_trainer(monkeypatch, means, played, stops):
    from course_lib.pg.parallel import _record
    from course_lib.trainer import evaluation_request

    calls = _scripted_evaluations(monkeypatch, *means)
    cfg = PGConfig(eval_every=1, target_return=450.0)
    batch = {"reward": np.ones(5), "ep_return": np.array([5.0])}
    history = []
    assert _record(history, 0.0, batch, 0.0, None, cfg, None) == stops
    assert history[0]["eval_episodes"] == played
    assert history[0]["eval_return"] == means[-1]       # the confirming episodes score
    # the trainers' rule, episode counts and seeds included
    assert calls[0] == evaluation_request(cfg, [], 0)
    if len(means) == 2:
        assert calls[1] == evaluation_request(cfg, [means[0]] * 10, 1)


def test_pg_evaluations_play_fresh_start_states_each_time():
    """The same weights, evaluated twice in one run: new seeds, so other start states (the old
    code replayed seeds 10_000..10_009 every time)."""
    from course_lib.pg.parallel import _record

    torch.manual_seed(0)
    policy = make_policy(gym.make("CartPole-v1"))
    cfg = PGConfig(eval_every=1, target_return=1e9)
    batch = {"reward": np.ones(5), "ep_return": np.array([5.0])}
    history = []
    for _ in range(3):
        _record(history, 0.0, batch, 0.0, policy, cfg, None)
    assert [row["evaluations"] for row in history] == [1, 2, 3]
    assert len({row["eval_return"] for row in history}) == 3


def test_discrete_observations_work_from_sampling_to_evaluation():
    """FrozenLake's observation is one integer: `envs.make_env` makes it a one-hot vector."""
    from course_lib.envs import make_env

    env = make_env("FrozenLake-v1")
    env.reset(seed=0)
    policy = make_policy(gym.make("FrozenLake-v1"))          # sized by the flattened space
    batch = sample_episodes(env, policy, min_steps=30, rng=np.random.default_rng(0))
    assert batch["obs"].shape == (len(batch["reward"]), 16)
    assert set(batch["obs"].sum(axis=1)) == {1.0}          # one-hot
    assert 0.0 <= mean_greedy_return(policy, "FrozenLake-v1", episodes=3, seed=0) <= 1.0


def test_parallel_pg_trains_on_discrete_observations(ray_local):
    cfg = PGConfig(env_id="FrozenLake-v1", num_workers=1, steps_per_worker=50,
                   max_iterations=2, eval_every=1, eval_episodes=3, target_return=2.0)
    for train in (train_sync, train_async):
        _, history = train(cfg)
        assert [row["eval_episodes"] for row in history] == [3, 3]


# --- the parallel loops --------------------------------------------------------------------------

def _check_history(history, cfg):
    assert 1 <= len(history) <= cfg.max_iterations
    assert [row["iteration"] for row in history] == list(range(1, len(history) + 1))
    steps = [row["env_steps"] for row in history]
    times = [row["time_s"] for row in history]
    assert steps == sorted(steps) and steps[0] >= cfg.steps_per_worker
    assert times == sorted(times) and times[0] > 0
    evaluated = [row["eval_return"] for row in history if not math.isnan(row["eval_return"])]
    assert evaluated and all(1 <= r <= 500 for r in evaluated)


def test_sync_training_improves_the_return(ray_local):
    cfg = PGConfig.preset(quick=True)
    rows = []
    policy, history = train_sync(cfg, progress=rows.append)
    assert rows == history
    _check_history(history, cfg)
    assert history[0]["env_steps"] >= cfg.num_workers * cfg.steps_per_worker   # all workers
    first = np.mean([row["mean_return"] for row in history[:3]])
    last = np.mean([row["mean_return"] for row in history[-3:]])
    assert last > 1.5 * first, (first, last)


def test_async_training_runs_and_learns(ray_local):
    cfg = PGConfig.preset(quick=True)
    policy, history = train_async(cfg)
    _check_history(history, cfg)
    first = np.mean([row["mean_return"] for row in history[:3]])
    last = np.mean([row["mean_return"] for row in history[-3:]])
    assert last > first, (first, last)


def test_more_workers_than_cpus_fails_fast(ray_local):
    with pytest.raises(ValueError, match="num_workers=64"):
        make_workers(PGConfig(num_workers=64), make_policy(gym.make("CartPole-v1")))
