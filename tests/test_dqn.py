"""Tests for course_lib.dqn: the pieces of the learner against hand-computed values, and the
single-process trainer (checkpoint round trip, resume)."""

import math

import numpy as np
import pytest
import torch
from torch import nn

from course_lib import dqn
from course_lib.dqn import (
    DQNConfig,
    DQNLearner,
    DQNTrainer,
    DuelingQNet,
    dqn_loss,
    epsilon_for_explorer,
    linear_epsilon,
    n_step_double_q_target,
    td_errors,
)
from course_lib.envs import make_env
from course_lib.replay import NStepBuffer, stack_transitions
from course_lib.runs import Run, load_checkpoint
from course_lib.trainer import run_training


class FixedQ(nn.Module):
    """A 'network' that returns the Q values it was built with, whatever the input."""

    def __init__(self, q_values):
        super().__init__()
        self.q = torch.tensor(q_values, dtype=torch.float32)

    def forward(self, obs):
        return self.q


# --- epsilon ----------------------------------------------------------------------------------

def test_epsilon_schedule_matches_the_ape_x_formula():
    assert epsilon_for_explorer(0, 1) == 0.4                     # a single explorer gets eps
    eps = [epsilon_for_explorer(i, 8) for i in range(8)]
    assert eps[0] == pytest.approx(0.4)
    assert eps[7] == pytest.approx(0.4 ** 8)                     # 1 + alpha = 8
    assert eps[3] == pytest.approx(0.4 ** 4)                     # 1 + 7 * 3/7
    assert all(a > b for a, b in zip(eps, eps[1:], strict=False))
    assert epsilon_for_explorer(1, 2, eps=0.5, alpha=1) == pytest.approx(0.25)
    with pytest.raises(ValueError):
        epsilon_for_explorer(3, 3)


def test_linear_epsilon_decays_then_stays():
    assert linear_epsilon(0, 1.0, 0.1, 100) == 1.0
    assert linear_epsilon(50, 1.0, 0.1, 100) == pytest.approx(0.55)
    assert linear_epsilon(10_000, 1.0, 0.1, 100) == pytest.approx(0.1)


def test_epsilon_greedy_explores_at_the_given_rate():
    net = FixedQ([[0.0, 1.0, 0.0]])
    rng = np.random.default_rng(0)
    greedy = [dqn.epsilon_greedy(net, np.zeros(2), 0.0, rng, 3) for _ in range(50)]
    assert set(greedy) == {1}
    actions = np.array([dqn.epsilon_greedy(net, np.zeros(2), 0.3, rng, 3) for _ in range(3000)])
    # action 1 comes from greedy (0.7) plus a third of the random picks (0.1)
    assert (actions == 1).mean() == pytest.approx(0.8, abs=0.03)


# --- the dueling head ---------------------------------------------------------------------------

def test_dueling_head_is_value_plus_centred_advantage():
    torch.manual_seed(0)
    net = DuelingQNet(obs_dim=3, n_actions=4, hidden=(8,))
    obs = torch.randn(5, 3)
    q = net(obs)
    h = net.trunk(obs)
    value, adv = net.value(h), net.advantage(h)
    assert q.shape == (5, 4)
    torch.testing.assert_close(q.mean(dim=1, keepdim=True), value)   # mean_a Q = V
    torch.testing.assert_close(q - value, adv - adv.mean(dim=1, keepdim=True))


def test_dueling_head_ignores_a_constant_shift_of_the_advantages():
    torch.manual_seed(0)
    net = DuelingQNet(2, 3, hidden=(4, 4))
    obs = torch.randn(6, 2)
    before = net(obs)
    with torch.no_grad():
        net.advantage.bias += 5.0
    torch.testing.assert_close(net(obs), before)


# --- the n-step double-Q target -----------------------------------------------------------------

def as_tensors(transitions):
    """NStepBuffer output as float32 tensors, as they come out of the replay buffer."""
    batch = {k: torch.as_tensor(v) for k, v in stack_transitions(transitions).items()}
    return {k: v.float() if v.is_floating_point() else v for k, v in batch.items()}


def test_double_q_target_uses_the_online_argmax_and_the_target_value():
    online = FixedQ([[1.0, 2.0, 0.0], [5.0, 0.0, 0.0], [0.0, 0.0, 9.0]])   # picks 1, 0, 2
    target = FixedQ([[10.0, 20.0, 30.0], [7.0, 1.0, 100.0], [4.0, 4.0, 4.0]])
    y = n_step_double_q_target(
        reward=torch.tensor([1.0, 2.0, 3.0]), discount=torch.tensor([0.5, 0.25, 0.9]),
        terminated=torch.tensor([False, False, True]), next_obs=torch.zeros(3, 2),
        online=online, target=target)
    # row 0: 1 + 0.5 * Q_t(s', 1) = 1 + 0.5 * 20 (not max 30); row 1: 2 + 0.25 * 7;
    # row 2: terminal, no bootstrap
    torch.testing.assert_close(y, torch.tensor([11.0, 3.75, 3.0]))


