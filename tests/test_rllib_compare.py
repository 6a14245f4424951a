"""course_lib.rllib_compare: rows, presets and the missing-extra message (no Ray, no training)."""

import builtins
import math

import pytest

from course_lib import rllib_compare
from course_lib.results import ROW_KEYS
from course_lib.rllib_compare import RLlibConfig, RLlibMissingError, row_from_result

RESULT = {  # the part of an `algo.train()` result dict (Ray 2.60, new API stack) we read
    "training_iteration": 3, "num_env_steps_sampled_lifetime": 3_000,
    "env_runners": {"episode_return_mean": 41.5, "num_episodes": 7},
    "evaluation": {"env_runners": {"episode_return_mean": 120.0, "num_episodes": 10}},
    "learners": {"default_policy": {"num_module_steps_trained_lifetime": 32 * 250}},
}


def test_row_has_course_lib_keys_and_values():
    row = row_from_result(RESULT, iteration=3, time_s=30.0, batch_size=32)
    assert tuple(row)[:len(ROW_KEYS)] == ROW_KEYS
    assert row["env_steps"] == 3_000 and row["learner_updates"] == 250
    assert row["eval_return"] == 120.0 and row["train_return"] == 41.5
    assert row["env_steps_per_s"] == 100.0


def test_row_before_any_episode_or_update_has_nan_returns():
    row = row_from_result({"num_env_steps_sampled_lifetime": 200, "env_runners": {}},
                          iteration=1, time_s=2.0, batch_size=32)
    assert math.isnan(row["eval_return"]) and math.isnan(row["train_return"])
    assert row["learner_updates"] == 0


def test_presets_follow_the_tasks_and_quick_mode():
    full = RLlibConfig.for_algo("sac", quick=False)
    assert (full.env_id, full.target_return, full.max_env_steps) == ("Pendulum-v1", -200.0,
                                                                      30_000)
    quick = RLlibConfig.for_algo("dqn", quick=True, seed=3)
    assert quick.env_id == "CartPole-v1" and quick.target_return is None
    assert quick.max_env_steps <= 1_000 and quick.seed == 3
    with pytest.raises(ValueError, match="algo must be one of"):
        RLlibConfig.for_algo("ppo")


def test_missing_rllib_says_how_to_install(monkeypatch):
    real_import = builtins.__import__

    def no_rllib(name, *args, **kwargs):
        if name.startswith("ray.rllib"):
            raise ImportError("No module named 'dm_tree'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_rllib)
    with pytest.raises(RLlibMissingError, match=r'pip install -e "\.\[rllib\]"'):
        rllib_compare.dqn_config(RLlibConfig.for_algo("dqn", quick=True))
