"""RLlib side by side: DQN on CartPole-v1 and SAC on Pendulum-v1 through RLlib's Python API.

The RLlib workflow in five calls (new API stack, Ray 2.60)::

    config = rllib_config(cfg)            # DQNConfig() / SACConfig() .environment() .training() ...
    algo = config.build_algo()            # env runner, learner, replay buffer: all in this process
    result = algo.train()                 # one iteration: a nested dict of metrics
    path = algo.save_to_path(folder)      # a checkpoint (a folder)
    algo = Algorithm.from_checkpoint(path); algo.evaluate()   # restore, then evaluate

`train_rllib(cfg, run=...)` drives that loop with the same stop criteria (target return, env
steps, seconds) and the same progress rows as course_lib's own trainers (`results.ROW_KEYS`),
so one plot and one table show both. RLlib checkpoints are its own folders, written every
`checkpoint_every` iterations (and at the end) under `<run>/checkpoints/checkpoint_<i>/`.

A fair race: both sides are scored the same way. After each iteration (at least
`eval_every_s` seconds of training, as course_lib's distributed trainers) RLlib's weights are
played by course_lib's own evaluation (`envs.evaluate_policy`, with `trainer.evaluation_request`'s
rule: 10 fresh-seeded episodes, 20 more when they meet the goal). RLlib's clock pauses while
it is evaluated (it would block its training); course_lib's rows carry the time their snapshot
was taken while its evaluator plays beside the training. Neither clock counts evaluation.

Where RLlib's numbers land: `algo.train()` on its own writes no files (`algo.logdir` stays
empty); RLlib's result folders (params.json, result.json, progress.csv, TensorBoard events,
checkpoints) come from running it under Ray Tune, in `~/ray_results/<experiment>/<trial>/`.
Here a `runs.Run` writes the same files in course_lib's layout instead.

RLlib is an optional extra: importing this module works without it, building a config raises
`RLlibMissingError` with the install command.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from course_lib.config import Config, quick_mode
from course_lib.envs import evaluate_policy
from course_lib.results import TrainResult
from course_lib.scoring import evaluation_columns
from course_lib.trainer import Trainable, evaluation_request, run_training

INSTALL_HINT = ("RLlib is not installed (it is opt-in): run `make lab RLLIB=1`, or "
                '`pip install -c requirements/lock.txt -e ".[attendee,rllib]"`, then restart '
                "the kernel")

#: each algorithm's task and goal (the same as course_lib's Ape-X and SAC presets)
TASKS = {"dqn": {"env_id": "CartPole-v1", "target_return": 475.0},
         "sac": {"env_id": "Pendulum-v1", "target_return": -200.0}}


#: full-mode env step budgets: RLlib's tuned examples reach their goals well within these
FULL_STEPS = {"dqn": 200_000, "sac": 30_000}


class RLlibMissingError(ImportError):
    """RLlib (the `rllib` extra) is not installed."""


def require_rllib():
    """The `ray.rllib` module, or RLlibMissingError with the install command. Also quiets
    RLlib's start-up warnings (e.g. "You are running DQN on the new API stack!")."""
    logging.getLogger("ray.rllib").setLevel(logging.ERROR)
    try:
        import ray.rllib  # noqa: F401  (RLlib's own imports need pandas, dm_tree, ...)
        from ray.rllib.algorithms.algorithm import Algorithm  # noqa: F401
    except ImportError as err:
        raise RLlibMissingError(f"{INSTALL_HINT} ({err})") from None
    return ray.rllib


