"""The shared trainer skeleton: evaluated snapshots, fresh evaluation seeds, the update debt,
start-up, counting where transitions land, restarts, and refusing bad configs early."""

import dataclasses
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import ray
import torch

from course_lib import apex, dqn, envs, results, runs, sac
from course_lib.apex import ApexConfig, ApexTrainer
from course_lib.distributed import WorkerReport
from course_lib.dqn import DQNConfig, DQNLearner, DQNTrainer
from course_lib.errors import CheckpointError, WorkerDiedError
from course_lib.nets import set_weights
from course_lib.param_server import ParameterStoreActor
from course_lib.scoring import lower_bound
from course_lib.trainer import (
    Counters,
    Snapshot,
    Trainer,
    TrainerConfig,
    derive_seed,
    evaluation_score,
    updates_due,
)


class Stub(Trainer):
    """The skeleton alone: no env, no learner."""

    algo = "stub"
    updates_per_transition = 0.25

    def step(self):
        raise NotImplementedError

    def close(self):
        pass


def test_updates_due_owes_nothing_for_the_transitions_that_fill_the_buffer():
    assert updates_due(1_000, 0.25, 1_000) == 0          # (the old rule owed 250 here)
    assert updates_due(1_400, 0.25, 1_000) == 100
    trainer = Stub(TrainerConfig(learning_starts=1_000, batch_size=64))
    trainer.counters.inserted = 999
    assert trainer.updates_due() == 0
    trainer.counters.inserted = 1_400
    assert trainer.updates_due() == 100


@pytest.mark.parametrize("config,per_update", [(sac.SACConfig(learning_starts=1_000), 1),
                                                (ApexConfig(learning_starts=1_000,
                                                            batch_size=256), 16)])
def test_the_first_update_is_owed_right_after_learning_starts(config, per_update):
    """Not after 2,048 transitions (batch_size x 8, the batches one sample request used to
    fetch): the learner draws each batch on its own, so one batch stored is enough."""
    cfg = config
    assert cfg.batch_size * 8 > 1_000
    trainer = Stub(cfg)
    trainer.updates_per_transition = 1 / per_update     # SAC: utd 1; Ape-X: 16 / 256
    trainer.counters.inserted = 1_000
    assert trainer.updates_due() == 0
    trainer.counters.inserted = 1_000 + per_update
    assert trainer.updates_due() == 1
    small = dataclasses.replace(cfg, learning_starts=10)
    assert Stub(small).learning_start == cfg.batch_size   # one batch at least


def test_counters_are_typed_and_checkpoints_keep_their_plain_form():
    """The counters are read as attributes; a checkpoint holds them as a plain dict (so
    checkpoints written by this code load; one written before goal_tests was counted loads
    with none spent), and counters from another version are refused in one line that says to
    retrain."""
    fresh = Stub(TrainerConfig())
    assert isinstance(fresh.counters, Counters) and fresh.counters.env_steps == 0
    saved = dataclasses.asdict(fresh.counters)
    assert set(saved) == {"iteration", "env_steps", "inserted", "episodes", "learner_updates",
                          "time_s", "evaluations", "goal_tests", "starts", "worker_restarts"}
    resumed = Stub(TrainerConfig(), restore={"counters": {**saved, "env_steps": 700,
                                                          "goal_tests": 3}})
    assert resumed.counters.env_steps == 700 and resumed.counters.starts == 1
    assert resumed.counters.goal_tests == 3              # a resume goes on spending the level
    older = {k: v for k, v in saved.items() if k != "goal_tests"}
    assert Stub(TrainerConfig(), restore={"counters": older}).counters.goal_tests == 0
    with pytest.raises(CheckpointError, match="retrain") as err:
        Stub(TrainerConfig(), restore={"counters": {**saved, "replay_size": 5}})
    assert "\n" not in str(err.value) and "replay_size" in str(err.value)


