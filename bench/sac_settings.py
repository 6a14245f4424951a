"""What SAC's default settings buy: learner updates to a deterministic Pendulum-v1 return of -200,
textbook settings against the workbook's, in a single process (no Ray, no timing noise).

    python -m bench.sac_settings [--seeds 0 1 2 3 4 5] [--json bench/results/sac_settings.json]

On a 2-core laptop the parallel SAC of notebook 06 is learner-bound, so its wall-clock time to the
goal is about (updates needed) / (updates per second). This script measures the first factor for
each setting with the very pieces the learner actor uses (`sac.SACLearner`, `replay.ReplayBuffer`,
`sac.deterministic_returns`) and `SACConfig`'s `start_steps` (random actions), `learning_starts`
and `batch_size`, at one update per env step, testing every `eval_every` updates (10
deterministic episodes):

| setting   | hidden   | lr, alpha_lr | tau   | what it is                                   |
| --------- | -------- | ------------ | ----- | -------------------------------------------- |
| textbook  | 128, 128 | 1e-3         | 0.005 | Spinning Up / SB3-style values               |
| workbook  | 64, 64   | 3e-3         | 0.05  | `SACConfig` defaults (notebook 06)           |

`--quick`: one seed, a 600-step budget, no goal: checks that the script works.
"""

from __future__ import annotations

import statistics

import numpy as np
import torch

from bench.benchlib import Recording, parser, seed_all
from course_lib.envs import make_env
from course_lib.replay import ReplayBuffer, transition_spec
from course_lib.sac import SACConfig, SACLearner, deterministic_returns, scale_action

DEFAULTS = SACConfig()
SETTINGS = {
    "textbook": {"hidden": (128, 128), "lr": 1e-3, "alpha_lr": 1e-3, "tau": 0.005},
    "workbook": {"hidden": DEFAULTS.hidden, "lr": DEFAULTS.lr, "alpha_lr": DEFAULTS.alpha_lr,
                 "tau": DEFAULTS.tau},
}


def updates_to_goal(setting: dict, seed: int, goal: float | None = -200.0,
                    max_env_steps: int = 8_000, eval_every: int = 250) -> dict:
    """One single-process run: env step, store, one update; test every `eval_every` updates.
    Returns {"seed", "reached", "updates", "env_steps", "eval_return"}."""
    seed_all(seed)
    rng = np.random.default_rng(seed)
    env = make_env("Pendulum-v1")
    low, high = env.action_space.low, env.action_space.high
    learner = SACLearner(3, 1, tuple(setting["hidden"]), setting["lr"], setting["alpha_lr"],
                         DEFAULTS.init_alpha, DEFAULTS.gamma, setting["tau"], device="cpu")
    replay = ReplayBuffer(max_env_steps, transition_spec((3,), action_shape=(1,),
                                                         action_dtype=np.float32), seed=seed)
    obs, _ = env.reset(seed=seed)
    eval_return = float("nan")
    for step in range(1, max_env_steps + 1):
        if step <= DEFAULTS.start_steps:
            action = rng.uniform(-1.0, 1.0, 1).astype(np.float32)
        else:
            action = learner.actor.act(obs[None])[0]
        next_obs, reward, terminated, truncated, _ = env.step(scale_action(action, low, high))
        replay.add({"obs": obs[None], "action": action[None], "reward": np.float32([reward]),
                    "next_obs": next_obs[None], "terminated": np.array([terminated])})
        obs = next_obs                            # carry the next observation over
        if terminated or truncated:
            obs, _ = env.reset()
        if step < DEFAULTS.learning_starts:
            continue
        learner.update(replay.sample(DEFAULTS.batch_size, rng))
        if learner.updates % eval_every == 0:
            eval_return = float(deterministic_returns(learner.actor, "Pendulum-v1").mean())
            if goal is not None and eval_return >= goal:
                return {"seed": seed, "reached": True, "updates": learner.updates,
                        "env_steps": step, "eval_return": round(eval_return, 1)}
    return {"seed": seed, "reached": False, "updates": learner.updates,
            "env_steps": max_env_steps, "eval_return": round(eval_return, 1)}


def main() -> None:
    cli = parser(__doc__, "sac_settings", "one seed, 600 env steps, no goal")
    cli.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    args = cli.parse_args()
    recording = Recording()
    torch.set_num_threads(1)
    seeds = [0] if args.quick else args.seeds
    budget = {"goal": None, "max_env_steps": 600} if args.quick else {}
    result = {"config": {"seeds": seeds, "quick": args.quick}, "settings": {}}
    for name, setting in SETTINGS.items():
        runs = [updates_to_goal(setting, seed, **budget) for seed in seeds]
        reached = [r["updates"] for r in runs if r["reached"]]
        result["settings"][name] = {"setting": {**setting, "hidden": list(setting["hidden"])},
                                    "runs": runs, "reached": len(reached),
                                    "median_updates": statistics.median(reached)
                                    if len(reached) == len(runs) else None}
        print(f"{name:>9} {setting}: updates to -200 per seed "
              f"{[r['updates'] if r['reached'] else 'missed' for r in runs]}, median "
              f"{result['settings'][name]['median_updates']}", flush=True)
    recording.write(result, args.json)


if __name__ == "__main__":
    main()
