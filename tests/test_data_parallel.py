"""Synchronous and asynchronous data-parallel training (notebook 03)."""

import numpy as np

from course_lib.data_parallel import (
    DataParallelConfig,
    async_sgd,
    make_blobs,
    sgd_step,
    sync_sgd,
)


def test_blobs_are_reproducible_and_balanced():
    x1, y1 = make_blobs(1000, 8, 4, seed=3)
    x2, y2 = make_blobs(1000, 8, 4, seed=3)
    assert x1.shape == (1000, 8) and x1.dtype == np.float32 and np.array_equal(x1, x2)
    assert np.array_equal(y1, y2) and set(np.unique(y1)) == {0, 1, 2, 3}


def test_sgd_step_moves_against_the_gradient():
    weights = {"w": np.array([1.0, 2.0]), "buf": np.array([5.0])}
    new = sgd_step(weights, {"w": np.array([1.0, -1.0])}, 0.5)
    assert np.allclose(new["w"], [0.5, 2.5]) and new["buf"][0] == 5.0


def test_sync_and_async_both_learn(ray_local):
    cfg = DataParallelConfig.preset()
    sync = sync_sgd(cfg)
    history, staleness = async_sgd(cfg)
    chance = 1 / cfg.n_classes
    assert sync[-1]["update"] == cfg.steps and sync[-1]["accuracy"] > chance + 0.3
    assert history[-1]["update"] == cfg.steps * cfg.num_workers
    assert history[-1]["accuracy"] > chance + 0.3
    # every gradient is applied once; with 2 workers one is usually a step behind the other
    assert len(staleness) == cfg.steps * cfg.num_workers
    assert min(staleness) >= 0 and np.median(staleness) <= cfg.num_workers
    assert np.mean(staleness) > 0