def test_after_a_resume_learning_starts_applies_again_and_the_seeds_change():
    fresh = Stub(TrainerConfig(learning_starts=1_000))
    counters = {**dataclasses.asdict(fresh.counters), "inserted": 50_000, "learner_updates": 12_000}
    resumed = Stub(TrainerConfig(learning_starts=1_000), restore={"counters": counters})
    assert resumed.updates_due() == 12_000               # the empty buffer is owed nothing
    resumed.counters.inserted += 999
    assert resumed.updates_due() == 12_000
    resumed.counters.inserted += 401
    assert resumed.updates_due() == 12_000 + 100
    assert resumed.seed_for("worker", 0) != fresh.seed_for("worker", 0)
    assert derive_seed(0, "evaluation", 1) != derive_seed(0, "evaluation", 2)


def test_each_evaluation_gets_fresh_seeds_and_a_goal_is_confirmed_on_more_episodes():
    trainer = Stub(TrainerConfig(eval_episodes=10, confirm_episodes=20, target_return=100.0))
    low = Snapshot({}, {}, {})
    episodes, seed1 = trainer.next_evaluation(low)
    assert episodes == 10
    low.returns = [50.0] * 10                            # below the goal: scored
    assert trainer.next_evaluation(low) is None
    high = Snapshot({}, {}, {})
    _, seed2 = trainer.next_evaluation(high)
    high.returns = [120.0] * 10                          # goal met on 10: 20 more, same weights
    episodes, seed3 = trainer.next_evaluation(high)
    assert episodes == 20
    high.returns += [90.0] * 20
    assert trainer.next_evaluation(high) is None
    assert len({seed1, seed2, seed3}) == 3               # no evaluation replays another's seeds
    assert trainer.counters.evaluations == 3


@pytest.mark.parametrize("config", [DQNConfig, ApexConfig, sac.SACConfig])
def test_a_buffer_smaller_than_one_sample_is_refused_at_the_start(config):
    cfg = config().updated({"buffer_size": 100, "batch_size": 128})
    trainer_class = {DQNConfig: DQNTrainer, ApexConfig: ApexTrainer,
                     sac.SACConfig: sac.SACTrainer}[config]
    with pytest.raises(ValueError, match="buffer_size 100 is smaller than one sample"):
        trainer_class(cfg)                               # before any env, actor or Ray start


def test_dqn_saves_and_returns_exactly_the_weights_it_scored():
    cfg = DQNConfig().updated({"max_env_steps": 600, "learning_starts": 200,
                               "steps_per_iteration": 300, "eval_episodes": 3,
                               "hidden": (16,), "batch_size": 32, "target_return": None})
    trainer = DQNTrainer(cfg)
    try:
        first, second = trainer.step(), trainer.step()
        state, weights = trainer.state(), trainer.get_weights()
    finally:
        trainer.close()
    assert state["weights_version"] == second["learner_updates"] == state["learner"]["updates"]
    assert state["counters"]["env_steps"] == second["env_steps"]
    for name, value in weights.items():
        np.testing.assert_array_equal(state["learner"]["online"][name].numpy(), value)
    # replaying those weights on the evaluation's own seeds gives the row's score exactly
    net = dqn.make_q_net(cfg.env_id, cfg.hidden)
    set_weights(net, weights)
    seed = derive_seed(cfg.seed, "evaluation", state["counters"]["evaluations"])
    again = dqn.greedy_returns(net, cfg.env_id, 3, seed)
    assert again.mean() == pytest.approx(second["eval_return"])
    assert first["eval_return"] is not None and state["counters"]["evaluations"] == 2


TINY_APEX = ApexConfig.preset(quick=True).updated({
    "num_workers": 1, "hidden": (32,), "learning_starts": 200, "batch_size": 32,
    "worker_chunk": 100, "learner_chunk": 20, "eval_every_s": 0.5,
    "eval_episodes": 3, "confirm_episodes": 5, "max_env_steps": None, "max_time_s": 120.0})