@dataclass
class RLlibConfig(Config):
    """One RLlib run: which algorithm, its budget, and how often to checkpoint and evaluate.

    The algorithm's own hyperparameters are RLlib's tuned examples for these tasks (see
    `dqn_config` and `sac_config`); only the sampling layout is chosen for 2 cores.
    """

    QUICK: ClassVar[dict] = {"target_return": None, "max_env_steps": 400, "max_time_s": 120.0,
                             "eval_every_s": 1.0, "learning_starts": 100, "eval_episodes": 2}
    algo: str = "dqn"                  # "dqn" (CartPole-v1) or "sac" (Pendulum-v1)
    env_id: str = ""                   # "" means the algorithm's task in TASKS
    # -- sampling: everything in the driver process (no extra actors on a 2-core laptop) --
    num_env_runners: int = 0           # 0: the driver samples; N: N env-runner actors
    learning_starts: int = 1_000       # env steps sampled before the first update
    # -- evaluation: course_lib's, as for its own trainers (clock paused meanwhile) --
    eval_every_s: float = 3.0          # seconds of training per iteration: one evaluation, one row
    eval_episodes: int = 10            # greedy (DQN) / deterministic (SAC) fresh episodes
    confirm_episodes: int = 20         # more fresh episodes of the same weights before a stop
    # -- checkpoints --
    checkpoint_every: int = 5          # iterations between checkpoints (0: never)
    checkpoint_at_end: bool = True     # also after the last iteration
    # -- stopping (None switches one off) --
    target_return: float | None = 475.0   # evaluation return that ends the run
    max_env_steps: int | None = 200_000
    max_time_s: float | None = 600.0
    torch_threads: int = 1             # the driver's torch threads (1: no oversubscription)
    seed: int = 0

    @classmethod
    def for_algo(cls, algo: str, quick: bool | None = None, **overrides) -> RLlibConfig:
        """The preset for `algo` ("dqn" or "sac"): its task, goal and budget, quick or full."""
        if algo not in TASKS:
            raise ValueError(f"algo must be one of {sorted(TASKS)}, got {algo!r}")
        values = {"algo": algo, **TASKS[algo], "max_env_steps": FULL_STEPS[algo]}
        if quick_mode() if quick is None else quick:
            values.update(cls.QUICK)
        return cls().updated({**values, **overrides})


# ---------------------------------------------------------------------------------------------
# RLlib configs (the new API stack is the default for DQN and SAC in Ray 2.60)
# ---------------------------------------------------------------------------------------------

def dqn_config(cfg: RLlibConfig):
    """RLlib's tuned CartPole DQN (reaches 450 within 200K steps): dueling double-Q, 3-step
    targets, prioritized replay, epsilon 1.0 -> 0.02 over 10K steps."""
    require_rllib()
    from ray.rllib.algorithms.dqn import DQNConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    return (DQNConfig()
            .environment(cfg.env_id)
            .training(lr=5e-4, gamma=0.99, train_batch_size_per_learner=32,
                      replay_buffer_config={"type": "PrioritizedEpisodeReplayBuffer",
                                            "capacity": 50_000, "alpha": 0.6, "beta": 0.4},
                      n_step=3, double_q=True, dueling=True,
                      epsilon=[(0, 1.0), (10_000, 0.02)],
                      num_steps_sampled_before_learning_starts=cfg.learning_starts)
            .rl_module(model_config=DefaultModelConfig(
                fcnet_hiddens=[256], fcnet_activation="tanh", head_fcnet_hiddens=[256])))


def sac_config(cfg: RLlibConfig):
    """RLlib's tuned Pendulum SAC (reaches -250 within 20K steps): 256x256 nets, auto entropy,
    separate actor/critic/alpha learning rates, one update of 256 per env step."""
    require_rllib()
    from ray.rllib.algorithms.sac import SACConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    return (SACConfig()
            .environment(cfg.env_id)
            .training(initial_alpha=1.001, actor_lr=2e-4, critic_lr=8e-4, alpha_lr=9e-4,
                      lr=None, target_entropy="auto", n_step=1, tau=0.005, gamma=0.99,
                      train_batch_size_per_learner=256, target_network_update_freq=1,
                      replay_buffer_config={"type": "PrioritizedEpisodeReplayBuffer",
                                            "capacity": 100_000, "alpha": 1.0, "beta": 0.0},
                      num_steps_sampled_before_learning_starts=cfg.learning_starts)
            .rl_module(model_config=DefaultModelConfig(
                fcnet_hiddens=[256, 256], fcnet_activation="relu", head_fcnet_hiddens=[])))


