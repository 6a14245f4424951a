"""Importance-weight normalisation of prioritized replay: which variant learns CartPole fastest?

    python -m bench.is_weights [--quick] [--seeds 0 1 2 3 4 5] [--json PATH]

The single-process DQN (`course_lib.dqn.DQNTrainer.train`, full-mode `DQNConfig()`: dueling, 3-step
double-Q, prioritized replay with alpha 0.6 and beta 0.4) trains on CartPole-v1 until the greedy
10-episode evaluation reaches 475, once per seed and variant. Only the replay buffer changes:

| variant             | eps  | weights divided by                                       |
| ------------------- | ---- | -------------------------------------------------------- |
| buffer-min eps=1e-6 | 1e-6 | the largest weight in the buffer (OpenAI Baselines)      |
| buffer-min eps=1e-3 | 1e-3 | the same                                                 |
| buffer-min eps=1e-2 | 1e-2 | the same                                                 |
| batch-max eps=1e-6  | 1e-6 | the largest weight in the sampled batch (pfrl, Dopamine) |

The library's buffer divides by the batch's largest weight; the buffer-wide variant lives here
(`buffer_class`), finding the smallest stored priority with a pass over every leaf where
Baselines keeps a min tree. The score is env steps to the goal (evaluations every 1,000 steps),
which neither the machine's load nor that slower minimum distorts; seconds are printed too but
compare only the batch variant's runs with each other, on a quiet machine. "mean w"
is the average importance weight over every sampled batch: with the buffer-wide minimum and a
tiny eps, one near-zero priority makes every other weight small, which shrinks the step size.
The spread between seeds is large (one run passed 475 at its first evaluation after learning
started, 2,000 env steps), hence six seeds by default. Writes bench/results/is_weights.json
unless --json says otherwise. `--quick` is a smoke run (2,000 env steps, no goal, one seed).
"""

from __future__ import annotations

import time

import numpy as np

from bench.benchlib import Recording, parser
from course_lib.dqn import DQNConfig, DQNTrainer, trainer as dqn_trainer
from course_lib.replay import PrioritizedReplayBuffer

VARIANTS = {
    "buffer-min eps=1e-6": {"eps": 1e-6, "weight_norm": "buffer"},
    "buffer-min eps=1e-3": {"eps": 1e-3, "weight_norm": "buffer"},
    "buffer-min eps=1e-2": {"eps": 1e-2, "weight_norm": "buffer"},
    "batch-max eps=1e-6": {"eps": 1e-6, "weight_norm": "batch"},
}
GOAL = 475.0


def buffer_class(eps: float, weight_norm: str):
    """A PrioritizedReplayBuffer with this eps that also sums its weights; weight_norm "buffer"
    divides by the largest weight of every stored transition (the smallest stored q) instead
    of the batch's."""

    class Variant(PrioritizedReplayBuffer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "eps": eps})
            self.weight_sum, self.weight_count = 0.0, 0

        def sample(self, batch_size: int, beta: float = 0.4, rng=None):
            batch = super().sample(batch_size, beta, rng)
            if weight_norm == "buffer":            # (q_i / the smallest stored q)^-beta
                q = self.tree.leaves(batch["indices"] % self.capacity)
                stored_min = self.tree.leaves(np.arange(len(self))).min()
                batch["weights"] = ((q / stored_min) ** -beta).astype(np.float32)
            self.weight_sum += float(batch["weights"].sum())
            self.weight_count += len(batch["weights"])
            return batch

    return Variant


def run_variant(name: str, seed: int, config: DQNConfig) -> dict:
    """One DQN run with the variant's buffer (swapped in where DQNTrainer looks it up)."""
    if not hasattr(dqn_trainer, "PrioritizedReplayBuffer"):
        raise RuntimeError("course_lib.dqn.trainer no longer imports PrioritizedReplayBuffer by "
                           "name: update run_variant to the trainer's new way of making its buffer")
    built = []

    def make_buffer(*args, **kwargs):
        built.append(buffer_class(**VARIANTS[name])(*args, **kwargs))
        return built[-1]

    original = dqn_trainer.PrioritizedReplayBuffer
    dqn_trainer.PrioritizedReplayBuffer = make_buffer
    try:
        start = time.perf_counter()
        result = DQNTrainer.train(config.updated({"seed": seed}))
        seconds = time.perf_counter() - start
    finally:
        dqn_trainer.PrioritizedReplayBuffer = original
    if len(built) != 1:
        raise RuntimeError("expected DQNTrainer.train to build one replay buffer, it built "
                           f"{len(built)}")
    return {"variant": name, "seed": seed, "reached": bool(result.reached),
            "env_steps": steps_to_goal(result.history, config.target_return),
            "seconds": seconds,
            "mean_weight": built[0].weight_sum / max(built[0].weight_count, 1)}


def steps_to_goal(history: list[dict], goal: float | None) -> int:
    """Env steps at the first evaluation >= goal; the last row's steps if never (or no goal)."""
    for row in history:
        if goal is not None and row["eval_return"] >= goal:
            return int(row["env_steps"])
    return int(history[-1]["env_steps"])


def summarise(runs: list[dict]) -> list[dict]:
    """One row per variant: seeds reached, median env steps (unreached runs count at their
    budget, so the median is a lower bound when a seed missed), median seconds, mean weight."""
    rows = []
    for name in dict.fromkeys(run["variant"] for run in runs):
        mine = [run for run in runs if run["variant"] == name]
        rows.append({"variant": name, "seeds": len(mine),
                     "reached": sum(run["reached"] for run in mine),
                     "median_env_steps": float(np.median([run["env_steps"] for run in mine])),
                     "env_steps": [run["env_steps"] for run in mine],
                     "median_s": float(np.median([run["seconds"] for run in mine])),
                     "mean_weight": float(np.mean([run["mean_weight"] for run in mine]))})
    return rows


def print_table(rows: list[dict]) -> None:
    print(f"{'variant':<22}{'reached':>9}{'median steps':>14}  {'env steps per seed':<26}"
          f"{'median s':>9}{'mean w':>8}")
    for row in rows:
        per_seed = ", ".join(f"{s:,}" for s in row["env_steps"])
        print(f"{row['variant']:<22}{row['reached']:>5}/{row['seeds']:<3}"
              f"{row['median_env_steps']:>14,.0f}  {per_seed:<26}{row['median_s']:>9.1f}"
              f"{row['mean_weight']:>8.3f}")


def main(argv=None) -> dict:
    cli = parser(__doc__, "is_weights", "smoke run: 2,000 steps, one seed")
    cli.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    cli.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    args = cli.parse_args(argv)
    if args.quick:
        config = DQNConfig(max_env_steps=2_000, target_return=None, learning_starts=500,
                           steps_per_iteration=500, eval_episodes=2)
        seeds = args.seeds[:1]
    else:
        config, seeds = DQNConfig(max_time_s=1_800.0), args.seeds
    recording = Recording()
    runs = []
    for seed in seeds:               # seed-major: a slow spell of load hits every variant
        for name in args.variants:
            runs.append(run_variant(name, seed, config))
            print(f"  {name:<22} seed {seed}: reached={runs[-1]['reached']} "
                  f"env_steps={runs[-1]['env_steps']:,} ({runs[-1]['seconds']:.0f} s)", flush=True)
    rows = summarise(runs)
    print_table(rows)
    result = {"config": {"quick": args.quick, "goal": config.target_return, "seeds": seeds,
                         "dqn": config.to_dict()},
              "summary": rows, "runs": runs}
    recording.write(result, args.json)
    return result


if __name__ == "__main__":
    main()
