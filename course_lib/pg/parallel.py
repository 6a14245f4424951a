"""Parallel policy gradient on Ray: `EpisodeSampler` actors sample and postprocess on their own
cores, the driver (the learner) updates. `train_sync` waits for every worker each iteration;
`train_async` updates on whichever batch arrives first (`ray.wait`); `train_with_param_server`
lets workers pull weights from a parameter server; `measure_sampling_throughput` times the
sampling alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

import numpy as np
import ray
import torch

from course_lib.envs import make_env
from course_lib.nets import get_weights, set_weights
from course_lib.param_server import ParameterStoreActor, pull_weights
from course_lib.pg.reinforce import (
    PGConfig,
    PolicyNet,
    concat_batches,
    discounted_returns,
    evaluate_confirmed,
    make_policy,
    sample_episodes,
    update_policy,
)
from course_lib.ray_tools import one_line_errors
from course_lib.trainer import derive_seed, evaluation_score


@ray.remote(num_cpus=1)
class EpisodeSampler:
    """An env plus a copy of the policy, in its own process: samples and postprocesses.

    The driver passes the weights as an ObjectRef made once with `ray.put`; Ray resolves it
    before the method runs, so `set_weights`/`sample` see the dict, and every worker reads the
    same object-store copy (zero-copy numpy): a broadcast to N workers is one serialisation.
    """

    def __init__(self, env_id: str, hidden: tuple[int, ...], gamma: float, seed: int):
        torch.set_num_threads(1)          # one core per worker; torch would grab them all
        torch.manual_seed(seed)
        self.env = make_env(env_id)       # flat float32 observations (one-hot if Discrete)
        self.env.reset(seed=seed)
        self.rng = np.random.default_rng(seed)
        self.policy = make_policy(self.env, hidden)
        self.gamma = gamma
        self.version = -1                 # policy version pulled from a parameter server
        self.pull = pull_weights          # how it pulls from a server (`use_pull`)

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        set_weights(self.policy, weights)

    def sample(self, weights: dict[str, np.ndarray] | None, min_steps: int) -> dict:
        """Load `weights` (if given), play >= `min_steps` steps, add the returns "ret"."""
        if weights is not None:
            self.set_weights(weights)
        batch = sample_episodes(self.env, self.policy, min_steps, self.rng)
        batch["ret"] = discounted_returns(batch["reward"], batch["done"], self.gamma)
        return batch

    def use_pull(self, make_pull, ps, index: int) -> None:
        """Pull from `ps` with what `make_pull(ps, index)` builds here (a slot: yours in
        notebook 03), a drop-in for `pull_weights`, from now on."""
        self.pull = make_pull(ps, index)

    def sample_from_server(self, ps, min_steps: int) -> dict:
        """Like `sample`, but the worker fetches its own weights from the ParameterStoreActor `ps`:
        before every episode (so, at the end of the previous one) it pulls "policy" and copies
        the weights only when the version changed. The batch adds "versions", the policy
        version each episode was played with."""
        episodes, versions, steps = [], [], 0
        while steps < min_steps:
            version, weights = self.pull(ps, "policy", self.version)
            if weights is not None:
                self.version = version
                self.set_weights(weights)
            episodes.append(sample_episodes(self.env, self.policy, 1, self.rng))
            versions.append(self.version)
            steps += len(episodes[-1]["reward"])
        batch = concat_batches(episodes)
        batch["ret"] = discounted_returns(batch["reward"], batch["done"], self.gamma)
        batch["versions"] = np.asarray(versions)
        return batch


def make_policy_and_optimizer(cfg: PGConfig) -> tuple[PolicyNet, torch.optim.Optimizer]:
    """The driver's policy (the one that learns) and its optimiser, seeded from cfg.seed."""
    torch.manual_seed(cfg.seed)
    env = make_env(cfg.env_id)
    policy = make_policy(env, cfg.hidden)
    env.close()
    return policy, torch.optim.Adam(policy.parameters(), lr=cfg.lr)


