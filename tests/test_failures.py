"""A run never hangs and never blames the wrong part: episodes without a time limit end, the
driver stops waiting at max_time_s, a failed start frees every actor, a failure names the
actor at fault, unawaited calls are checked, and a crash has its own exit status."""

import threading

import gymnasium as gym
import numpy as np
import pytest
import ray

from course_lib import cli, envs, results, runs
from course_lib.apex import ApexConfig, ApexLearnerActor, ApexTrainer
from course_lib.distributed import remote_learner
from course_lib.dqn import DQNConfig, DQNTrainer
from course_lib.errors import ActorFailedError, OutOfTime, StartError
from course_lib.trainer import Trainer, TrainerConfig, run_training

TINY_APEX = ApexConfig.preset(quick=True).updated({
    "num_workers": 1, "hidden": (16,), "learning_starts": 200, "batch_size": 16,
    "worker_chunk": 100, "learner_chunk": 20, "eval_every_s": 0.5,
    "eval_episodes": 1, "confirm_episodes": 0, "target_return": None, "max_env_steps": None,
    "max_time_s": 300.0})


# ---------------------------------------------------------------------------------------------
# Fixture envs: one that never ends an episode, one that returns NaN
# ---------------------------------------------------------------------------------------------

class NeverEnds(gym.Env):
    """-1 per step, never terminated, no time limit of its own: a greedy policy that walks into
    a wall forever. Raises past 5,000 steps, so that a missing cap fails instead of hanging."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, nan_at: int | None = None):
        self.nan_at, self.t = nan_at, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        if self.t > 5_000:
            raise RuntimeError("this episode would never end")
        obs = np.full(2, np.nan if self.t == self.nan_at else 0.0, np.float32)
        return obs, -1.0, False, False, {}


gym.register("NeverEnds-v0", entry_point=NeverEnds, max_episode_steps=None,
             disable_env_checker=True)
gym.register("NanAtFive-v0", entry_point=NeverEnds, kwargs={"nan_at": 5},
             disable_env_checker=True)


@pytest.fixture
def short_cap(monkeypatch):
    monkeypatch.setattr(envs, "DEFAULT_TIME_LIMIT", 50, raising=False)


def test_an_evaluation_of_an_env_without_a_time_limit_ends_at_the_cap(short_cap):
    returns = envs.evaluate_policy(lambda obs: np.zeros(len(obs), int), "NeverEnds-v0", 3, 0)
    np.testing.assert_array_equal(returns, [-50.0, -50.0, -50.0])
    assert envs.make_env("CartPole-v1").spec.max_episode_steps == 500   # its own limit kept


def test_dqn_training_episodes_without_a_time_limit_end_too(short_cap):
    cfg = DQNConfig(env_id="NeverEnds-v0", hidden=(8,), steps_per_iteration=200,
                    learning_starts=100, batch_size=16, eval_episodes=1, confirm_episodes=0,
                    target_return=None)
    trainer = DQNTrainer(cfg)
    try:
        row = trainer.step()
    finally:
        trainer.close()
    assert row["episodes"] == 4 and row["train_return"] == -50.0 and row["eval_return"] == -50.0


def test_dqn_stops_collecting_when_the_clock_runs_out():
    cfg = DQNConfig(env_id="NeverEnds-v0", hidden=(8,), steps_per_iteration=10**9,
                    learning_starts=100, batch_size=16, eval_episodes=1, confirm_episodes=0,
                    target_return=None, max_time_s=0.5)
    trainer = DQNTrainer(cfg)       # an iteration (and an episode) longer than the budget
    try:
        row = trainer.step()
    finally:
        trainer.close()
    assert row["env_steps"] < 10**9 and results.stop_reason(row, cfg) == "time_s"


def test_evaluate_policy_closes_its_envs_when_an_episode_raises(monkeypatch):
    made, closed = [], []
    make_env = envs.make_env

    def tracking_make_env(env_id, **kwargs):
        env = make_env(env_id, **kwargs)
        close = env.close
        env.close = lambda: (closed.append(env), close())
        made.append(env)
        return env

    monkeypatch.setattr(envs, "make_env", tracking_make_env)
    with pytest.raises(envs.NonFiniteError):
        envs.evaluate_policy(lambda obs: np.zeros(len(obs), int), "NanAtFive-v0", 3, 0)
    assert len(made) == 3 and len(closed) == 3


# ---------------------------------------------------------------------------------------------
# The clock runs out in the middle of an iteration
# ---------------------------------------------------------------------------------------------

class Stub(Trainer):
    """Scores its first snapshot, then runs out of time in the middle of the second step."""

    algo = "stub"
    updates_per_transition = 0.25

    def step(self):
        if self.counters.iteration:
            raise OutOfTime("the time budget ran out; that iteration was dropped")
        snap = self.snapshot({"w": 1}, {"w": np.zeros(1)}, 0)
        snap.returns = [1.0]
        return self.row(snap)

    def close(self):
        pass


def test_a_run_that_runs_out_of_time_mid_iteration_ends_on_its_last_scored_snapshot(tmp_path):
    cfg = TrainerConfig(target_return=None, max_env_steps=None, max_time_s=60.0)
    run = runs.Run.create(tmp_path, "stub", "CartPole-v1", {}, checkpoint_at_end=True)
    result = run_training(Stub(cfg), cfg, run=run)
    run.close()
    assert result.stopped_by == "time_s" and len(result.history) == 1
    assert result.checkpoint is not None and "dropped" in result.summary("stub", "CartPole-v1")
    never_scored = Stub(cfg)
    never_scored.counters.iteration = 1      # its first step already runs out of time
    with pytest.raises(OutOfTime):              # nothing scored at all: no result to return
        run_training(never_scored, cfg)


def hanging_score(net, episodes, seed, calls=[]):       # noqa: B006 (the evaluator's count)
    """Scores the first snapshot, then hangs (for two minutes: long enough to be sure the
    driver stopped waiting, short enough that the old code fails instead of hanging)."""
    calls.append(1)
    if len(calls) > 1:
        threading.Event().wait(120)
    return np.zeros(episodes)


class HangingEvaluationApex(ApexTrainer):
    def evaluation_functions(self):
        make_net, _ = super().evaluation_functions()
        return make_net, hanging_score


def test_the_driver_stops_waiting_for_an_evaluation_at_max_time_s(ray_local, by_value):
    cfg = TINY_APEX.updated({"max_time_s": 45.0})   # a first evaluation fits on a busy machine
    result = run_training(HangingEvaluationApex(cfg), cfg)
    assert result.stopped_by == "time_s" and "dropped" in result.note
    assert all(len(row) for row in result.history) and result.weights


# ---------------------------------------------------------------------------------------------
# A failed start frees every actor
# ---------------------------------------------------------------------------------------------

gym.register("DriverOnly-v0", entry_point="gymnasium.envs.classic_control:CartPoleEnv",
             max_episode_steps=100)                # registered here only, not in the actors


class InterruptedApex(ApexTrainer):
    def worker_options(self, index):
        if index == 0:
            raise KeyboardInterrupt                 # Ctrl-C in the middle of start-up
        return super().worker_options(index)


def all_cpus_free(timeout_s: float = 60.0) -> bool:
    """Whether every CPU of the cluster is free again within `timeout_s` (kills are async)."""
    deadline = threading.Event()
    for _ in range(int(timeout_s * 4)):
        if ray.available_resources().get("CPU", 0) >= ray.cluster_resources()["CPU"]:
            return True
        deadline.wait(0.25)
    return False


def test_a_failed_start_frees_every_actor_and_the_next_run_finishes(ray_local):
    with pytest.raises(StartError) as info:
        ApexTrainer(TINY_APEX.updated({"env_id": "DriverOnly-v0"}))
    message = str(info.value)
    assert message.startswith("explorer 0 could not start: ") and "\n" not in message
    assert "DriverOnly" in message and "register the env in a module" in message
    assert all_cpus_free()

    bad_state = {"counters": {}, "learner": {"online": {"no such layer": 1}}}
    with pytest.raises(StartError, match="^learner could not start: ") as info:
        ApexTrainer(TINY_APEX, restore=bad_state)
    assert "\n" not in str(info.value) and all_cpus_free()

    with pytest.raises(KeyboardInterrupt):
        InterruptedApex(TINY_APEX)
    assert all_cpus_free()

    outcome = []                                 # a run that hangs fails here, not forever
    thread = threading.Thread(target=lambda: outcome.append(ApexTrainer.train(
        TINY_APEX.updated({"num_workers": 2, "max_env_steps": 400}))), daemon=True)
    thread.start()
    thread.join(timeout=300)
    assert outcome and outcome[0].stopped_by == "env_steps"


# ---------------------------------------------------------------------------------------------
# A failure names the actor at fault
# ---------------------------------------------------------------------------------------------

def test_a_dead_learner_is_named_as_such(ray_local):
    """The explorers' adds fail too (the learner holds the replay buffer), but the message
    names the learner, the actor at fault."""
    trainer = ApexTrainer(TINY_APEX)
    try:
        trainer.step()
        ray.kill(trainer.learner_actor)
        with pytest.raises(ActorFailedError) as info:
            for _ in range(30):
                trainer.step()
    finally:
        trainer.close()
    assert str(info.value).startswith("the learner died: ")
    assert "\n" not in str(info.value)


class NegativePriorityLearner(ApexLearnerActor.__ray_actor_class__):
    def after_updates(self, batches, infos):
        super().after_updates(batches, [{**info, "priorities": -np.ones_like(info["priorities"])}
                                        for info in infos])


class NegativePriorityApex(ApexTrainer):
    Learner = remote_learner(NegativePriorityLearner)


def failure_of(trainer_class) -> str:
    """The one-line error that ends a run of `trainer_class` (within 60 iterations)."""
    trainer = trainer_class(TINY_APEX)
    try:
        with pytest.raises(ActorFailedError) as info:
            for _ in range(60):
                trainer.step()
    finally:
        trainer.close()
    return str(info.value)


def test_a_failing_priority_update_ends_the_run_naming_the_learner(ray_local, by_value):
    message = failure_of(NegativePriorityApex)
    assert message.startswith("learner failed: ")
    assert "priorities must be >= 0" in message and "\n" not in message


class ShapeShiftingLearner(ApexLearnerActor.__ray_actor_class__):
    """Publishes weights of another layout after its first publish: the parameter server
    refuses them, in a call the learner does not wait for."""

    def publish(self):
        weights = self.learner.get_weights()
        if getattr(self, "published", False):
            weights = {**weights, "extra": np.zeros(3, np.float32)}
        self.published = True
        return self.params.push.remote("policy", weights)


class ShapeShiftingApex(ApexTrainer):
    Learner = remote_learner(ShapeShiftingLearner)


def test_a_failing_unawaited_publish_surfaces_naming_the_call(ray_local, by_value):
    message = failure_of(ShapeShiftingApex)
    assert message.startswith("learner failed: ") and "params.push (publish)" in message
    assert "not awaited" in message and "\n" not in message


def test_a_crash_has_its_own_exit_status_and_one_line(tmp_path, monkeypatch, capsys):
    def crash(*args, **kwargs):
        raise ActorFailedError("the learner died: killed")

    monkeypatch.setattr(DQNTrainer, "train", classmethod(crash))
    code = cli.main(["train", "--algo", "dqn", "--quiet", "--results-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == cli.EXIT_CRASHED == 4 and code not in (cli.EXIT_BUDGET, cli.EXIT_USAGE)
    assert err.startswith("error: the learner died: killed; results so far in ")
    assert err.count("\n") == 1
    assert "ActorFailedError" in next(tmp_path.glob("*/error.txt")).read_text()