def test_n_step_transitions_give_hand_computed_targets():
    """Three rewards of 1 with gamma 0.5 and n = 3, then the episode ends early."""
    nstep = NStepBuffer(n=3, gamma=0.5)
    out = []
    for t in range(4):
        out += nstep.add(obs=[t], action=0, reward=1.0, next_obs=[t + 1],
                         terminated=(t == 3), truncated=False)
    batch = as_tensors(out)
    q_next = 4.0                                          # every Q value of both nets
    both = FixedQ([[q_next, q_next]] * len(out))
    y = n_step_double_q_target(batch["reward"], batch["discount"], batch["terminated"],
                               batch["next_obs"], both, both)
    expected = [
        1 + 0.5 + 0.25 + 0.125 * q_next,    # s0: 3 rewards, bootstrap from s3
        1 + 0.5 + 0.25,                     # s1: 3 rewards to the terminal s4
        1 + 0.5,                            # s2: flushed at the end, k = 2
        1.0,                                # s3: k = 1
    ]
    torch.testing.assert_close(y, torch.tensor(expected))


def test_truncation_still_bootstraps():
    nstep = NStepBuffer(n=2, gamma=0.9)
    out = nstep.add([0], 0, 1.0, [1], terminated=False, truncated=True)
    batch = as_tensors(out)
    net = FixedQ([[2.0, 3.0]])
    y = n_step_double_q_target(batch["reward"], batch["discount"], batch["terminated"],
                               batch["next_obs"], net, net)
    torch.testing.assert_close(y, torch.tensor([1.0 + 0.9 * 3.0]))


# --- the loss -----------------------------------------------------------------------------------

def test_dqn_loss_is_importance_weighted_huber():
    q = torch.tensor([0.0, 0.0, 1.0], requires_grad=True)
    y = torch.tensor([0.5, 3.0, -1.0])
    w = torch.tensor([1.0, 0.5, 2.0])
    loss, abs_td = dqn_loss(q, y, w)
    # huber(0.5) = 0.125, huber(3) = 2.5, huber(-2) = 1.5
    assert loss.item() == pytest.approx((0.125 * 1 + 2.5 * 0.5 + 1.5 * 2) / 3)
    torch.testing.assert_close(abs_td, torch.tensor([0.5, 3.0, 2.0]))
    loss.backward()
    # d/dq of w * huber(y - q): -w * clip(y - q, -1, 1), averaged over the batch
    torch.testing.assert_close(q.grad, torch.tensor([-0.5 * 1, -1 * 0.5, 1 * 2]) / 3)
    unweighted, _ = dqn_loss(q.detach(), y)
    assert unweighted.item() == pytest.approx((0.125 + 2.5 + 1.5) / 3)


def test_dqn_loss_does_not_backpropagate_into_the_target():
    y = torch.tensor([1.0], requires_grad=True)
    loss, _ = dqn_loss(torch.tensor([0.0], requires_grad=True), y)
    loss.backward()
    assert y.grad is None


# --- the learner --------------------------------------------------------------------------------

def random_batch(n=32, obs_dim=4, seed=0):
    rng = np.random.default_rng(seed)
    return {"obs": rng.normal(size=(n, obs_dim)).astype(np.float32),
            "action": rng.integers(0, 2, n), "reward": rng.normal(size=n).astype(np.float32),
            "next_obs": rng.normal(size=(n, obs_dim)).astype(np.float32),
            "terminated": rng.random(n) < 0.1,
            "discount": np.full(n, 0.99 ** 3, np.float32),
            "weights": np.ones(n, np.float32), "indices": np.arange(n)}


def test_learner_update_fits_a_batch_and_copies_the_target_every_n():
    torch.manual_seed(0)
    learner = DQNLearner(4, 2, hidden=(16,), lr=1e-2, target_update_every=3, device="cpu")
    batch = random_batch()
    before = {k: v.clone() for k, v in learner.target.state_dict().items()}
    t = {k: torch.as_tensor(v) for k, v in batch.items() if k != "indices"}
    with torch.no_grad():                                  # |y - Q(s, a)| before the step
        y = n_step_double_q_target(t["reward"], t["discount"], t["terminated"], t["next_obs"],
                                   learner.online, learner.target)
        q = learner.online(t["obs"]).gather(1, t["action"][:, None]).squeeze(1)
    expected = (y - q).abs().numpy()
    info = learner.update(batch)
    np.testing.assert_allclose(info["priorities"], expected, rtol=1e-5)
    learner.update(batch)
    for k, v in learner.target.state_dict().items():      # 2 updates: target untouched
        torch.testing.assert_close(v, before[k])
    learner.update(batch)                                  # 3rd: hard copy
    for k, v in learner.target.state_dict().items():
        torch.testing.assert_close(v, learner.online.state_dict()[k])
    terminal = {**batch, "terminated": np.ones(32, bool)}   # no bootstrap: plain regression
    losses = [learner.update(terminal)["loss"] for _ in range(60)]
    assert losses[-1] < 0.5 * losses[0]
    assert learner.updates == 63


