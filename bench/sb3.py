"""Stable-Baselines3 with the RL Zoo's tuned settings, timed on exactly our evaluation protocol.

    python -m bench.sb3 [--quick] [--seeds 0 1 2] [--tasks CartPole-v1 Pendulum-v1]
                        [--json bench/results/sb3.json]

On one laptop, the library an attendee would reach for instead of our code is Stable-Baselines3
(one process) with the settings of its RL Zoo. Per task, 3 seeds, one after the other:

| task        | SB3 | settings: rl_zoo3 2.9.2                 | goal | budget          |
| ----------- | --- | --------------------------------------- | ---- | --------------- |
| CartPole-v1 | DQN | `rl_zoo3/hyperparams/dqn.yml` CartPole-v1 | 475  | bench/apex.py's |
| Pendulum-v1 | SAC | `rl_zoo3/hyperparams/sac.yml` Pendulum-v1 | -200 | bench/sac.py's  |

The settings in `ZOO` are those files' entries (read from the rl_zoo3 2.9.2 wheel; the zoo
itself is not a dependency). Their `n_timesteps` sets DQN's exploration schedule (epsilon from
1.0 to 0.04 over the first 16% of 50,000 steps), so a run first learns for `n_timesteps`, as
the zoo does, then goes on with the final epsilon until the goal or the budget. PyTorch runs
on 1 thread, as rl_zoo3's train.py advises for the CPU ("Setting num threads to 1 makes
things run faster on cpu"): SB3 gets its best setting here.

The evaluation protocol is course_lib's, through course_lib's own functions (`OurEvaluation`):

- a snapshot every `eval_every_steps` env steps, fixed counts, so that a seed's run is
  repeatable: SB3 trains the same weights for a seed whenever it is evaluated (evaluation
  draws from none of its generators), and with evaluations at fixed env steps it stops at the
  same one every time (evaluated on a wall-clock cadence it did not: its returns pass the goal
  in short spells, and where a timed evaluation fell decided the stop). CartPole: 1,000, the
  iteration of our single-process DQN (`DQNConfig.steps_per_iteration`), which the scaling
  ladder races it against; Pendulum: 200, one episode. The time budget is checked at every
  step: past it, one last evaluation and the run stops (as our trainers do);
- `trainer.evaluation_request`: `eval_episodes` (10) episodes with fresh seeds
  (`derive_seed(seed, "evaluation", k)`), and if their mean meets the goal `confirm_episodes`
  (20) more of the same weights; `scoring.evaluation_columns` scores them: `eval_return` is the
  mean of the confirming episodes when there are any, else of the 10, and `eval_lower` the
  lower confidence bound the stop reads (its level spent across the run's goal tests);
- `envs.evaluate_policy` plays them, greedy/deterministic: `model.predict(obs,
  deterministic=True)` is the policy;
- `results.stop_reason` decides the stop (the goal's bound first, then the env-step and time
  budgets).

The clock starts before the SB3 model is built (ours: at the trainer's creation), and the time
to the goal is when the confirming evaluation ended (ours: `wall_s` of the stopping row).
Evaluation time is inside both clocks; SB3 is one process, so its training pauses while it
evaluates (`eval_s` says how long in total), while ours evaluates in its own actor.

The ratio ours/SB3 is computed by bench/run_all.py against bench/apex.py and bench/sac.py of
the same `make bench` run. `--quick`: one seed, tiny budgets, no goal (measures nothing).
"""

from __future__ import annotations

import math
import statistics
import time

import numpy as np
import torch
from stable_baselines3 import DQN, SAC
from stable_baselines3.common.callbacks import BaseCallback

from bench.benchlib import Recording, parser, seeds_of
from course_lib.dqn import DQNConfig
from course_lib.envs import evaluate_policy, make_env
from course_lib.results import stop_reason
from course_lib.scoring import evaluation_columns
from course_lib.trainer import TrainerConfig, evaluation_request