def rllib_config(cfg: RLlibConfig):
    """The full AlgorithmConfig: the algorithm's part plus sampling, evaluation and seeding."""
    if cfg.algo not in TASKS:
        raise ValueError(f"algo must be one of {sorted(TASKS)}, got {cfg.algo!r}")
    if not cfg.env_id:
        cfg = cfg.updated({"env_id": TASKS[cfg.algo]["env_id"]})
    config = dqn_config(cfg) if cfg.algo == "dqn" else sac_config(cfg)
    return (config
            .env_runners(num_env_runners=cfg.num_env_runners, num_envs_per_env_runner=1)
            # RLlib's own evaluation, off by default (interval None): the race scores RLlib
            # with course_lib's evaluation (`RLlibTrainer.evaluate`); `algo.evaluate()` or
            # `.evaluation(evaluation_interval=1)` switch RLlib's on (greedy: explore=False)
            .evaluation(evaluation_interval=None, evaluation_duration=cfg.eval_episodes,
                        evaluation_duration_unit="episodes", evaluation_num_env_runners=0,
                        evaluation_config={"explore": False})
            # one iteration = at least eval_every_s seconds (no minimum of env steps)
            .reporting(min_time_s_per_iteration=cfg.eval_every_s,
                       min_sample_timesteps_per_iteration=0,
                       metrics_num_episodes_for_smoothing=10)
            .debugging(seed=cfg.seed, log_level="ERROR"))


# ---------------------------------------------------------------------------------------------
# One result dict -> one progress row (the same keys as course_lib's trainers)
# ---------------------------------------------------------------------------------------------

def _get(result: dict, *keys: str, default=math.nan):
    for key in keys:
        if not isinstance(result, dict) or key not in result:
            return default
        result = result[key]
    return result