def test_apex_stops_on_a_confirmed_goal_and_saves_the_weights_that_scored(ray_local, tmp_path):
    """Goal -1000 on CartPole (every return is positive, so the bound of any 5 clears it): the
    first evaluation meets it, 5 fresh episodes of the same weights test it, and the run stops,
    saves and returns exactly those weights: replayed on the same seeds, the checkpoint scores
    the row's return and bound."""
    cfg = TINY_APEX.updated({"target_return": -1000.0})
    run = runs.Run(tmp_path / "run", checkpoint_at_end=True)
    result = apex.ApexTrainer.train(cfg, run=run)
    run.close()
    last = result.last
    batches = last["eval_episodes"] // 5     # the confirming; 10 when the first 5 all tied
    assert result.stopped_by == "eval_return" and last["eval_episodes"] in (5, 10)
    checkpoint = runs.load_checkpoint(result.checkpoint)
    assert checkpoint["weights_version"] == last["learner_updates"]
    assert checkpoint["counters"]["env_steps"] == last["env_steps"]
    meta = json.loads((result.checkpoint / runs.META_FILE).read_text())
    assert meta["eval_return"] == pytest.approx(last["eval_return"])
    for name, value in result.weights.items():
        np.testing.assert_array_equal(checkpoint["learner"]["online"][name].numpy(), value)
    policy = dqn.make_q_net(cfg.env_id, cfg.hidden)
    policy.load_state_dict(checkpoint["learner"]["online"])
    k = checkpoint["counters"]["evaluations"]
    screened = dqn.greedy_returns(policy, cfg.env_id, 3, derive_seed(cfg.seed, "evaluation",
                                                                      k - batches))
    confirmed = np.concatenate([
        dqn.greedy_returns(policy, cfg.env_id, 5, derive_seed(cfg.seed, "evaluation", j))
        for j in range(k - batches + 1, k + 1)])
    assert screened.mean() >= -1000.0 and confirmed.mean() == pytest.approx(last["eval_return"])
    assert last["eval_lower"] == pytest.approx(lower_bound(confirmed, 1))
    assert last["eval_lower"] >= -1000.0
    assert last["goal_tests"] == checkpoint["counters"]["goal_tests"] == 1


def test_a_worker_never_acts_without_the_learners_weights(ray_local, monkeypatch):
    """The learner's first publish is awaited before any worker starts; a worker that finds
    no weights (after waiting a little: a restarted server fills again) refuses to start
    instead of acting on its own random network."""
    from course_lib.distributed import WeightsFollower

    monkeypatch.setattr(WeightsFollower, "wait_s", 1.0)
    server = ParameterStoreActor.options(name="nothing:parameter server").remote()
    learner = ray.remote(object).options(name="nothing:learner").remote()
    try:
        with pytest.raises(RuntimeError, match="the learner never published them"):
            apex.Explorer.__ray_actor_class__(0, TINY_APEX, "nothing", 0, apex.ApexSlots(),
                                              epsilon=0.1)
    finally:
        ray.kill(server)
        ray.kill(learner)


def bare_apex() -> ApexTrainer:
    """An ApexTrainer's counting, without actors: two workers, nothing booked yet."""
    trainer = ApexTrainer.__new__(ApexTrainer)
    Trainer.__init__(trainer, TINY_APEX)
    trainer.pids, trainer.lost, trainer.worker_returns = [1, 2], [0, 0], [[], []]
    trainer.restarts, trainer.landed, trainer._train_returns = [0, 0], 0, []
    return trainer


def book(trainer, i, inserted, restarts=0):
    """Book a 100-step chunk of worker i whose last add left `inserted` in the replay."""
    out = WorkerReport(env_steps=100, episode_returns=[], pid=10 * i + restarts,
                       restarts=restarts, replay_inserted=inserted)
    trainer._book_collect(ray.put(out), i)


def test_inserted_transitions_are_counted_where_they_land(ray_local):
    """The driver takes the replay buffer's own count, which a lost or resent chunk cannot
    inflate or lose; results that arrive out of order never lower it; and it never exceeds
    the env steps counted (each transition is one env step's): transitions of another
    worker's chunk, or of a chunk lost in a crash, land before their env steps are booked."""
    trainer = bare_apex()
    c = trainer.counters
    book(trainer, 0, 150)          # 50 of worker 1's transitions landed already
    assert c.inserted == 100 == c.env_steps
    book(trainer, 1, 120)          # worker 1's last add landed before worker 0's
    assert c.inserted == 150 and c.env_steps == 200
    book(trainer, 1, None)         # sent nothing this chunk
    assert c.inserted == 150 and c.env_steps == 300
    book(trainer, 0, 420)          # a crash lost 100 env steps whose transitions landed
    assert c.inserted == 400 == c.env_steps