ZOO_VERSION = "2.9.2"
#: task -> the RL Zoo's entry (rl_zoo3 2.9.2, hyperparams/<algo>.yml), as SB3 keyword arguments
ZOO = {
    "CartPole-v1": {"file": "rl_zoo3/hyperparams/dqn.yml", "n_timesteps": 50_000, "kwargs": {
        "learning_rate": 2.3e-3, "batch_size": 64, "buffer_size": 100_000,
        "learning_starts": 1_000, "gamma": 0.99, "target_update_interval": 10,
        "train_freq": 256, "gradient_steps": 128, "exploration_fraction": 0.16,
        "exploration_final_eps": 0.04, "policy_kwargs": {"net_arch": [256, 256]}}},
    "Pendulum-v1": {"file": "rl_zoo3/hyperparams/sac.yml", "n_timesteps": 20_000,
                    "kwargs": {"learning_rate": 1e-3}},
}
#: task -> SB3 algorithm, goal, budget (the same as our side's benchmark), evaluation cadence
TASKS = {
    "CartPole-v1": {"algo": DQN, "target_return": 475.0, "max_env_steps": 150_000,
                    "max_time_s": 300.0, "eval_every_steps": DQNConfig.steps_per_iteration},
    "Pendulum-v1": {"algo": SAC, "target_return": -200.0, "max_env_steps": 30_000,
                    "max_time_s": 600.0, "eval_every_steps": 200},
}
QUICK = {"CartPole-v1": {"max_env_steps": 2_000, "max_time_s": 60.0},
         "Pendulum-v1": {"max_env_steps": 400, "max_time_s": 60.0}}


def run_config(task: str, seed: int, quick: bool) -> TrainerConfig:
    """The evaluation protocol and stop rule of one run, as our trainers hold them."""
    spec = TASKS[task]
    budget = {"target_return": spec["target_return"], "max_env_steps": spec["max_env_steps"],
              "max_time_s": spec["max_time_s"]}
    if quick:
        budget = {**budget, **QUICK[task], "target_return": None}
    return TrainerConfig(env_id=task, seed=seed, eval_episodes=3 if quick else 10, **budget)


class OurEvaluation(BaseCallback):
    """Holds an SB3 run to course_lib's evaluation protocol and stop rule: every `every_steps`
    env steps, and once when the time budget has run out, it evaluates the model as it is now
    with `trainer.evaluation_request` and `envs.evaluate_policy`, records a row, and stops
    training when `results.stop_reason` says so (`stopped_by`). `start` is the run's clock
    origin."""

    def __init__(self, cfg: TrainerConfig, every_steps: int, start: float):
        super().__init__()
        self.cfg, self.every_steps, self.start = cfg, every_steps, start
        self.deadline = math.inf if cfg.max_time_s is None else start + cfg.max_time_s
        self.rows: list[dict] = []
        self.evaluations = 0                  # the run's evaluations so far (the seed stream)
        self.goal_tests = 0                   # the run's goal tests so far (the stop's level)
        self.eval_s = 0.0                     # wall-clock seconds spent evaluating
        self.stopped_by: str | None = None

    def _on_step(self) -> bool:
        if (self.model.num_timesteps % self.every_steps
                and time.perf_counter() < self.deadline):
            return True
        return self.evaluate_snapshot()

    def act(self, obs: np.ndarray) -> np.ndarray:
        """The greedy/deterministic actions of a batch of observations."""
        return self.model.predict(obs, deterministic=True)[0]

    def evaluate_snapshot(self) -> bool:
        """Score the model as it is now (training waits); False once the run should stop."""
        t0 = time.perf_counter()
        returns: list[float] = []
        while (request := evaluation_request(self.cfg, returns, self.evaluations)) is not None:
            self.evaluations += 1
            episodes, seed = request
            returns += evaluate_policy(self.act, self.cfg.env_id, episodes, seed).tolist()
        now = time.perf_counter()
        self.eval_s += now - t0
        scored = evaluation_columns(self.cfg, returns, self.goal_tests)
        self.goal_tests = scored["goal_tests"]
        row = {"time_s": t0 - self.start, "wall_s": now - self.start,
               "env_steps": int(self.model.num_timesteps),
               "learner_updates": int(self.model._n_updates), **scored}
        self.rows.append(row)
        self.stopped_by = stop_reason(row, self.cfg)
        return self.stopped_by is None