def row_from_result(result: dict, iteration: int, time_s: float, batch_size: int) -> dict:
    """`algo.train()`'s nested dict as a course_lib progress row.

    | row key         | RLlib result key                                                |
    | --------------- | --------------------------------------------------------------- |
    | env_steps       | num_env_steps_sampled_lifetime                                  |
    | learner_updates | learners/default_policy/num_module_steps_trained_lifetime / batch |
    | eval_return     | evaluation/env_runners/episode_return_mean (nan: no evaluation) |
    | train_return    | env_runners/episode_return_mean (nan: no episode finished yet)  |

    (The race replaces eval_return with course_lib's evaluation: `RLlibTrainer.step`.)
    """
    trained = _get(result, "learners", "default_policy", "num_module_steps_trained_lifetime",
                   default=0)
    env_steps = int(_get(result, "num_env_steps_sampled_lifetime", default=0))
    return {"iteration": iteration, "time_s": round(time_s, 2), "env_steps": env_steps,
            "learner_updates": int(trained // batch_size),
            "eval_return": float(_get(result, "evaluation", "env_runners",
                                      "episode_return_mean")),
            "train_return": float(_get(result, "env_runners", "episode_return_mean")),
            "env_steps_per_s": round(env_steps / time_s, 1) if time_s > 0 else math.nan}


# ---------------------------------------------------------------------------------------------
# The training loop: course_lib's `trainer.run_training` with an RLlib Algorithm inside
# ---------------------------------------------------------------------------------------------

class RLlibTrainer(Trainable):
    """Wraps an RLlib Algorithm in course_lib's trainer protocol (`trainer.Trainable`): each
    `step()` is one `algo.train()` (at least `eval_every_s` of training), then course_lib's
    evaluation of the weights it left; checkpoints are RLlib's, every `checkpoint_every`.

    The clock (`time_s`) counts building the algorithm and training, not evaluating: it is
    stopped while `evaluate` plays. `wall_s` is the time including evaluations."""

    def __init__(self, cfg: RLlibConfig, checkpoint_dir: str | Path | None = None):
        self.algo = f"rllib-{cfg.algo}"      # the name run_training shows
        self.cfg, self.iteration, self.evaluations = cfg, 0, 0
        self.goal_tests = 0                  # evaluations that tested the goal (the stop rule's)
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir else None
        self.checkpoints: list[Path] = []
        import torch

        torch.set_num_threads(cfg.torch_threads)  # the learner runs in this process
        config = rllib_config(cfg)
        self.batch_size = config.train_batch_size_per_learner
        self.started = time.perf_counter()    # the clock includes building the algorithm
        self.algorithm = config.build_algo()
        self.train_s = time.perf_counter() - self.started   # the clock: evaluation excluded

    def step(self) -> dict[str, Any]:
        t0 = time.perf_counter()
        result = self.algorithm.train()
        self.train_s += time.perf_counter() - t0
        self.iteration += 1
        row = row_from_result(result, self.iteration, self.train_s, self.batch_size)
        returns = self.evaluate()             # the clock stands still meanwhile
        scored = evaluation_columns(self.cfg, returns, self.goal_tests)  # course_lib's stop rule
        self.goal_tests = scored["goal_tests"]
        row.update(scored, wall_s=round(time.perf_counter() - self.started, 2))
        if self.cfg.checkpoint_every and self.iteration % self.cfg.checkpoint_every == 0:
            self.save()
        return row

    def evaluate(self) -> list[float]:
        """The returns of the algorithm's current weights under course_lib's evaluation:
        `evaluation_request`'s episodes and fresh seeds, played by `envs.evaluate_policy`."""
        act, returns = rllib_policy(self.algorithm), []
        while (request := evaluation_request(self.cfg, returns, self.evaluations)) is not None:
            self.evaluations += 1
            episodes, seed = request
            returns += evaluate_policy(act, self.cfg.env_id, episodes, seed).tolist()
        return returns

    def save(self) -> Path | None:
        """`algo.save_to_path()` into checkpoints/checkpoint_<iteration>/."""
        if self.checkpoint_dir is None:
            return None
        path = (self.checkpoint_dir / f"checkpoint_{self.iteration:06d}").resolve()  # a URI
        self.algorithm.save_to_path(str(path))
        self.checkpoints.append(path)
        return path

    def state(self) -> dict:
        return {"algo": self.algo, "iteration": self.iteration}

    def get_weights(self) -> dict[str, np.ndarray]:
        state = self.algorithm.get_module().get_state(inference_only=True)
        return {name: np.asarray(value) for name, value in state.items()}

    def close(self) -> None:
        if self.cfg.checkpoint_at_end and self.iteration and (
                not self.checkpoints or self.checkpoints[-1].name
                != f"checkpoint_{self.iteration:06d}"):
            self.save()
        self.algorithm.stop()


def train_rllib(cfg: RLlibConfig, progress=None, run=None) -> TrainResult:
    """Train until a stop criterion of `cfg` holds; returns a `results.TrainResult` whose
    history rows match course_lib's. `run`: a `runs.Run` for the progress files (CSV,
    JSON lines, TensorBoard); RLlib checkpoints go to `<run>/checkpoints/`. Starts Ray
    (`init_ray`) if it is not running."""
    from course_lib.ray_tools import init_ray

    init_ray()
    if run is not None:                    # our rows only: RLlib writes its own checkpoints
        run.checkpoint_freq, run.checkpoint_at_end = 0, False
    trainer = RLlibTrainer(cfg, run.path / "checkpoints" if run is not None else None)
    result = run_training(trainer, cfg, progress=progress, run=run)
    result.checkpoint = trainer.checkpoints[-1] if trainer.checkpoints else None
    result.extras["checkpoints"] = [str(p) for p in trainer.checkpoints]
    return result


def rllib_policy(algorithm) -> Callable[[np.ndarray], np.ndarray]:
    """act(batch of observations) -> env actions of `algorithm`'s RLModule, greedy (DQN) or
    deterministic (SAC), post-processed as RLlib's own env runners do (`normalize_actions`:
    scaled from [-1, 1] to the env's bounds; `clip_actions`). For `envs.evaluate_policy`."""
    require_rllib()
    import torch
    from ray.rllib.utils.spaces.space_utils import clip_action, unsquash_action

    module, config = algorithm.get_module(), algorithm.config
    dist_class = module.get_inference_action_dist_cls()
    space = module.action_space

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            out = module.forward_inference({"obs": torch.as_tensor(obs, dtype=torch.float32)})
            actions = (out["actions"] if "actions" in out else dist_class.from_logits(
                out["action_dist_inputs"]).to_deterministic().sample()).numpy()
        if config.normalize_actions:
            return np.stack([unsquash_action(a, space) for a in actions])
        return np.stack([clip_action(a, space) for a in actions]) if config.clip_actions \
            else actions

    return act


def restore_and_evaluate(checkpoint: str | Path, episodes: int = 10, seed: int = 0) -> dict:
    """`Algorithm.from_checkpoint(path)`, then `episodes` greedy (DQN) or deterministic (SAC)
    episodes from seeds `seed`, `seed + 1`, ... played by course_lib's `evaluate_policy`.
    Returns {"return_mean", "episodes", "iteration"}."""
    require_rllib()
    from ray.rllib.algorithms.algorithm import Algorithm

    from course_lib.ray_tools import init_ray

    init_ray()
    algo = Algorithm.from_checkpoint(str(checkpoint))
    try:
        returns = evaluate_policy(rllib_policy(algo), algo.config.env, episodes, seed)
        return {"return_mean": float(np.mean(returns)), "episodes": len(returns),
                "iteration": algo.iteration}
    finally:
        algo.stop()


# ---------------------------------------------------------------------------------------------
# Side by side: time to the goal, one table
# ---------------------------------------------------------------------------------------------

def time_to_goal(history: list[dict], goal: float) -> tuple[float, int] | None:
    """(seconds, env steps) of the first row whose eval_return reaches `goal`, else None."""
    for row in history:
        if not math.isnan(row["eval_return"]) and row["eval_return"] >= goal:
            return row["time_s"], row["env_steps"]
    return None


def comparison_rows(runs: dict[str, TrainResult], goal: float) -> list[dict]:
    """One row per run: reached or not, seconds and env steps to the goal (or spent), and the
    run's env steps and learner updates per second of its clock."""
    rows = []
    for label, result in runs.items():
        hit, last = time_to_goal(result.history, goal), result.last
        seconds, steps = hit if hit else (last["time_s"], last["env_steps"])
        rows.append({"run": label, "reached": hit is not None, "seconds": float(seconds),
                     "env_steps": int(steps), "best_eval": max(
                         (r["eval_return"] for r in result.history
                          if not math.isnan(r["eval_return"])), default=math.nan),
                     "env_steps_per_s": last["env_steps"] / max(last["time_s"], 1e-9),
                     "updates_per_s": last["learner_updates"] / max(last["time_s"], 1e-9)})
    return rows


def time_ratio(ours: dict, theirs: dict) -> str:
    """'0.31' when both reached the goal; '<= 0.31' when only ours did (theirs ran out of
    budget, so their time to the goal is longer); 'n/a' when ours did not reach it."""
    if not ours["reached"]:
        return "n/a (ours missed the goal)"
    ratio = ours["seconds"] / theirs["seconds"]
    return f"{ratio:.2f}" if theirs["reached"] else f"<= {ratio:.2f} (RLlib missed the goal)"


def format_rows(rows: list[dict], goal: float) -> str:
    """A plain-text table of `comparison_rows`."""
    lines = [f"{'run':<28}{'goal ' + format(goal, 'g'):>12}{'seconds':>10}{'env steps':>12}"
             f"{'best eval':>11}{'steps/s':>9}{'updates/s':>11}"]
    for r in rows:
        lines.append(f"{r['run']:<28}{'reached' if r['reached'] else 'NOT reached':>12}"
                     f"{r['seconds']:>10.1f}{r['env_steps']:>12,}{r['best_eval']:>11.1f}"
                     f"{r['env_steps_per_s']:>9.0f}{r['updates_per_s']:>11.1f}")
    return "\n".join(lines)
