"""Tests for course_lib.apex: resources, the replay-ratio throttle, a killed explorer, resume."""

import threading

import gymnasium as gym
import numpy as np
import pytest
import ray

from course_lib.apex import ApexConfig, ApexSlots, ApexTrainer
from course_lib.distributed import POLICY
from course_lib.distributed.run_actors import actor_resources
from course_lib.dqn import epsilon_for_explorer
from course_lib.param_server import pull_weights


@pytest.mark.parametrize("workers", [1, 2, 4, 8])
def test_actors_fit_in_two_cpus(workers):
    cfg = ApexConfig(num_workers=workers)
    cpus = actor_resources(cfg, 2)
    total = cpus["learner"] + cpus["evaluator"]
    assert total + workers * cpus["worker"] <= 2
    assert 0 < cpus["worker"] <= cfg.worker_cpus


def test_too_small_a_cluster_leaves_the_workers_nothing():
    """The learner and the evaluator take what is free; the workers share what is left, and a
    run left with nothing for them is refused before it starts (`run_actors.check_room`)."""
    assert actor_resources(ApexConfig(learner_cpus=1.0), 1)["worker"] == 0


# Small and quick: the learner trains from 300 transitions on, at 4 samples per transition,
# and the explorers pause as soon as the learner is 20 updates behind.
CFG = ApexConfig.preset(quick=True).updated({
    "num_workers": 2, "hidden": (32,), "learning_starts": 300, "replay_ratio": 4.0,
    "batch_size": 32, "max_lag_updates": 20, "worker_chunk": 100,
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
        assert c.learner_updates >= 4 * (c.inserted - CFG.learning_starts) / 32 - lag
        assert set(rows[0]) >= {"iteration", "time_s", "env_steps", "learner_updates",
                                "eval_return", "train_return", "replay_size"}

        # kill explorer 0: Ray restarts it, the driver resends its chunk, training goes on
        old_pid = trainer.pids[0]

        def seeds_now() -> list[int]:             # the seed each worker process started from
            return ray.get([w.__ray_call__.remote(lambda worker: worker.seed)
                            for w in trainer.workers])

        seeds = seeds_now()
        ray.kill(trainer.workers[0], no_restart=False)
        before = last["env_steps"]
        while trainer.pids[0] in (None, old_pid):
            rows.append(trainer.step())
            assert rows[-1]["iteration"] < last["iteration"] + 30, "explorer 0 never came back"
        assert trainer.counters.worker_restarts >= 1   # a row shows it from its next snapshot
        rows.append(trainer.step())
        assert rows[-1]["worker_restarts"] >= 1 and rows[-1]["env_steps"] > before
        # the restarted explorer plays new episodes; the other one is untouched
        new_seeds = seeds_now()
        assert new_seeds[0] != seeds[0] and new_seeds[1] == seeds[1]
        state = trainer.state()
        weights = trainer.get_weights()
    finally:
        trainer.close()

    assert state["counters"]["learner_updates"] == state["learner"]["updates"]
    # as if it had trained for longer than its actors may take to start: resumed, its clock
    # goes on from there, and its actors still get `start_timeout_s` from now to start
    state["counters"]["time_s"] += CFG.start_timeout_s
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


def stored_batch(n: int = 300, seed: int = 0) -> tuple[dict, np.ndarray]:
    """n CartPole-shaped n-step transitions and their initial priorities."""
    rng = np.random.default_rng(seed)
    batch = {"obs": rng.normal(size=(n, 4)).astype(np.float32), "action": rng.integers(0, 2, n),
             "reward": np.ones(n, np.float32), "next_obs": rng.normal(size=(n, 4)).astype(
                 np.float32), "terminated": np.zeros(n, bool),
             "discount": np.full(n, 0.97, np.float32)}
    return batch, rng.uniform(0.01, 10.0, n)


def replay_of(cfg) -> dict:
    from course_lib.replay import transition_spec
    return {"capacity": 1_000, "spec": transition_spec((4,), n_step=True), "seed": 0,
            "alpha": cfg.priority_alpha}


def test_the_learner_samples_its_own_buffer_and_writes_priorities_back(ray_local):
    """Each batch the learner trains on carries importance weights normalised by its own
    largest, and an update's new priorities land in the learner's buffer at the sampled
    indices, with no Ray call between the buffer and the update."""
    from course_lib.apex import ApexLearnerActor
    from course_lib.param_server import ParameterStoreActor

    params = ParameterStoreActor.options(name="weights:parameter server").remote()
    batch, priorities = stored_batch()
    try:
        learner = ApexLearnerActor.__ray_actor_class__(CFG, (4, 2), "weights", None, 0,
                                                       replay_of(CFG), ApexSlots())
        assert learner.add(batch, priorities) == 300
        seen = learner.draw_batches(12)
        trained = []                                  # (batch, info) of each update
        update = learner.learner.update
        learner.learner.update = lambda b: trained.append((b, update(b))) or trained[-1][1]
        learner.train(5)
    finally:
        ray.kill(params)
    assert all(len(b["weights"]) == 32 for b in seen)
    assert [float(b["weights"].max()) for b in seen] == [1.0] * 12
    assert learner.replay.stats()["sampled"] == 17 * 32        # 12 drawn here, 5 by train
    buffer, latest = learner.replay.buffer, {}
    for batch, info in trained:                       # an id drawn twice: its last priority
        latest.update(zip(np.asarray(batch["indices"]).tolist(), info["priorities"],
                          strict=True))
    slots = np.array(list(latest)) % buffer.capacity
    np.testing.assert_allclose(buffer.tree.leaves(slots), buffer._to_q(np.array(
        list(latest.values()), np.float64)))


@pytest.mark.parametrize("per_draw", [1, 4])
def test_priorities_land_after_each_draw_of_batches(ray_local, per_draw):
    """With `batches_per_draw` k, the buffer's priorities stay as they were while the k
    updates of one draw run and change after them: a new priority is at most k - 1 updates
    late, and with k = 1 every update trains on the priorities of all the updates before it."""
    from course_lib.apex import ApexLearnerActor
    from course_lib.param_server import ParameterStoreActor

    params = ParameterStoreActor.options(name="late:parameter server").remote()
    batch, priorities = stored_batch()
    cfg = CFG.updated({"batches_per_draw": per_draw})
    try:
        learner = ApexLearnerActor.__ray_actor_class__(cfg, (4, 2), "late", None, 0,
                                                       replay_of(cfg), ApexSlots())
        learner.add(batch, priorities)
        totals = []                                   # the tree's total before each update
        update = learner.learner.update
        learner.learner.update = lambda b: totals.append(learner.replay.buffer.tree.total) or \
            update(b)
        learner.train(8)
    finally:
        ray.kill(params)
    changed = [i for i in range(1, 8) if totals[i] != totals[i - 1]]
    assert changed == list(range(per_draw, 8, per_draw))


@pytest.mark.parametrize("ahead", [False, True])
def test_with_sample_ahead_the_next_draw_runs_beside_the_updates(ray_local, ahead):
    """With `sample_ahead`, the learner draws the next group of batches on its sampler thread
    while this group's updates run: the first update waits for that draw to start and sees it
    start. Without it the draw waits for the updates (the same wait times out). Either way,
    when `train` returns every update's priorities are in the buffer."""
    from course_lib.apex import ApexLearnerActor
    from course_lib.param_server import ParameterStoreActor

    params = ParameterStoreActor.options(name="ahead:parameter server").remote()
    batch, priorities = stored_batch()
    cfg = CFG.updated({"batches_per_draw": 2, "sample_ahead": ahead})
    threads, trained, seen = [], [], []                # drawing threads; (batch, info); waits
    second_draw = threading.Event()
    try:
        learner = ApexLearnerActor.__ray_actor_class__(cfg, (4, 2), "ahead", None, 0,
                                                       replay_of(cfg), ApexSlots())
        learner.add(batch, priorities)
        draw, update = learner.draw_batches, learner.learner.update

        def watched_draw(count):
            threads.append(threading.current_thread().name)
            if len(threads) == 2:
                second_draw.set()
            return draw(count)

        def watched_update(b):
            if not trained:
                seen.append(second_draw.wait(timeout=10 if ahead else 0.5))
            trained.append((b, update(b)))
            return trained[-1][1]

        learner.draw_batches, learner.learner.update = watched_draw, watched_update
        learner.train(6)
    finally:
        ray.kill(params)
    assert seen == [ahead] and len(threads) == 3 and len(trained) == 6
    assert threads[0] == threading.main_thread().name
    assert all(name.startswith("sampler") == ahead for name in threads[1:])
    buffer, latest = learner.replay.buffer, {}
    for b, info in trained:                           # an id drawn twice: its last priority
        latest.update(zip(np.asarray(b["indices"]).tolist(), info["priorities"], strict=True))
    slots = np.array(list(latest)) % buffer.capacity
    np.testing.assert_allclose(buffer.tree.leaves(slots), buffer._to_q(np.array(
        list(latest.values()), np.float64)))


def test_explorers_adds_land_while_the_learner_trains(ray_local):
    """The learner actor runs `add` on its replay thread: an add sent after a long `train`
    call returns before that call does, instead of queueing behind it."""
    from course_lib.apex import ApexLearnerActor
    from course_lib.param_server import ParameterStoreActor

    params = ParameterStoreActor.options(name="busy:parameter server").remote()
    learner = ApexLearnerActor.remote(CFG, (4, 2), "busy", None, 0, replay_of(CFG), ApexSlots())
    batch, priorities = stored_batch()
    try:
        ray.get(learner.add.remote(batch, priorities))
        training = learner.train.remote(3_000)          # seconds of updates
        adding = learner.add.remote(batch, priorities)
        [first], _ = ray.wait([training, adding], num_returns=1, timeout=120)
        assert first == adding and ray.get(adding) == 600
        assert ray.get(training, timeout=300).updates == 3_000
        assert ray.get(learner.replay_stats.remote())["inserted"] == 600
    finally:
        ray.kill(learner)
        ray.kill(params)


class Tagged(gym.Env):
    """obs = (a tag drawn at each reset, the step within the episode); 6 steps an episode."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.tag, self.t = float(self.np_random.random()), 0
        return np.array([self.tag, 0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.tag, self.t], np.float32), 1.0, self.t == 6, False, {}


def test_an_explorer_with_several_envs_keeps_each_envs_n_step_window_apart(ray_local):
    """One forward pass acts in 3 envs; every stored transition starts and ends in the same
    episode of the same env, n steps apart (fewer only at the episode's end)."""
    from course_lib.apex import Explorer
    from course_lib.dqn import DuelingQNet
    from course_lib.nets import get_weights
    from course_lib.param_server import ParameterStoreActor
    from course_lib.replay import ReplayStoreActor, transition_spec

    gym.register("Tagged-v0", entry_point=Tagged)
    cfg = CFG.updated({"env_id": "Tagged-v0", "num_envs": 3, "n_step": 3, "send_every": 10})
    replay = ReplayStoreActor.options(name="tagged:learner").remote(   # stands in for the learner
        1_000, transition_spec((2,), n_step=True), seed=0)
    params = ParameterStoreActor.options(name="tagged:parameter server").remote()
    try:
        ray.get(params.push.remote(POLICY, get_weights(DuelingQNet(2, 2, tuple(cfg.hidden)))))
        explorer = Explorer.__ray_actor_class__(0, cfg, "tagged", 0, ApexSlots(),
                                                   epsilon=0.5)
        out = explorer.run(60)
        stored = ray.get(replay.sample.remote(50))
    finally:
        gym.registry.pop("Tagged-v0")
        ray.kill(replay)
        ray.kill(params)
    assert out.env_steps == 60 and out.episode_returns == [6.0] * 9   # 20 steps per env
    obs, next_obs = stored["obs"], stored["next_obs"]
    assert (obs[:, 0] == next_obs[:, 0]).all()                     # same env, same episode
    gap = next_obs[:, 1] - obs[:, 1]
    assert ((gap == 3) | (next_obs[:, 1] == 6)).all() and (gap >= 1).all()
    assert len(np.unique(obs[:, 0])) >= 6                          # 3 envs, several episodes


def test_pin_learner_gives_the_learner_a_core_of_its_own(ray_local):
    """`pin_learner`: the learner's process runs on the last core only, the explorers' on the
    others (Linux); on a cluster of several nodes the setting is refused in one line."""
    import os

    from course_lib.distributed.run_actors import check_pinning

    if not hasattr(os, "sched_getaffinity") or os.cpu_count() < 2:
        pytest.skip("pinning needs Linux and 2 cores")
    last = os.cpu_count() - 1
    trainer = ApexTrainer(CFG.updated({"pin_learner": True}))
    try:
        cores = ray.get(trainer.learner_actor.__ray_call__.remote(
            lambda s: os.sched_getaffinity(0)))
        explorers = ray.get([w.__ray_call__.remote(lambda s: os.sched_getaffinity(0))
                             for w in trainer.workers])
        for _ in range(2):
            trainer.step()
        played = trainer.counters.env_steps
    finally:
        trainer.close()
    assert cores == {last} and explorers == [set(range(last))] * CFG.num_workers
    assert played > 0
    with pytest.raises(ValueError, match="pin_learner works on one machine, and this Ray "
                                         "cluster has 3 nodes: set it to false"):
        check_pinning(CFG.updated({"pin_learner": True}), nodes=3)
