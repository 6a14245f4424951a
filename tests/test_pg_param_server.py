"""Policy gradient with weights travelling through the parameter server (notebook 03)."""

import numpy as np
import ray

from course_lib import pg
from course_lib.nets import get_weights
from course_lib.param_server import ParameterStoreActor


def test_worker_pulls_only_changed_weights(ray_local):
    cfg = pg.PGConfig.preset()
    policy, _ = pg.make_policy_and_optimizer(cfg)
    ps = ParameterStoreActor.remote()
    ray.get(ps.push.remote("policy", get_weights(policy)))
    [worker] = pg.make_workers(cfg.updated({"num_workers": 1}), policy)
    first = ray.get(worker.sample_from_server.remote(ps, 50))
    assert set(first["versions"]) == {1} and len(first["reward"]) >= 50
    ray.get(ps.push.remote("policy", get_weights(policy)))      # version 2
    second = ray.get(worker.sample_from_server.remote(ps, 50))
    assert set(second["versions"]) == {2}
    ray.kill(worker)


def test_train_with_param_server_pushes_every_update(ray_local):
    cfg = pg.PGConfig.preset().updated({"max_iterations": 6})
    ps = ParameterStoreActor.remote()
    _, history = pg.train_with_param_server(cfg, ps)
    assert [r["version"] for r in history] == [i + 2 for i in range(len(history))]
    assert all(r["policy_lag"] >= 0 for r in history)
    assert np.isfinite(history[-1]["loss"])


def test_sampling_throughput_counts_every_worker(ray_local):
    rates = pg.measure_sampling_throughput(pg.PGConfig.preset(), [1, 2], steps_per_worker=200,
                                           rounds=1)
    assert len(rates) == 2 and all(r > 0 for r in rates)
