"""Tests for course_lib.apex: resources, the replay-ratio throttle, a killed explorer, resume."""

import numpy as np
import pytest
import ray

from course_lib.apex import ApexConfig, ApexTrainer
from course_lib.distributed import actor_resources
from course_lib.dqn import epsilon_for_explorer
from course_lib.param_server import pull_weights
from course_lib.roles import POLICY


@pytest.mark.parametrize("workers", [1, 2, 4, 8])
def test_actors_fit_in_two_cpus(workers):
    cfg = ApexConfig(num_workers=workers)
    cpus = actor_resources(cfg, {"CPU": 2})
    total = cpus["learner"] + cpus["replay"] + cpus["evaluator"]
    assert total + workers * cpus["worker"] <= 2
    assert 0 < cpus["worker"] <= cfg.worker_cpus


def test_too_small_a_cluster_is_refused():
    with pytest.raises(ValueError, match="too few"):
        actor_resources(ApexConfig(learner_cpus=1.0), {"CPU": 1})


# Small and quick: the learner trains from 300 transitions on, at 4 samples per transition,
# and the explorers pause as soon as the learner is 20 updates behind.
CFG = ApexConfig.preset(quick=True).updated({
    "num_workers": 2, "hidden": (32,), "learning_starts": 300, "replay_ratio": 4.0,
    "batch_size": 32, "sample_batches": 2, "max_lag_updates": 20, "worker_chunk": 100,
    "learner_chunk": 20, "eval_every_s": 1.0, "eval_episodes": 2,
    "target_return": None, "max_env_steps": None, "max_time_s": None})   # stepped by hand


def test_apex_throttles_survives_a_killed_explorer_and_resumes(ray_local):
    trainer = ApexTrainer(CFG)
    try:
        assert trainer.epsilons == [epsilon_for_explorer(i, 2) for i in range(2)]
        rows = [trainer.step() for _ in range(3)]
        while rows[-1]["learner_updates"] < 100:         # slow machines: until it trains
            rows.append(trainer.step())
        steps = [r["env_steps"] for r in rows]
        assert steps == sorted(steps) and steps[-1] > 300
        last = rows[-1]
        # never flooded: the learner never gets more than the ratio allows ...
        assert last["replay_ratio"] <= CFG.replay_ratio + 1e-9
        # ... and never starved: it stays within the lag the explorers wait for
        lag = CFG.max_lag_updates + 2 * CFG.num_workers * CFG.worker_chunk * 4 / 32
        c = trainer.counters               # now (a row's counters are its snapshot's)
        assert c["learner_updates"] >= 4 * (c["inserted"] - CFG.learning_starts) / 32 - lag
        assert set(rows[0]) >= {"iteration", "time_s", "env_steps", "learner_updates",
                                "eval_return", "train_return", "replay_size"}

        # kill explorer 0: Ray restarts it, the driver resends its chunk, training goes on
        old_pid = trainer.pids[0]
        seeds = ray.get([w.seeded_with.remote() for w in trainer.workers])
        ray.kill(trainer.workers[0], no_restart=False)
        before = last["env_steps"]
        while trainer.pids[0] in (None, old_pid):
            rows.append(trainer.step())
            assert rows[-1]["iteration"] < last["iteration"] + 30, "explorer 0 never came back"
        assert trainer.counters["worker_restarts"] >= 1   # a row shows it from its next snapshot
        rows.append(trainer.step())
        assert rows[-1]["worker_restarts"] >= 1 and rows[-1]["env_steps"] > before
        # the restarted explorer plays new episodes; the other one is untouched
        new_seeds = ray.get([w.seeded_with.remote() for w in trainer.workers])
        assert new_seeds[0] != seeds[0] and new_seeds[1] == seeds[1]
        state = trainer.state()
        weights = trainer.get_weights()
    finally:
        trainer.close()

    assert state["counters"]["learner_updates"] == state["learner"]["updates"]
    resumed = ApexTrainer(CFG.updated({"num_workers": 1}), restore=state)   # fewer: faster
    try:
        # before any explorer starts, the parameter server holds the checkpoint's weights
        _, published = pull_weights(resumed.params, POLICY)
        for name, value in weights.items():
            np.testing.assert_array_equal(published[name], value)
        # the replay buffer starts empty: no updates are owed for the restored transitions
        assert resumed.updates_due() == state["counters"]["learner_updates"]
        row = resumed.step()
        assert row["iteration"] == state["iteration"] + 1
        assert row["env_steps"] >= state["counters"]["env_steps"]
        assert row["learner_updates"] >= state["counters"]["learner_updates"]
        assert row["time_s"] > state["counters"]["time_s"]
        assert row["worker_restarts"] == state["counters"]["worker_restarts"]
    finally:
        resumed.close()


def test_every_batch_the_learner_trains_on_has_largest_weight_one(ray_local):
    """The learner splits nothing: each of a request's batches carries importance weights
    normalised by its own largest (documented per batch; the old split of one big draw gave
    each update a largest weight of 0.75 on average)."""
    from course_lib.apex import Learner
    from course_lib.param_server import ParameterServer
    from course_lib.replay import ReplayActor, transition_spec

    cfg = CFG.updated({"batch_size": 32, "sample_batches": 4, "prefetch": 2})
    replay = ReplayActor.options(name="weights-replay").remote(
        1_000, transition_spec((4,), n_step=True), seed=0)
    params = ParameterServer.options(name="weights-params").remote()
    rng = np.random.default_rng(0)
    n = 300
    batch = {"obs": rng.normal(size=(n, 4)).astype(np.float32), "action": rng.integers(0, 2, n),
             "reward": np.ones(n, np.float32), "next_obs": rng.normal(size=(n, 4)).astype(
                 np.float32), "terminated": np.zeros(n, bool),
             "discount": np.full(n, 0.97, np.float32)}
    try:
        ray.get(replay.add.remote(batch, rng.uniform(0.01, 10.0, n)))
        learner = Learner.__ray_actor_class__(cfg, (4, 2), "weights", None, 0)
        seen = [learner.next_batch() for _ in range(12)]
    finally:
        ray.kill(replay)
        ray.kill(params)
    assert all(len(b["weights"]) == 32 for b in seen)
    assert [float(b["weights"].max()) for b in seen] == [1.0] * 12
