"""Data-parallel training, synchronous and asynchronous, on a small classifier (notebook 03).

No downloads: the data is synthetic, `make_blobs` draws Gaussian clusters. Each `DataWorker`
actor holds one shard and turns weights into a gradient on a minibatch of it.

Synchronous (all-reduce style): every step, the driver broadcasts the weights once (`ray.put`),
waits for all workers' gradients, averages them and takes one SGD step:

    w <- w - lr * (1/N) * sum_i g_i(w)

Asynchronous (parameter server): the weights live in a `ParameterStoreActor`; whichever worker
finishes first has its gradient applied at once and gets the newest weights back:

    w <- w - lr * g_i(w_{v_i})        with staleness = (server version now) - v_i

A stale gradient was computed on weights that have since moved; staleness is the price of
never waiting for the slowest worker.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import ray
import torch
from torch import nn

from course_lib.config import Config
from course_lib.nets import get_weights, mlp, set_weights
from course_lib.param_server import CachedWeights, ParameterStoreActor, pull_weights
from course_lib.ray_tools import get_result, one_line_errors
from course_lib.trainer import derive_seed


@dataclass
class DataParallelConfig(Config):
    QUICK: ClassVar[dict] = {"steps": 40, "n_samples": 4_000, "eval_every": 10}
    num_workers: int = 2          # DataWorker actors, one shard each
    n_samples: int = 40_000       # training points (split across workers) + a test set of 1/4
    n_features: int = 16
    n_classes: int = 4
    hidden: int = 64
    batch_size: int = 256         # per worker, per gradient
    lr: float = 0.1               # plain SGD, the same rule on the driver and on the server
    steps: int = 200              # synchronous steps; asynchronous runs steps * num_workers
    eval_every: int = 10          # evaluate test accuracy every N updates
    seed: int = 0                 # seeds the data, the model and the workers' minibatches


def make_blobs(n: int, n_features: int, n_classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n points from `n_classes` Gaussian clusters with overlapping tails: (x (n, f), y (n,))."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(0.0, 0.5, (n_classes, n_features))
    y = rng.integers(0, n_classes, n)
    x = centers[y] + rng.normal(0.0, 1.0, (n, n_features))
    return x.astype(np.float32), y.astype(np.int64)


def train_test_split(cfg: DataParallelConfig):
    """The same data for every process: cfg.n_samples to train on, a quarter as many to test."""
    x, y = make_blobs(cfg.n_samples * 5 // 4, cfg.n_features, cfg.n_classes, cfg.seed)
    return (x[:cfg.n_samples], y[:cfg.n_samples]), (x[cfg.n_samples:], y[cfg.n_samples:])


def make_model(cfg: DataParallelConfig) -> nn.Module:
    torch.manual_seed(cfg.seed)
    return mlp([cfg.n_features, cfg.hidden, cfg.n_classes], activation=nn.ReLU)


def accuracy(model: nn.Module, x: np.ndarray, y: np.ndarray) -> float:
    with torch.no_grad():
        return float((model(torch.from_numpy(x)).argmax(1).numpy() == y).mean())


@ray.remote(num_cpus=1)
class DataWorker:
    """Holds one shard of the data; returns gradients of the cross-entropy loss on it."""

    def __init__(self, cfg: DataParallelConfig, shard: int):
        torch.set_num_threads(1)
        (x, y), _ = train_test_split(cfg)
        self.x, self.y = x[shard::cfg.num_workers], y[shard::cfg.num_workers]
        self.model = make_model(cfg)
        self.cfg, self.rng = cfg, np.random.default_rng(derive_seed(cfg.seed, "shard", shard))
        self.shard = shard

    def shard_size(self) -> int:
        return len(self.x)

    def compute_gradients(self, weights: dict, version: int = 0):
        """(gradients {name: array}, the version they were computed on, the minibatch loss)."""
        set_weights(self.model, weights)
        idx = self.rng.integers(0, len(self.x), self.cfg.batch_size)
        loss = nn.functional.cross_entropy(self.model(torch.from_numpy(self.x[idx])),
                                           torch.from_numpy(self.y[idx]))
        self.model.zero_grad()
        loss.backward()
        grads = {name: p.grad.numpy().copy() for name, p in self.model.named_parameters()}
        return grads, version, float(loss)

    def run_steps(self, ps, steps: int, make_step, lr: float) -> list[int]:
        """Asynchronous training driven by this worker: `steps` times the step that
        `make_step(ps, compute_gradients, lr)` builds here (pull the newest weights, compute a
        gradient, push it to `ps`); returns each gradient's staleness."""
        step = make_step(ps, lambda weights: self.compute_gradients(weights)[0], lr)
        return [step() for _ in range(steps)]


def sgd_step(weights: dict, grads: dict, lr: float) -> dict:
    """w <- w - lr * g, for every parameter that has a gradient."""
    return {name: w - lr * grads[name] if name in grads else w for name, w in weights.items()}