def make_workers(cfg: PGConfig, policy: PolicyNet) -> list:
    """`cfg.num_workers` EpisodeSampler actors (worker i seeded by `derive_seed(cfg.seed,
    "worker", i)`, the one seeding rule of every trainer) holding `policy`'s weights.

    Returns once every worker is up, so training clocks do not count process start-up.
    Fails fast when Ray has fewer CPUs than workers, instead of waiting forever for actors
    that cannot be placed.
    """
    cpus = ray.cluster_resources().get("CPU", 0)
    if cfg.num_workers > cpus:
        raise ValueError(f"num_workers={cfg.num_workers} needs {cfg.num_workers} CPUs but the "
                         f"Ray cluster has {cpus:g}; lower num_workers or start Ray with more.")
    workers = []
    try:
        workers += [EpisodeSampler.remote(cfg.env_id, cfg.hidden, cfg.gamma,
                                          derive_seed(cfg.seed, "worker", i))
                    for i in range(cfg.num_workers)]
        weights_ref = ray.put(get_weights(policy))
        ray.get([w.set_weights.remote(weights_ref) for w in workers])
    except BaseException:                 # also Ctrl-C while they start: none left behind
        for w in workers:
            ray.kill(w)
        raise
    return workers


@contextmanager
def episode_samplers(cfg: PGConfig, policy: PolicyNet):
    """`make_workers(cfg, policy)` for the length of a `with` block, killed at its end however
    it ends."""
    workers = make_workers(cfg, policy)
    try:
        yield workers
    finally:
        for w in workers:
            ray.kill(w)


def _record(history: list[dict], start: float, batch: dict, loss: float, policy: PolicyNet,
            cfg: PGConfig, progress: Callable[[dict], None] | None, **extra) -> bool:
    """Append the row of the update just made on `batch` (a greedy evaluation every
    `cfg.eval_every` updates, fresh episodes each time, confirmed as in every trainer: see
    `evaluate_confirmed`), with any `extra` columns, and hand it to `progress`. True once the
    evaluation's score (`trainer.evaluation_score`: the confirming episodes on their own)
    reaches `cfg.target_return`: the caller stops."""
    iteration = len(history) + 1
    evaluations = history[-1]["evaluations"] if history else 0
    returns = []
    if iteration % cfg.eval_every == 0 or iteration == cfg.max_iterations:
        returns, evaluations = evaluate_confirmed(policy, cfg, evaluations)
    eval_return, scored = evaluation_score(cfg, returns) if returns else (float("nan"), 0)
    row = {
        "iteration": iteration,
        "time_s": time.perf_counter() - start,
        "env_steps": (history[-1]["env_steps"] if history else 0) + len(batch["reward"]),
        "episodes": len(batch["ep_return"]),
        "mean_return": float(batch["ep_return"].mean()),
        "loss": loss,
        "eval_return": eval_return,     # NaN when this iteration was not evaluated
        "eval_episodes": scored,        # 0, eval_episodes, or confirm_episodes (they decide)
        "evaluations": evaluations,     # evaluations so far (each one's seeds are new)
        **extra,
    }
    history.append(row)
    if progress:
        progress(row)
    return eval_return >= cfg.target_return


def train_sync(cfg: PGConfig, progress: Callable[[dict], None] | None = None
               ) -> tuple[PolicyNet, list[dict]]:
    """Synchronous parallel PG: broadcast weights, gather every worker's batch, one update.

    Each iteration: `ray.put` the weights once, every worker samples with them, the driver
    concatenates the batches and takes one gradient step. Stops when the greedy evaluation
    reaches `cfg.target_return` or after `cfg.max_iterations`. Needs Ray running.
    Returns the trained policy and the history (one dict per update; `progress` gets each).
    """
    policy, optimizer = make_policy_and_optimizer(cfg)
    history = []
    with episode_samplers(cfg, policy) as workers:
        start = time.perf_counter()
        for _ in range(cfg.max_iterations):
            weights_ref = ray.put(get_weights(policy))              # one copy for all workers
            batch = concat_batches(ray.get(
                [w.sample.remote(weights_ref, cfg.steps_per_worker) for w in workers]))
            loss = update_policy(policy, optimizer, batch, cfg)
            if _record(history, start, batch, loss, policy, cfg, progress):
                break
    return policy, history


def first_finished(in_flight: dict) -> tuple[Any, dict]:
    """The `sample` call that finishes first (`ray.wait`, not the order they were sent):
    (its worker, its batch). The call leaves `in_flight`."""
    [ready], _ = ray.wait(list(in_flight), num_returns=1)
    return in_flight.pop(ready), ray.get(ready)


