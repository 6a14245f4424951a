"""Slow envs, as where distribution pays: `envs.Latency` (one env waits per step),
`envs.EnvBatch` (N envs stepped together, one wait per batch), and the trainers' setting."""

import numpy as np
import pytest

from course_lib import envs
from course_lib.dqn import DQNConfig, DQNTrainer


@pytest.fixture
def sleeps(monkeypatch):
    """Every time.sleep that envs makes, recorded instead of slept."""
    calls = []
    monkeypatch.setattr(envs.time, "sleep", calls.append)
    return calls


def test_a_latency_env_waits_on_every_step_and_a_plain_one_never(sleeps):
    slow = envs.make_env("CartPole-v1", latency_ms=2.0)
    slow.reset(seed=0)
    for _ in range(5):
        slow.step(0)
    assert sleeps == [0.002] * 5
    fast = envs.make_env("CartPole-v1")
    fast.reset(seed=0)
    fast.step(0)
    assert len(sleeps) == 5 and not isinstance(fast, envs.Latency)


def test_an_env_batch_waits_once_per_step_and_restarts_finished_episodes(sleeps):
    batch = envs.EnvBatch("CartPole-v1", 3, latency_ms=5.0, seed=0)
    first = batch.obs.copy()
    assert first.shape == (3, 4) and not np.allclose(first[0], first[1])   # seeds 0, 1, 2
    ended = False
    for _ in range(200):                     # pushing left: every episode ends within 200
        next_obs, rewards, terminated, truncated = batch.step([0, 0, 0])
        done = terminated | truncated
        if done.any():
            ended = True
            i = int(np.flatnonzero(done)[0])
            assert abs(next_obs[i][2]) > 0.2 or abs(next_obs[i][0]) > 2.4   # the last obs
            assert abs(batch.obs[i][2]) < 0.05                               # a new episode
            break
    assert ended and len(sleeps) >= 1 and set(sleeps) == {0.005}
    assert rewards.shape == (3,)
    batch.close()


def test_dqn_steps_several_envs_as_one_batch(sleeps):
    cfg = DQNConfig().updated({"num_envs": 4, "steps_per_iteration": 200,
                               "learning_starts": 100, "env_latency_ms": 1.0,
                               "eval_episodes": 2, "hidden": (16,), "batch_size": 32,
                               "target_return": None, "max_env_steps": 400})
    trainer = DQNTrainer(cfg)
    try:
        row = trainer.step()
    finally:
        trainer.close()
    assert row["env_steps"] == 200 and len(sleeps) == 50        # one wait per 4 env steps
    # every env's n-step window fills: all but the last n_step - 1 steps of each env land
    assert trainer.counters.inserted >= 200 - 4 * (cfg.n_step - 1)
    assert row["learner_updates"] > 0 and np.isfinite(row["loss"])