@contextmanager
def data_workers(cfg: DataParallelConfig):
    """`cfg.num_workers` DataWorker actors, all up, for the length of a `with` block; killed
    at its end however it ends (an error, Ctrl-C): in a notebook, a failed run's traceback
    would otherwise keep them, and their CPUs, alive, and the next run would wait for CPUs."""
    workers = []
    try:
        workers += [DataWorker.remote(cfg, i) for i in range(cfg.num_workers)]
        ray.get([w.shard_size.remote() for w in workers])     # all up before the clock starts
        yield workers
    finally:
        for w in workers:
            ray.kill(w)


def average_gradients(grads_list: list[dict]) -> dict:
    """{name: the element-wise mean over the workers of grads[name]}."""
    return {name: np.mean([grads[name] for grads in grads_list], axis=0)
            for name in grads_list[0]}


def sync_sgd(cfg: DataParallelConfig, average=average_gradients) -> list[dict]:
    """Synchronous data parallelism; returns [{update, time_s, accuracy}, ...]. `average`
    turns the workers' gradients into one (a slot: yours in notebook 03)."""
    model, (x_test, y_test) = make_model(cfg), train_test_split(cfg)[1]
    weights = get_weights(model)
    history = []
    with data_workers(cfg) as workers:
        start = time.perf_counter()
        for step in range(1, cfg.steps + 1):
            weights_ref = ray.put(weights)                # broadcast once, all workers read it
            results = ray.get([w.compute_gradients.remote(weights_ref, step) for w in workers])
            weights = sgd_step(weights, average([g for g, _, _ in results]), cfg.lr)
            if step % cfg.eval_every == 0 or step == cfg.steps:
                set_weights(model, weights)
                history.append({"update": step, "time_s": time.perf_counter() - start,
                                "accuracy": accuracy(model, x_test, y_test)})
    return history


def async_sgd(cfg: DataParallelConfig, make_step=None) -> tuple[list[dict], list[int]]:
    """Asynchronous training through a ParameterStoreActor.

    Returns the history [{update, time_s, accuracy}, ...] and the staleness of every applied
    gradient (how many updates other workers made while it was being computed). `make_step`
    (a slot: yours in notebook 03) builds a worker's step in each worker, which then trains
    on its own against the server (`by_workers`).
    """
    if make_step is not None:
        return by_workers(cfg, make_step)
    model, (x_test, y_test) = make_model(cfg), train_test_split(cfg)[1]
    ps = ParameterStoreActor.remote()
    try:
        ray.get(ps.push.remote("model", get_weights(model)))
        version, weights = pull_weights(ps, "model")
        with data_workers(cfg) as workers:
            in_flight = {w.compute_gradients.remote(weights, version): w for w in workers}
            history, staleness, start = [], [], time.perf_counter()
            total = cfg.steps * cfg.num_workers
            for update in range(1, total + 1):
                [done], _ = ray.wait(list(in_flight), num_returns=1)
                worker = in_flight.pop(done)
                grads, computed_on, _ = ray.get(done)
                version = ray.get(ps.push_gradients.remote("model", grads, cfg.lr))
                staleness.append(version - 1 - computed_on)
                version, weights = pull_weights(ps, "model")
                if update < total:
                    in_flight[worker.compute_gradients.remote(weights, version)] = worker
                if update % (cfg.eval_every * cfg.num_workers) == 0 or update == total:
                    set_weights(model, weights)
                    history.append({"update": update, "time_s": time.perf_counter() - start,
                                    "accuracy": accuracy(model, x_test, y_test)})
    finally:
        ray.kill(ps)
    return history, staleness


def worker_step(ps, cache, compute_gradients, lr: float) -> int:
    """One step of a worker that trains through the server: pull the newest weights (only if
    changed), compute a gradient on them, apply it on the server; the version it made."""
    grads = compute_gradients(cache.get(ps, "model"))
    return get_result(ps.push_gradients.remote("model", grads, lr))


def make_worker_step(ps, compute_gradients, lr: float):
    """course_lib's step of a worker that trains on its own (`by_workers`): `worker_step` with
    a `CachedWeights`; each call returns the gradient's staleness."""
    cache = CachedWeights()

    def step() -> int:
        made = worker_step(ps, cache, compute_gradients, lr)
        return made - 1 - cache.version          # the version its gradient was computed on
    return step


def by_workers(cfg: DataParallelConfig, make_step=make_worker_step
               ) -> tuple[list[dict], list[int]]:
    """`async_sgd` driven by the workers: each runs `cfg.steps` of the step `make_step` builds
    in it, against the server; the driver evaluates the server's newest weights meanwhile."""
    model, (x_test, y_test) = make_model(cfg), train_test_split(cfg)[1]
    ps = ParameterStoreActor.remote()
    try:
        ray.get(ps.push.remote("model", get_weights(model)))
        with one_line_errors(), data_workers(cfg) as workers:
            runs = [w.run_steps.remote(ps, cfg.steps, make_step, cfg.lr) for w in workers]
            history, start, done = [], time.perf_counter(), []
            while len(done) < len(runs):
                done, _ = ray.wait(runs, num_returns=len(runs), timeout=0.5)
                version, weights = pull_weights(ps, "model")
                set_weights(model, weights)
                history.append({"update": version - 1, "time_s": time.perf_counter() - start,
                                "accuracy": accuracy(model, x_test, y_test)})
            staleness = [s for run in ray.get(runs) for s in run]
    finally:
        ray.kill(ps)
    return history, staleness
