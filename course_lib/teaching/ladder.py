"""The latency ladder, live: env steps per second against env latency, beside Amdahl's bound.

An env whose step waits L ms on something remote (a simulator on another machine, a robot, a
game server; `envs.EnvBatch` stands in for it with a sleep) is where going distributed pays on a
small machine. `measure_ladder` measures, at each latency, three ways to act eps-greedily with a
Q-network (acting only, no learning, so a point takes seconds, not minutes):

| variant   | what runs                                             | best case, env steps/s    |
| --------- | ----------------------------------------------------- | ------------------------- |
| `one`     | this process steps one env, a forward pass per step   | 1 / (t + L)               |
| `batch`   | this process steps N envs as one `EnvBatch`           | N / (N t + L)             |
| `workers` | N actors of k envs: `Stepper`s (k = 1) or Ape-X        | min(N k / (k t + L),      |
|           | explorers (k = `ApexConfig.num_envs`)                 |     cores / t)            |

t is the variant's own time per env step at 0 ms, all of it CPU work, measured first
(`workers`: one actor alone, timed inside it, so the bound leaves out Ray's cost per call).
Waits overlap, CPU work does not: a cheap env leaves nothing to win; a slow one gains up to N
times, until the cores are busy. `bench/scaling.py` asks the same question to CartPole 475,
learning included; this is its version of a few seconds for notebooks 02 and 05.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import numpy as np
import ray
import torch

from course_lib.config import Config
from course_lib.dqn.learner import DuelingQNet, epsilon_greedy_batch
from course_lib.envs import EnvBatch, env_dims
from course_lib.ray_tools import init_ray
from course_lib.sizing import amdahl_ms
from course_lib.trainer import TrainerConfig, derive_seed

VARIANTS = ("one", "batch", "workers")


@dataclass
class LadderConfig(Config):
    """What `measure_ladder` measures, and for how long."""

    QUICK: ClassVar[dict] = {"latencies_ms": (0.0, 2.0, 5.0), "seconds": 0.3}
    LIMITS: ClassVar[dict[str, str]] = {"latencies_ms": "[0, inf)", "num_workers": ">= 1",
                                        "seconds": "> 0", "epsilon": "[0, 1]"}
    env_id: str = "CartPole-v1"       # the env every variant steps
    latencies_ms: tuple[float, ...] = (0.0, 0.5, 2.0, 5.0)  # the env step latencies measured
    num_workers: int = 4              # N: actors in `workers`, envs of the batch in `batch`
    explorers: bool = False           # `workers`: Ape-X's explorers (True) or plain Steppers
    seconds: float = 2.0              # about this long per measured point
    epsilon: float = 0.1              # exploration rate of `one`, `batch` and the Steppers
    seed: int = 0                     # seeds the envs, the networks and the exploration


def amdahl_bound(variant: str, latency_ms: float, step_ms: float, n: int, cores: int,
                 envs_per_worker: int = 1) -> float:
    """The best case in env steps/s: the waits overlap, the CPU work `step_ms` per env step
    does not (see the module's table; `envs_per_worker` is k). Acting only, so no learner:
    `course_lib.sizing.amdahl_ms`, the workbook's one bound, with no update cost."""
    if variant == "one":
        return 1000 / amdahl_ms(step_ms, latency_ms)
    if variant == "batch":
        return 1000 / amdahl_ms(step_ms, latency_ms, envs=n)
    if variant == "workers":
        return 1000 / amdahl_ms(step_ms, latency_ms, envs=envs_per_worker, explorers=n,
                                cores=cores)
    raise ValueError(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")


class Acting:
    """`num_envs` envs stepped as one `EnvBatch` by an eps-greedy Q-network, one forward pass
    per batch step. `run` answers like `roles.Worker.run`'s, so one timing function serves
    this, its actor form (`Stepper`) and Ape-X's explorers."""

    def __init__(self, env_id: str, num_envs: int, epsilon: float, seed: int):
        torch.set_num_threads(1)          # tiny networks: one thread is fastest
        torch.manual_seed(seed)
        self.envs = EnvBatch(env_id, num_envs, 0.0, seed)
        self.n_actions = env_dims(self.envs.envs[0])[1]
        self.net = DuelingQNet(*env_dims(self.envs.envs[0]), TrainerConfig.hidden)
        self.epsilon, self.rng = epsilon, np.random.default_rng(seed)

    def run(self, steps: int) -> SimpleNamespace:
        """Play at least `steps` env steps."""
        played = 0
        while played < steps:
            self.envs.step(epsilon_greedy_batch(self.net, self.envs.obs, self.epsilon, self.rng,
                                                self.n_actions))
            played += len(self.envs.obs)
        return SimpleNamespace(env_steps=played)


Stepper = ray.remote(Acting)   # the same, in an actor of its own


def _timed_run(worker, latency_ms: float, steps: int) -> tuple[int, float]:
    """(env steps played, seconds) of `worker.run(steps)`, its envs waiting `latency_ms` per
    step from now on. Runs where `worker` is: an `Acting` here, or an actor (`__ray_call__`)."""
    worker.envs.seconds = latency_ms / 1000
    start = time.perf_counter()
    played = worker.run(steps).env_steps
    return played, time.perf_counter() - start


def envs_per_worker(cfg: LadderConfig) -> int:
    """k: the envs each actor of `workers` steps (an Ape-X explorer's `num_envs`, else 1)."""
    if cfg.explorers:
        from course_lib.apex import ApexConfig

        return ApexConfig().num_envs
    return 1


@contextmanager
def started_workers(cfg: LadderConfig) -> Iterator[list]:
    """`cfg.num_workers` actors, killed on the way out: Steppers, or the explorers of a whole
    Ape-X system, which send their batches and pull weights as in training (its learner gets
    no `train` calls: acting is all that is measured)."""
    if cfg.explorers:
        from course_lib.apex import ApexConfig, ApexTrainer

        trainer = ApexTrainer(ApexConfig().updated(
            {"env_id": cfg.env_id, "num_workers": cfg.num_workers, "seed": cfg.seed}))
        try:
            yield trainer.workers
        finally:
            trainer.close()
        return
    seeds = [derive_seed(cfg.seed, "stepper", i) for i in range(cfg.num_workers)]
    actors = [Stepper.options(num_cpus=0.25).remote(cfg.env_id, 1, cfg.epsilon, s) for s in seeds]
    try:
        yield actors
    finally:
        for actor in actors:
            ray.kill(actor)


@dataclass
class Ladder:
    """What `measure_ladder` measured: per variant, env steps/s and their bound, one per
    latency, and `step_ms`, the CPU time per env step each bound is computed from."""

    cfg: LadderConfig
    cores: int
    step_ms: dict[str, float]
    measured: dict[str, list[float]]
    bounds: dict[str, list[float]]
    envs_per_worker: int = 1          # k: envs each actor of `workers` steps as one batch

    @property
    def labels(self) -> dict[str, str]:
        n, k = self.cfg.num_workers, self.envs_per_worker
        workers = f"{n} Ape-X explorers x {k} envs" if self.cfg.explorers else f"{n} actors"
        return {"one": "1 env, 1 process", "batch": f"{n} envs batched, 1 process",
                "workers": workers}

    def table(self) -> str:
        """Per latency and variant: env steps/s, the bound, and the times `one`'s rate."""
        lines = ["CPU time per env step, at 0 ms: " + "; ".join(
                 f"{self.labels[v]} {self.step_ms[v]:.3f} ms" for v in VARIANTS),
                 "env steps/s (Amdahl's bound) and the times 1 env in 1 process, per latency:",
                 f"{'latency':>8} | " + " | ".join(f"{self.labels[v]:>28}" for v in VARIANTS)]
        for i, latency in enumerate(self.cfg.latencies_ms):
            one = self.measured["one"][i]
            cells = [f"{self.measured[v][i]:>7,.0f}/s ({self.bounds[v][i]:>7,.0f}) "
                     f"{self.measured[v][i] / one:4.1f}x" for v in VARIANTS]
            lines.append(f"{latency:>5g} ms | " + " | ".join(f"{c:>28}" for c in cells))
        return "\n".join(lines)

    def plot(self, ax=None):
        from course_lib.viz.plotting import plot_ladder

        return plot_ladder(self.cfg.latencies_ms,
                           {self.labels[v]: self.measured[v] for v in VARIANTS},
                           {self.labels[v]: self.bounds[v] for v in VARIANTS},
                           title=f"acting throughput on {self.cores} cores", ax=ax)


def measure_ladder(cfg: LadderConfig | None = None) -> Ladder:
    """Measure every variant at every latency of `cfg` (the quick or full preset by default);
    starts Ray if it is not running."""
    cfg = cfg or LadderConfig.preset()
    cfg.check()
    n, threads = cfg.num_workers, torch.get_num_threads()
    ladder = Ladder(cfg, os.cpu_count() or 1, {}, {}, {}, envs_per_worker(cfg))
    try:
        for variant, num_envs in (("one", 1), ("batch", n)):
            here = partial(_timed_run, Acting(cfg.env_id, num_envs, cfg.epsilon, cfg.seed))
            _measure(ladder, variant, here, here)
    finally:
        torch.set_num_threads(threads)    # as this process had it (Acting sets one)
    init_ray()
    with started_workers(cfg) as workers:
        ray.get([w.__ray_call__.remote(_timed_run, 0.0, 20) for w in workers])    # warm-up

        def alone(latency_ms: float, steps: int) -> tuple[int, float]:
            return ray.get(workers[0].__ray_call__.remote(_timed_run, latency_ms, steps))

        def together(latency_ms: float, steps: int) -> tuple[int, float]:
            start = time.perf_counter()
            runs = ray.get([w.__ray_call__.remote(_timed_run, latency_ms, math.ceil(steps / n))
                            for w in workers])
            return sum(played for played, _ in runs), time.perf_counter() - start

        _measure(ladder, "workers", alone, together)
    return ladder


def _measure(ladder: Ladder, variant: str, alone, run) -> None:
    """Fill in `variant` of `ladder` from `alone` (one copy of the variant) and `run` (the
    variant), both mapping (latency_ms, steps) to (steps played, seconds): its env steps/s at
    each latency, the median of three runs that together last about `cfg.seconds` (as many
    steps as the bound says fit), and its time per env step, the fastest of every run of
    `alone` at 0 ms (the bound is a best case; a busy machine only slows a run down).

    Each run at 0 ms is sized from the fastest rate seen so far, not from the warm-up alone:
    an explorer's run ends by waiting for its last batch to be stored (a Ray round trip), so
    a warm-up slowed by a busy moment would size every run so short that this fixed wait
    passes for CPU time per step, and the bound would come out below what the explorers do."""
    cfg, cores = ladder.cfg, ladder.cores
    zero = [alone(0.0, 100)]                                # warm-up, and a first guess
    for _ in range(3):
        fastest = max(played / seconds for played, seconds in zero)
        zero.append(alone(0.0, math.ceil(cfg.seconds / 3 * fastest)))
    zero = zero[1:]                                         # the warm-up is not a measurement
    guess_ms = min(1000 * s / p for p, s in zero)
    k = ladder.envs_per_worker if variant == "workers" else 1
    points = [[run(latency, math.ceil(cfg.seconds / 3 * amdahl_bound(
                   variant, latency, guess_ms, cfg.num_workers, cores, k))) for _ in range(3)]
              for latency in cfg.latencies_ms]
    if run is alone:                                        # its 0 ms points are runs of it too
        zero += [r for latency, runs in zip(cfg.latencies_ms, points, strict=True)
                 if latency == 0 for r in runs]
    step_ms = ladder.step_ms[variant] = min(1000 * s / p for p, s in zero)
    ladder.bounds[variant] = [amdahl_bound(variant, latency, step_ms, cfg.num_workers, cores, k)
                              for latency in cfg.latencies_ms]
    ladder.measured[variant] = [float(np.median([p / s for p, s in runs])) for runs in points]


# ---------------------------------------------------------------------------------------------
# Notebook 05's capstone: your Ape-X on a rung of the ladder, predicted, run, kept, compared
# ---------------------------------------------------------------------------------------------

#: where the capstone keeps the attendee's tries, in the notebook's folder (their workshop/)
TRIES = Path("results") / "capstone_tries.json"
CHOICES = ("num_workers", "num_envs", "send_every", "replay_ratio")


def committed_rung(latency_ms: float) -> dict[str, dict]:
    """{variant: its row} of the committed ladder (bench/results/scaling.json) at `latency_ms`;
    {} with a printed line when the result is missing or has no such rung."""
    from course_lib.teaching.bench_results import load

    try:
        rows = [r for r in load("scaling")["summary"] if r["latency_ms"] == latency_ms]
    except FileNotFoundError as err:
        print(err)
        return {}
    if not rows:
        print(f"bench/results/scaling.json has no rung at {latency_ms:g} ms")
    return {r["variant"]: r for r in rows}


def predict_try(cfg, costs, cores: int) -> dict:
    """The Amdahl bound of an Ape-X config `cfg` (`sizing.amdahl_ms`, with the learner's work
    per transition) from measured `costs` (`sizing.measure_costs`), the time it gives for the
    env steps the committed ladder's fastest Ape-X needed at that latency, and the explorer
    count the model picks for the same envs and ratio (`sizing.choose_explorers`)."""
    from course_lib import sizing

    u = sizing.updates_per_transition(cfg.replay_ratio, cfg.batch_size)
    ms = amdahl_ms(costs.act_ms, costs.latency_ms, u * (costs.update_ms + costs.replay_ms),
                   cfg.num_envs, cfg.num_workers, cores)
    apexes = [r for v, r in committed_rung(cfg.env_latency_ms).items() if v.startswith("apex")]
    steps = min(apexes, key=lambda r: r["median_seconds"])["median_env_steps"] if apexes else None
    pick = sizing.choose_explorers(costs, cfg.replay_ratio, cfg.batch_size, cores, cfg.num_envs)
    said = (f"bound: {ms:.3f} ms per transition, {1000 / ms:,.0f} transitions/s at most ("
            f"c_x {costs.act_ms:.3f} ms, L {costs.latency_ms:.2f} ms, c_u + c_r "
            f"{costs.update_ms + costs.replay_ms:.2f} ms, u {u:.3f}, {cores} cores)")
    if steps:
        said += (f"\nfor the {steps:,.0f} env steps the ladder's fastest Ape-X needed at "
                 f"{cfg.env_latency_ms:g} ms: at least {steps * ms / 1000:.1f} s")
    said += f"\nthe model's count for {cfg.num_envs} envs each: {pick.reason}"
    return {"bound_ms": ms, "predicted_s": steps * ms / 1000 if steps else None,
            "model_count": pick.count, "said": said}


def record_try(cfg, result, prediction: dict, path: Path = TRIES) -> list[dict]:
    """Append one try (its choices, the prediction, how the run ended) to `path` (JSON) and
    return every try kept there."""
    import json

    tries = json.loads(path.read_text()) if path.exists() else []
    last = result.last
    tries.append({**{k: getattr(cfg, k) for k in CHOICES}, "try": len(tries) + 1,
                  "latency_ms": cfg.env_latency_ms, "quick": cfg.target_return is None,
                  "predicted_s": prediction["predicted_s"], "reached": result.reached
                  and cfg.target_return is not None, "seconds": last["time_s"],
                  "env_steps": last["env_steps"]})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(tries, indent=1))
    return tries


def leaderboard(tries: list[dict], ax=None) -> str:
    """Your tries, fastest to the goal first, beside the committed ladder at their latency:
    the table (returned) and its bars (drawn on `ax`)."""
    from course_lib.viz.plotting import plot_leaderboard

    ranked = sorted(tries, key=lambda t: (not t["reached"], t["seconds"]))
    lines = [f"{'try':>3} {'explorers':>9} {'envs':>4} {'send':>4} {'ratio':>5} "
             f"{'bound (s)':>9} {'seconds':>8} {'env steps':>9}  reached 475"]
    for t in ranked:
        bound = f"{t['predicted_s']:.1f}" if t["predicted_s"] else "-"
        lines.append(f"{t['try']:>3} {t['num_workers']:>9} {t['num_envs']:>4} "
                     f"{t['send_every']:>4} {t['replay_ratio']:>5g} {bound:>9} "
                     f"{t['seconds']:>8.1f} {t['env_steps']:>9,}  "
                     + ("yes" if t["reached"] else "quick run" if t["quick"] else "no"))
    rung = committed_rung(tries[-1]["latency_ms"]) if tries else {}
    # a median whose runs stopped at the ladder's cap is a lower bound: "≥", as RESULTS.md
    at_least = {v: "" if r.get("median_seconds_exact", True) else "≥" for v, r in rung.items()}
    if rung:
        lines.append("the committed ladder at this latency (medians of its seeds; ≥: a lower "
                     "bound, its runs stopped at the cap): " + ", ".join(
                         f"{v} {at_least[v]}{r['median_seconds']:.0f} s" for v, r in sorted(
                             rung.items(), key=lambda item: item[1]["median_seconds"])))
    plot_leaderboard({f"try {t['try']}": (t["seconds"], t["reached"], t["predicted_s"])
                      for t in ranked},
                     {f"ladder {v}{' ' + at_least[v] if at_least[v] else ''}": r["median_seconds"]
                      for v, r in rung.items()
                      if v in ("dqn", min(rung, key=lambda k: rung[k]["median_seconds"]))},
                     ax=ax)
    return "\n".join(lines)