def test_td_errors_are_what_the_learner_would_use():
    torch.manual_seed(1)
    net = DuelingQNet(4, 2, (8,))
    batch = random_batch(n=5)
    t = {k: torch.as_tensor(v) for k, v in batch.items()}
    q = net(t["obs"]).gather(1, t["action"][:, None]).squeeze(1)
    y = n_step_double_q_target(t["reward"], t["discount"], t["terminated"], t["next_obs"],
                               net, net)
    np.testing.assert_allclose(td_errors(batch, net), (y - q).abs().detach().numpy(),
                               rtol=1e-6)


def test_greedy_returns_is_reproducible():
    torch.manual_seed(0)
    net = DuelingQNet(4, 2, (8,))
    a = dqn.greedy_returns(net, "CartPole-v1", episodes=3, seed=5)
    b = dqn.greedy_returns(net, "CartPole-v1", episodes=3, seed=5)
    assert a.shape == (3,) and (a >= 1).all()
    np.testing.assert_array_equal(a, b)


def test_discrete_observations_are_one_hot():
    env = make_env("FrozenLake-v1")
    assert env.observation_space.shape == (16,)
    obs, _ = env.reset(seed=0)
    assert obs.sum() == 1


def test_continuous_actions_are_refused():
    env = make_env("Pendulum-v1")
    with pytest.raises(ValueError, match="sac"):
        dqn.require_discrete(env)


# --- the single-process trainer: rows, checkpoints, resume --------------------------------------

SMALL = {"max_env_steps": 600, "learning_starts": 200, "steps_per_iteration": 300,
         "eval_episodes": 2, "hidden": (16,), "batch_size": 32, "replay_ratio": 4.0,
         "target_return": None}


def test_train_dqn_holds_the_replay_ratio_and_stops_on_the_budget():
    cfg = DQNConfig().updated(SMALL)
    rows = []
    result = dqn.DQNTrainer.train(cfg, progress=rows.append)
    assert result.stopped_by == "env_steps" and result.reached   # no goal: the budget is it
    assert [r["iteration"] for r in rows] == [1, 2]
    last = rows[-1]
    assert last["env_steps"] == 600
    for key in ("iteration", "time_s", "env_steps", "learner_updates", "eval_return",
                "train_return"):
        assert key in last
    # updates * batch / transitions past learning_starts = the replay ratio (up to the
    # n-step window): the transitions that only filled the buffer are owed nothing
    assert last["replay_size"] >= 600 - 2
    expected = 4.0 * (600 - SMALL["learning_starts"]) / 32
    assert expected - 2 <= last["learner_updates"] <= expected


def test_checkpoint_round_trip_and_resume_continue_the_counters(tmp_path):
    cfg = DQNConfig().updated(SMALL)
    run = Run(tmp_path / "run", checkpoint_freq=1, keep_checkpoints=1)
    trainer = DQNTrainer(cfg)
    result = run_training(trainer, cfg, run=run)
    run.close()
    saved = sorted((tmp_path / "run" / "checkpoints").iterdir())
    assert [p.name for p in saved] == ["checkpoint_000002"]       # keep 1: the first is gone

    state = load_checkpoint(tmp_path / "run", algo="dqn", env_id="CartPole-v1")
    assert state["iteration"] == 2 and state["counters"]["env_steps"] == 600
    for name, value in trainer.learner.online.state_dict().items():
        torch.testing.assert_close(state["learner"]["online"][name], value)

    resumed = DQNTrainer(cfg.updated({"max_env_steps": 900}), restore=state)
    assert resumed.learner.updates == result.last["learner_updates"]
    for name, value in trainer.learner.optimizer.state_dict()["state"][0].items():
        torch.testing.assert_close(resumed.learner.optimizer.state_dict()["state"][0][name],
                                   value)
    row = resumed.step()
    assert row["iteration"] == 3
    assert row["env_steps"] == 900
    assert row["time_s"] >= result.last["time_s"]
    # the buffer refills from empty, so updates resume once learning_starts is reached again
    assert row["learner_updates"] > result.last["learner_updates"]
    assert not math.isnan(row["eval_return"])
    resumed.close()
