"""course_lib.teaching.rllib_compare: rows, presets and the missing-extra message (no Ray, no
training)."""

import builtins
import math

import numpy as np
import pytest

from course_lib.results import ROW_KEYS, stop_reason
from course_lib.teaching import rllib_compare
from course_lib.teaching.rllib_compare import RLlibConfig, RLlibMissingError, row_from_result

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
    hint = r'make lab RLLIB=1.*-c requirements/lock\.txt -e "\.\[attendee,rllib\]"'
    with pytest.raises(RLlibMissingError, match=hint):
        rllib_compare.dqn_config(RLlibConfig.for_algo("dqn", quick=True))


class _FakeAlgorithm:     # evaluate() reaches the algorithm only through rllib_policy
    pass


def _trainer(cfg):
    trainer = rllib_compare.RLlibTrainer.__new__(rllib_compare.RLlibTrainer)
    trainer.cfg, trainer.evaluations, trainer.algorithm = cfg, 0, _FakeAlgorithm()
    return trainer


@pytest.mark.parametrize("score, spread, expected", [(-150.0, 10.0, [10, 20]),
                                                     (-150.0, 0.0, [10, 20, 20]),
                                                     (-900.0, 10.0, [10])])
def test_rllib_is_scored_by_course_libs_rule(monkeypatch, score, spread, expected):
    """10 fresh episodes, 20 more only when they meet the goal (20 more again when those all
    returned the same), never a seed twice: the rule of course_lib's own trainers
    (trainer.evaluation_request), played by evaluate_policy."""
    calls = []

    def fake_evaluate_policy(act, env_id, episodes, seed):
        calls.append((env_id, episodes, seed))
        return score + spread * np.resize([-1.0, 1.0], episodes)

    monkeypatch.setattr(rllib_compare, "rllib_policy", lambda algorithm: "act")
    monkeypatch.setattr(rllib_compare, "evaluate_policy", fake_evaluate_policy)
    trainer = _trainer(RLlibConfig.for_algo("sac", quick=False))
    returns = trainer.evaluate()
    assert [episodes for _, episodes, _ in calls] == expected
    assert {env for env, _, _ in calls} == {"Pendulum-v1"} and len(returns) == sum(expected)
    trainer.evaluate()                                   # the next iteration: new seeds
    seeds = [seed for _, _, seed in calls]
    assert len(seeds) == len(set(seeds)) and trainer.evaluations == len(calls)


class _OneIteration:       # algorithm.train(): one iteration's result, no evaluation of RLlib's
    def train(self):
        return {"env_runners": {"num_env_steps_sampled_lifetime": 1_000},
                "learners": {"default_policy": {"num_module_steps_trained_lifetime": 500}}}


@pytest.mark.parametrize("spread, reached", [(0.5, True), (400.0, False)])
def test_rllib_rows_stop_by_course_libs_bound(monkeypatch, spread, reached):
    """A full-mode row of the race carries the bound the stop reads (eval_lower, goal_tests),
    so the RLlib side stops by the same rule as ours: near-identical returns at -150 clear
    -200, returns spread over +-400 around it do not (a row without the bound was refused)."""
    monkeypatch.setattr(rllib_compare, "rllib_policy", lambda algorithm: "act")
    monkeypatch.setattr(rllib_compare, "evaluate_policy", lambda act, env_id, episodes, seed:
                        -150.0 + spread * np.resize([-1.0, 1.0], episodes))
    cfg = RLlibConfig.for_algo("sac", quick=False)
    trainer = _trainer(cfg)
    trainer.algorithm, trainer.iteration, trainer.goal_tests = _OneIteration(), 0, 0
    trainer.train_s, trainer.started, trainer.batch_size = 0.0, 0.0, 256
    row = trainer.step()
    assert row["goal_tests"] == 1 and not math.isnan(row["eval_lower"])
    assert (stop_reason(row, cfg) == "eval_return") is reached


def test_rllib_config_evaluates_nothing_itself_and_paces_by_seconds():
    pytest.importorskip("ray.rllib")
    cfg = RLlibConfig.for_algo("dqn", quick=False, eval_every_s=2.5)
    config = rllib_compare.rllib_config(cfg)
    assert config.evaluation_interval is None            # course_lib's evaluation instead
    assert config.min_time_s_per_iteration == 2.5 and not config.min_sample_timesteps_per_iteration
    assert config.evaluation_config["explore"] is False  # if switched on: greedy


def test_comparison_rows_report_updates_per_second():
    history = [{"time_s": 10.0, "env_steps": 1_000, "learner_updates": 500, "eval_return": 480.0}]
    result = rllib_compare.TrainResult(history, "eval_return", True, {}, None, {})
    [row] = rllib_compare.comparison_rows({"x": result}, goal=475.0)
    assert row["reached"] and row["updates_per_s"] == 50.0 and row["env_steps_per_s"] == 100.0
    assert "updates/s" in rllib_compare.format_rows([row], 475.0)