def run_once(task: str, seed: int, quick: bool, latency_ms: float = 0.0,
             budget: dict | None = None, zoo_changes: dict | None = None) -> dict:
    """One SB3 run to the goal or the budget; what it took, and its evaluation curve.
    `latency_ms`: its training env waits that long per step (`envs.Latency`, as our trainers'
    `env_latency_ms`); `budget`: other stop settings (target_return, max_env_steps, ...);
    `zoo_changes`: SB3 keyword arguments that replace the zoo's (`bench/matched.py`)."""
    cfg, spec, zoo = run_config(task, seed, quick), TASKS[task], ZOO[task]
    cfg = cfg.updated(budget or {})
    torch.set_num_threads(1)                  # the zoo's advice for the CPU (module docstring)
    start = time.perf_counter()               # the clock includes building the model
    env = make_env(task, latency_ms=latency_ms) if latency_ms else task
    model = spec["algo"]("MlpPolicy", env, seed=seed, verbose=0, device="cpu",
                         **{**zoo["kwargs"], **(zoo_changes or {})})
    clock = OurEvaluation(cfg, spec["eval_every_steps"], start)
    # the zoo's own run first (its n_timesteps sets DQN's epsilon schedule), then on with the
    # schedule's end values until the goal or the budget
    phases = [min(zoo["n_timesteps"], cfg.max_env_steps)]
    phases.append(max(0, cfg.max_env_steps - phases[0]))
    for i, steps in enumerate(phases):
        if clock.stopped_by is None and steps > 0:
            model.learn(total_timesteps=steps, callback=clock, reset_num_timesteps=i == 0)
    if clock.stopped_by is None:              # the budget ran out between two evaluations
        clock.evaluate_snapshot()
        clock.stopped_by = clock.stopped_by or "env_steps"
    last = clock.rows[-1]
    return {"task": task, "algo": spec["algo"].__name__, "seed": seed,
            "reached": clock.stopped_by == "eval_return", "stopped_by": clock.stopped_by,
            "env_steps": last["env_steps"], "time_s": round(last["wall_s"], 1),
            "learner_updates": last["learner_updates"],
            "eval_return": round(last["eval_return"], 1), "eval_episodes": last["eval_episodes"],
            "evaluations": clock.evaluations, "eval_s": round(clock.eval_s, 1),
            "curve": [[round(r["wall_s"], 1), r["env_steps"], round(r["eval_return"], 1)]
                      for r in clock.rows]}


def summarise(runs: list[dict]) -> list[dict]:
    """Per task: medians over seeds (a missed run counts with what it spent, and `reached`
    says how many seeds got there)."""
    rows = []
    for task in dict.fromkeys(r["task"] for r in runs):
        mine = [r for r in runs if r["task"] == task]
        rows.append({"task": task, "algo": mine[0]["algo"], "goal": TASKS[task]["target_return"],
                     "seeds": len(mine), "reached": sum(r["reached"] for r in mine),
                     "median_env_steps": statistics.median(r["env_steps"] for r in mine),
                     "median_time_s": statistics.median(r["time_s"] for r in mine),
                     "median_eval_s": statistics.median(r["eval_s"] for r in mine)})
    return rows


def bench_sb3(seeds=(0, 1, 2), tasks=tuple(TASKS), quick: bool = False, log=print) -> dict:
    runs = []
    for task in tasks:
        for seed in seeds:
            runs.append(run_once(task, seed, quick))
            r = runs[-1]
            log(f"{task} SB3 {r['algo']} seed {seed}: "
                f"{'reached' if r['reached'] else 'NOT reached'} ({r['stopped_by']}) at "
                f"{r['env_steps']:,} env steps, {r['time_s']:.1f} s ({r['eval_s']:.1f} s of it "
                f"evaluating, {r['evaluations']} evaluations), eval {r['eval_return']:.1f} over "
                f"{r['eval_episodes']} episodes", flush=True)
    return {"config": {"quick": quick, "seeds": list(seeds), "tasks": list(tasks),
                       "rl_zoo3": ZOO_VERSION, "zoo": ZOO, "torch_threads": 1,
                       "budgets": {t: {k: v for k, v in run_config(t, 0, quick).to_dict().items()
                                       if k in ("target_return", "max_env_steps", "max_time_s",
                                                "eval_episodes", "confirm_episodes")}
                                   | {"eval_every_steps": TASKS[t]["eval_every_steps"]}
                                   for t in tasks}},
            "runs": runs, "summary": summarise(runs), "targets": {}}


def main() -> None:
    cli = parser(__doc__, "sb3", "one seed, tiny budgets, no goal", seeds=True)
    cli.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    args = cli.parse_args()
    recording = Recording(packages=("stable-baselines3",))
    result = bench_sb3(seeds_of(args), tuple(args.tasks), args.quick)
    for row in result["summary"]:
        print(f"{row['task']} SB3 {row['algo']}: {row['reached']}/{row['seeds']} reached; "
              f"median {row['median_env_steps']:,.0f} env steps, {row['median_time_s']:.1f} s")
    recording.write(result, args.json)


if __name__ == "__main__":
    main()