def train_async(cfg: PGConfig, progress: Callable[[dict], None] | None = None
                ) -> tuple[PolicyNet, list[dict]]:
    """Asynchronous parallel PG: update on whichever batch is ready first.

    Every worker always has one `sample` call in flight. `ray.wait` returns the first batch
    to finish; the driver updates on it and gives that worker the new weights, while the
    other workers keep sampling with weights that are now one or more updates old (the price
    of never waiting: slightly off-policy gradients). One iteration = one update on one
    worker's batch. Same stopping rule, return value and `progress` as `train_sync`.
    """
    policy, optimizer = make_policy_and_optimizer(cfg)
    history = []
    with episode_samplers(cfg, policy) as workers:
        start = time.perf_counter()
        weights_ref = ray.put(get_weights(policy))
        in_flight = {w.sample.remote(weights_ref, cfg.steps_per_worker): w for w in workers}
        for _ in range(cfg.max_iterations):
            worker, batch = first_finished(in_flight)
            loss = update_policy(policy, optimizer, batch, cfg)
            weights_ref = ray.put(get_weights(policy))
            in_flight[worker.sample.remote(weights_ref, cfg.steps_per_worker)] = worker
            if _record(history, start, batch, loss, policy, cfg, progress):
                break
    return policy, history

# ---------------------------------------------------------------------------------------------
# Measuring: sampling throughput against the number of workers
# ---------------------------------------------------------------------------------------------

def measure_sampling_throughput(cfg: PGConfig, worker_counts: list[int],
                                steps_per_worker: int = 4000, rounds: int = 3) -> list[float]:
    """Env steps per second collected by 1, 2, ... workers sampling in parallel.

    Each count gets fresh workers and a short warm-up (start-up is not timed), then `rounds`
    timed rounds in which every worker samples `steps_per_worker` steps with the same
    broadcast weights; the median round counts (other programs on the machine add noise).
    """
    policy, _ = make_policy_and_optimizer(cfg)
    weights_ref = ray.put(get_weights(policy))
    rates = []
    for n in worker_counts:
        with episode_samplers(cfg.updated({"num_workers": n}), policy) as workers:
            ray.get([w.sample.remote(None, 10) for w in workers])          # warm up
            per_round = []
            for _ in range(rounds):
                start = time.perf_counter()
                batches = ray.get([w.sample.remote(weights_ref, steps_per_worker)
                                   for w in workers])
                steps = sum(len(b["reward"]) for b in batches)
                per_round.append(steps / (time.perf_counter() - start))
        rates.append(float(np.median(per_round)))
    return rates

# ---------------------------------------------------------------------------------------------
# The parameter server as RL uses it (notebook 03)
# ---------------------------------------------------------------------------------------------

def train_with_param_server(cfg: PGConfig, ps=None, progress: Callable[[dict], None] | None = None,
                            make_pull=None) -> tuple[PolicyNet, list[dict]]:
    """Asynchronous PG where the weights travel through a ParameterStoreActor `ps` (a new one,
    killed at the end, if None).

    The learner (this driver) pushes the policy after every update; workers pull it themselves
    at episode boundaries. Each history row adds "version" (the newest version on the server)
    and "policy_lag" (how many versions behind the batch's episodes were, on average).
    `make_pull(ps, index)` builds each worker's pull (a slot: yours in notebook 03), a drop-in
    for `pull_weights`.
    """
    own_ps = ps is None
    ps = ParameterStoreActor.remote() if own_ps else ps
    policy, optimizer = make_policy_and_optimizer(cfg)
    history = []
    try:
        with one_line_errors(), episode_samplers(cfg, policy) as workers:
            version = ray.get(ps.push.remote("policy", get_weights(policy)))
            if make_pull is not None:
                ray.get([w.use_pull.remote(make_pull, ps, i) for i, w in enumerate(workers)])
            start = time.perf_counter()
            in_flight = {w.sample_from_server.remote(ps, cfg.steps_per_worker): w
                         for w in workers}
            for _ in range(cfg.max_iterations):
                worker, batch = first_finished(in_flight)
                loss = update_policy(policy, optimizer, batch, cfg)
                version = ray.get(ps.push.remote("policy", get_weights(policy)))
                in_flight[worker.sample_from_server.remote(ps, cfg.steps_per_worker)] = worker
                lag = float(np.mean(version - 1 - batch["versions"]))
                if _record(history, start, batch, loss, policy, cfg, progress, version=version,
                           policy_lag=lag):
                    break
    finally:
        if own_ps:
            ray.kill(ps)
    return policy, history