def test_two_restarts_between_two_results_count_two(ray_local):
    trainer = bare_apex()
    book(trainer, 0, None, restarts=2)    # one new pid, but Ray restarted it twice
    assert trainer.counters.worker_restarts == 2
    book(trainer, 0, None, restarts=2)
    book(trainer, 1, None, restarts=1)
    assert trainer.counters.worker_restarts == 3


class CrashingExplorer(apex.Explorer.__ray_actor_class__):
    """An explorer whose process dies after 30 env steps, every time."""

    def act(self, obs):
        if self.steps >= 30:
            os._exit(1)
        return super().act(obs)


class CrashingApex(ApexTrainer):
    Worker = ray.remote(CrashingExplorer)


def test_a_worker_that_keeps_dying_ends_the_run_with_one_line(ray_local):
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])   # workers import it
    try:
        trainer = CrashingApex(TINY_APEX.updated({"max_worker_restarts": 1,
                                                  "max_time_s": None}))   # stepped by hand
        try:
            with pytest.raises(WorkerDiedError, match="explorer 0 kept dying") as info:
                for _ in range(60):
                    trainer.step()
        finally:
            trainer.close()
    finally:
        ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert "\n" not in str(info.value) and "max_worker_restarts=1" in str(info.value)


def test_sac_rollout_workers_restart_like_explorers(ray_local):
    cfg = sac.SACConfig.preset(quick=True).updated({
        "num_workers": 1, "hidden": (16, 16), "start_steps": 100, "learning_starts": 200,
        "batch_size": 32, "worker_chunk": 50, "eval_every_s": 0.5, "eval_episodes": 1,
        "max_time_s": None})                      # stepped by hand, however loaded the machine
    trainer = sac.SACTrainer(cfg)
    try:
        trainer.step()
        old_pid = pid = trainer.pids[0]
        worker = trainer.workers[0]
        for _ in range(2):                 # twice, before the driver books a result again
            ray.kill(worker, no_restart=False)
            while (new := ray.get(worker.pid.remote(), timeout=300)) == pid:
                time.sleep(0.1)            # the kill has not landed yet: ask again
            pid = new
        for _ in range(40):
            trainer.step()
            if trainer.pids[0] != old_pid:
                break
        assert trainer.counters.worker_restarts == 2 and trainer.pids[0] == pid
        assert trainer.step()["worker_restarts"] == 2     # the next snapshot's row says so
    finally:
        trainer.close()


@pytest.mark.parametrize("env_id", ["FrozenLake-v1", "CliffWalking-v1", "Blackjack-v1"])
def test_discrete_observations_become_float_vectors(env_id):
    env = envs.make_env(env_id)
    obs, _ = env.reset(seed=0)
    assert obs.dtype == np.float32 and obs.ndim == 1
    net = dqn.DuelingQNet(*envs.env_dims(env), (8,))
    net(torch.as_tensor(obs)[None])                      # (int64 one-hots raised here)
    env.close()


