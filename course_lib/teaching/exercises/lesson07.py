"""Checkers for notebook 07, RLlib side by side."""

from __future__ import annotations

import math

from course_lib.teaching.exercises.core import _Failed, checker


@checker(7, "eval_return",
         "the greedy evaluation return, NaN when there is none.")
def check_eval_return(eval_return):
    """eval_return(result): result["evaluation"]["env_runners"]["episode_return_mean"], NaN
    when the iteration ran no evaluation or finished no episode."""

    full = {"env_runners": {"episode_return_mean": 20.0},
            "evaluation": {"env_runners": {"episode_return_mean": 200.0}}}
    got = eval_return(full)
    if got != 200.0:
        raise _Failed(f"it returned {got!r} for a result whose evaluation return is 200.",
                      'Read result["evaluation"]["env_runners"]["episode_return_mean"]; '
                      'result["env_runners"] holds the exploring (training) episodes.')
    for missing in ({"env_runners": {}}, {"evaluation": {"env_runners": {}}}):
        got = eval_return(missing)
        if not (isinstance(got, float) and math.isnan(got)):
            raise _Failed(f"it returned {got!r} for {missing}, expected nan.",
                          "Use .get(...) with {} at each level and float('nan') at the end.")


@checker(7, "time_to_goal",
         "the first row at the goal, None when never reached.")
def check_time_to_goal(time_to_goal):
    """time_to_goal(history, goal): (time_s, env_steps) of the first row reaching goal, else
    None; a NaN return (no evaluation yet) never counts."""
    nan = float("nan")

    history = [{"time_s": 1.0, "env_steps": 100, "eval_return": nan},
               {"time_s": 2.0, "env_steps": 200, "eval_return": 480.0},
               {"time_s": 3.0, "env_steps": 300, "eval_return": 500.0}]
    got = time_to_goal(history, 475.0)
    if got is None or tuple(got) != (2.0, 200):
        raise _Failed(f"it returned {got!r}, expected (2.0, 200): the first row at the goal.",
                      "Loop over the rows in order and return at the first hit.")
    if time_to_goal(history, 501.0) is not None:
        raise _Failed("it found a goal that no row reaches.", "Return None after the loop.")
    # a goal below zero (Acrobot-v1's threshold is -100): a nan read as 0 would reach it early
    history = [{"time_s": 1.0, "env_steps": 100, "eval_return": nan},
               {"time_s": 2.0, "env_steps": 200, "eval_return": -400.0},
               {"time_s": 3.0, "env_steps": 300, "eval_return": -90.0}]
    got = time_to_goal(history, -100.0)
    if got is None or tuple(got) != (3.0, 300):
        raise _Failed(f"for the goal -100 it returned {got!r}, expected (3.0, 300): a row "
                      "without an evaluation (nan) reached nothing.",
                      "Skip a row whose eval_return is nan (math.isnan) before you compare; "
                      "do not turn nan into a number.")


@checker(7, "rllib_from_apex", "RLlib's DQN with the same network, replay, targets and workers.")
def check_rllib_from_apex(rllib_from_apex):
    """rllib_from_apex(cfg) must return an RLlib DQNConfig that matches an ApexConfig field by
    field (values chosen unlike both libraries' defaults, so a default cannot pass)."""
    from course_lib.apex import ApexConfig

    cfg = ApexConfig().updated({"env_id": "Acrobot-v1", "lr": 1e-3, "gamma": 0.98,
                                "batch_size": 48, "n_step": 2, "buffer_size": 20_000,
                                "priority_alpha": 0.5, "priority_beta": 0.3, "num_workers": 3,
                                "hidden": (64, 32)})
    config = rllib_from_apex(cfg)
    if type(config).__name__ != "DQNConfig":
        raise _Failed(f"it returned {type(config).__name__}, expected RLlib's DQNConfig.",
                      "from ray.rllib.algorithms.dqn import DQNConfig; chain .environment(...), "
                      ".training(...), .env_runners(...), .rl_module(...).")
    replay = config.replay_buffer_config or {}
    fields = [("env", config.env, cfg.env_id, ".environment(cfg.env_id)"),
              ("lr", config.lr, cfg.lr, ".training(lr=cfg.lr)"),
              ("gamma", config.gamma, cfg.gamma, ".training(gamma=cfg.gamma)"),
              ("train_batch_size_per_learner", config.train_batch_size_per_learner,
               cfg.batch_size, "RLlib's batch per gradient step is train_batch_size_per_learner"),
              ("n_step", config.n_step, cfg.n_step, ".training(n_step=cfg.n_step)"),
              ("dueling", config.dueling, True, "our network is dueling: dueling=True"),
              ("double_q", config.double_q, True, "our target is double Q: double_q=True"),
              ("replay capacity", replay.get("capacity"), cfg.buffer_size,
               "replay_buffer_config={'type': 'PrioritizedEpisodeReplayBuffer', "
               "'capacity': ..., 'alpha': ..., 'beta': ...}"),
              ("replay alpha", replay.get("alpha"), cfg.priority_alpha, "alpha = priority_alpha"),
              ("replay beta", replay.get("beta"), cfg.priority_beta, "beta = priority_beta"),
              ("num_env_runners", config.num_env_runners, cfg.num_workers,
               "RLlib's explorers are env runners: .env_runners(num_env_runners=...)"),
              ("fcnet_hiddens", list(config.model_config.get("fcnet_hiddens") or []),
               list(cfg.hidden), ".rl_module(model_config=DefaultModelConfig("
               "fcnet_hiddens=list(cfg.hidden)))")]
    for name, got, expected, hint in fields:
        if got != expected:
            raise _Failed(f"{name} is {got!r}, expected {expected!r} from the ApexConfig.", hint)