def test_apex_trains_on_frozen_lake_through_the_command_line(tmp_path, ray_local):
    address = ray_local.get_runtime_context().gcs_address
    proc = subprocess.run(
        [sys.executable, "-m", "course_lib", "train", "--algo", "apex", "--env", "FrozenLake-v1",
         "--num-workers", "1", "--stop", '{"eval_return": null, "env_steps": 600}',
         "--config", '{"learning_starts": 200, "hidden": [16]}', "--quiet",
         "--results-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=240,
        env={**os.environ, "RAY_ADDRESS": address})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("apex FrozenLake-v1: finished the env_steps budget")


def test_adam_is_fused_only_where_the_device_supports_it():
    assert DQNLearner(4, 2, (8,), device="cpu").optimizer.defaults["fused"] is True
    assert DQNLearner(4, 2, (8,), device="meta").optimizer.defaults["fused"] is False


def test_the_sac_evaluation_closes_every_env_it_makes(monkeypatch):
    made, closed = [], []

    def tracking_make_env(env_id, **kwargs):
        env = envs.make_env.__wrapped__(env_id, **kwargs)
        close = env.close
        env.close = lambda: (closed.append(env), close())
        made.append(env)
        return env

    tracking_make_env.__wrapped__ = envs.make_env
    monkeypatch.setattr(sac.parallel, "make_env", tracking_make_env)
    monkeypatch.setattr(envs, "make_env", tracking_make_env)
    sac.deterministic_returns(sac.SquashedGaussianActor(3, 1, (8,)), "Pendulum-v1", 2, seed=0)
    assert len(made) == 3 and len(closed) == len(made)    # one for the bounds, two episodes


def scored_row(trainer: Trainer, returns: list[float]) -> dict:
    """The row of a snapshot that played `returns` (the skeleton's own scoring)."""
    snapshot = trainer.snapshot({}, {}, 0)
    snapshot.returns = list(returns)
    return trainer.row(snapshot)


def test_a_lucky_first_ten_does_not_carry_a_failing_confirmation():
    """10 episodes at 500 select the weights, 20 fresh ones at 465 fail on their own: the mean
    of all 30 (476.7) would have stopped the run at 475; the confirming episodes decide."""
    cfg = TrainerConfig(eval_episodes=10, confirm_episodes=20, target_return=475.0)
    trainer = Stub(cfg)
    lucky = scored_row(trainer, [500.0] * 10 + [465.0] * 20)
    assert (lucky["eval_return"], lucky["eval_episodes"]) == (465.0, 20)
    assert results.stop_reason(lucky, cfg) is None
    held = scored_row(trainer, [500.0] * 10 + [480.0] * 20)
    assert results.stop_reason(held, cfg) == "eval_return" and held["eval_return"] == 480.0
    unconfirmed = scored_row(trainer, [400.0] * 10)          # below the goal: no confirmation
    assert (unconfirmed["eval_return"], unconfirmed["eval_episodes"]) == (400.0, 10)
    assert trainer.state()["eval_return"] == 400.0            # the checkpoint says the same
    no_confirm = TrainerConfig(eval_episodes=10, confirm_episodes=0, target_return=475.0)
    assert evaluation_score(no_confirm, [480.0] * 10) == (480.0, 10)


def test_a_confirmation_over_the_goal_stops_only_when_its_bound_clears_it():
    """The confirming mean is reported as it is (480), but the stop reads the lower bound:
    20 episodes spread between 440 and 520 do not show a mean of 475 at the first test's
    level, 20 at 480 do (no spread seen). Rows that test nothing count no test."""
    cfg = TrainerConfig(eval_episodes=10, confirm_episodes=20, target_return=475.0)
    trainer = Stub(cfg)
    spread = scored_row(trainer, [500.0] * 10 + [440.0, 520.0] * 10)
    assert (spread["eval_return"], spread["eval_episodes"], spread["goal_tests"]) == (480, 20, 1)
    assert spread["eval_lower"] == pytest.approx(480.0 - 2.4334 * 41.04 / 20 ** 0.5, abs=0.01)
    assert results.stop_reason(spread, cfg) is None
    below = scored_row(trainer, [400.0] * 10)                # no confirmation: no test
    assert np.isnan(below["eval_lower"]) and below["goal_tests"] == 1
    held = scored_row(trainer, [500.0] * 10 + [480.0] * 20)
    assert (held["eval_lower"], held["goal_tests"]) == (480.0, 2)
    assert results.stop_reason(held, cfg) == "eval_return"
    assert trainer.state()["counters"]["goal_tests"] == 2     # a resume goes on from here


def test_the_same_confirmation_passes_the_first_test_and_fails_the_tenth():
    """The level is spent across the run's tests (`scoring.level_at`): the bound asks for
    more the more often the run has tested its goal, so looking again cannot fool it."""
    cfg = TrainerConfig(eval_episodes=10, confirm_episodes=20, target_return=475.0)
    returns = [500.0] * 10 + [470.0, 520.0] * 10                # mean 495, sd 25.6
    first, tenth = Stub(cfg), Stub(cfg)
    tenth.counters.goal_tests = 9
    assert results.stop_reason(scored_row(first, returns), cfg) == "eval_return"
    late = scored_row(tenth, returns)
    assert late["goal_tests"] == 10 and late["eval_return"] == 495.0
    assert results.stop_reason(late, cfg) is None and late["eval_lower"] < 475.0


def test_without_confirmation_every_evaluation_tests_the_goal():
    """confirm_episodes 0: the first episodes decide, so every evaluation spends a test (one
    that stayed below the goal too: counting only those over it would not bound the error)."""
    cfg = TrainerConfig(eval_episodes=5, confirm_episodes=0, target_return=475.0)
    trainer = Stub(cfg)
    low = scored_row(trainer, [400.0, 410.0, 420.0, 430.0, 440.0])
    assert low["goal_tests"] == 1 and low["eval_lower"] < 420.0
    high = scored_row(trainer, [500.0] * 5)
    assert (high["goal_tests"], high["eval_lower"]) == (2, 500.0)
    assert results.stop_reason(high, cfg) == "eval_return"
    free = Stub(TrainerConfig(eval_episodes=5, confirm_episodes=0, target_return=None))
    assert scored_row(free, [500.0] * 5)["goal_tests"] == 0   # no goal: nothing tested


def test_a_goal_needs_two_testing_episodes_and_rows_need_their_bound():
    for settings in ({"confirm_episodes": 1}, {"eval_episodes": 1, "confirm_episodes": 0}):
        with pytest.raises(ValueError, match="bounds nothing: set confirm_episodes >= 2") as err:
            TrainerConfig(target_return=475.0, **settings).check()
        assert "\n" not in str(err.value)
        TrainerConfig(target_return=None, **settings).check()  # no goal: nothing to test
    cfg = TrainerConfig(target_return=475.0)
    row = {"eval_return": 500.0, "env_steps": 1, "time_s": 1.0}
    with pytest.raises(ValueError, match="no eval_lower.*scoring.evaluation_columns"):
        results.stop_reason(row, cfg)                       # a mean alone never decides
    assert results.stop_reason(row, TrainerConfig(target_return=None, max_env_steps=1)) == \
        "env_steps"


def test_a_row_is_one_moment_its_counters_and_the_training_that_led_to_it():
    """Train returns and rates belong to the window that ends at the snapshot: what is booked
    after the snapshot (while it is evaluated) goes into the next row, not this one."""
    trainer = Stub(TrainerConfig())
    trainer.counters.env_steps = 1_000
    trainer.book_episodes([10.0, 30.0])
    first = trainer.snapshot({}, {}, 50, loss=0.5)
    trainer.counters.env_steps = 3_000                 # trained on while it is evaluated
    trainer.book_episodes([200.0])
    first.returns = [1.0]
    row = trainer.row(first)
    assert row["env_steps"] == 1_000 and row["train_return"] == 20.0 and row["loss"] == 0.5
    assert row["env_steps_per_s"] == pytest.approx(1_000 / row["time_s"])
    second = trainer.snapshot({}, {}, 80)
    second.returns = [2.0]
    row = trainer.row(second)
    assert row["train_return"] == 200.0
    assert row["updates_per_s"] == pytest.approx(30 / (second.counters.time_s
                                                       - first.counters.time_s))


# --- settings that cannot work are refused by check(), in one line -------------------------------

CANNOT_WORK = [  # (config, key, value, allowed)
    (ApexConfig, "max_lag_updates", -1, ">= 0"), (ApexConfig, "publish_every", 0, ">= 1"),
    (sac.SACConfig, "learner_chunk", 0, ">= 1"), (ApexConfig, "send_every", 0, ">= 1"),
    (DQNConfig, "steps_per_iteration", 0, ">= 1"), (DQNConfig, "target_update_every", 0, ">= 1"),
    (ApexConfig, "target_update_every", 0, ">= 1"), (DQNConfig, "gamma", 1.5, "[0, 1]"),
    (sac.SACConfig, "gamma", -0.1, "[0, 1]"), (ApexConfig, "n_step", 0, ">= 1"),
    (DQNConfig, "eval_episodes", 0, ">= 1"), (sac.SACConfig, "tau", 0.0, "(0, 1]"),
    (sac.SACConfig, "tau", 1.5, "(0, 1]"), (ApexConfig, "worker_chunk", 0, ">= 1"),
    (sac.SACConfig, "send_every", 0, ">= 1"), (ApexConfig, "pull_every", 0, ">= 1"),
    (ApexConfig, "learner_chunk", 0, ">= 1"), (DQNConfig, "batch_size", 0, ">= 1"),
    (sac.SACConfig, "buffer_size", 0, ">= 1"), (DQNConfig, "lr", 0.0, "> 0"),
    (sac.SACConfig, "lr", float("nan"), "> 0"), (ApexConfig, "eps", 1.5, "[0, 1]"),
    (DQNConfig, "eps_end", -0.1, "[0, 1]"), (ApexConfig, "priority_alpha", -1.0, "[0, 1]"),
    (DQNConfig, "priority_beta", 2.0, "[0, 1]"), (ApexConfig, "num_workers", 0, ">= 1"),
    (sac.SACConfig, "learner_cpus", -1.0, ">= 0"), (ApexConfig, "hidden", (0, 32), ">= 1"),
    (DQNConfig, "hidden", (), ">= 1"), (DQNConfig, "confirm_episodes", -1, ">= 0"),
    (sac.SACConfig, "utd_ratio", 0.0, "> 0"), (sac.SACConfig, "init_alpha", 0.0, "> 0"),
    (ApexConfig, "max_worker_restarts", -1, ">= 0"), (DQNConfig, "replay_ratio", 0.0, "> 0"),
    (DQNConfig, "grad_clip", 0.0, "> 0"), (ApexConfig, "learning_starts", -1, ">= 0"),
    (sac.SACConfig, "max_env_steps", -5, ">= 0"), (ApexConfig, "eval_every_s", -1.0, ">= 0"),
    (ApexConfig, "env_latency_ms", -1.0, "[0, inf)"), (DQNConfig, "num_envs", 0, ">= 1"),
    (sac.SACConfig, "env_latency_ms", float("inf"), "[0, inf)"),
    (DQNConfig, "env_latency_ms", float("nan"), "[0, inf)"),
]


@pytest.mark.parametrize("config,key,value,allowed", CANNOT_WORK,
                         ids=[f"{c.__name__}.{k}={v}" for c, k, v, _ in CANNOT_WORK])
def test_a_setting_that_cannot_work_is_refused_in_one_line(config, key, value, allowed):
    bad = dataclasses.replace(config(), **{key: value})
    with pytest.raises(ValueError) as info:
        bad.check()
    message = str(info.value)
    assert f"'{key}'" in message and allowed in message and "\n" not in message


@pytest.mark.parametrize("config", [DQNConfig, ApexConfig, sac.SACConfig])
@pytest.mark.parametrize("quick", [False, True])
def test_the_presets_and_budgets_switched_off_pass_the_check(config, quick):
    config.preset(quick=quick).check()
    config().updated({"max_env_steps": None, "max_time_s": None, "target_return": None}).check()


WRONG_TYPE = [(ApexConfig, "num_workers", "auto", "must be int"),
              (DQNConfig, "lr", "fast", "must be"), (sac.SACConfig, "seed", 1.5, "must be int"),
              (DQNConfig, "batch_size", True, "must be an int")]


@pytest.mark.parametrize("config,key,value,said", WRONG_TYPE,
                         ids=[f"{c.__name__}.{k}={v!r}" for c, k, v, _ in WRONG_TYPE])
def test_a_wrongly_typed_field_built_into_the_constructor_is_refused_in_one_line(
        config, key, value, said):
    # the constructor does not check types; check() does, before the limits compare a string
    # with a number (a raw TypeError from `>=` before)
    with pytest.raises(ValueError) as info:
        config(**{key: value}).check()
    message = str(info.value)
    assert f"'{key}'" in message and said in message and "\n" not in message
