"""Tests for course_lib.sac: the maths on hand-made tensors, the learner, env checks, and one
short run through the command line (quick mode, joining the tests' Ray instance)."""

import csv
import json
import math
import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from course_lib import cli, results, runs, sac
from course_lib.distributed.run_actors import actor_resources
from course_lib.envs import NonFiniteError, check_finite
from course_lib.nets import get_weights
from course_lib.sac import (
    SACConfig,
    SACLearner,
    actor_loss,
    alpha_loss,
    critic_loss,
    polyak_update,
    q_target,
    squashed_gaussian,
)
from course_lib.trainer import updates_due

# --- the squashed Gaussian ----------------------------------------------------------------------


def numerical_log_density(action, mean, std, h=1e-5):
    """log pi(a) by numerical differentiation of the CDF P(tanh(u) <= a) = Phi((atanh a - mu)/s),
    one action dimension at a time (they are independent), in float64."""
    normal = torch.distributions.Normal(mean, std)

    def cdf(a):
        return normal.cdf(torch.atanh(a))

    density = (cdf(action + h) - cdf(action - h)) / (2 * h)
    return density.log().sum(-1)


def test_log_prob_matches_a_numerical_change_of_variables():
    torch.manual_seed(0)
    mean = torch.tensor([[0.3, -1.2], [2.0, 0.0], [-0.5, 0.8]], dtype=torch.float64)
    log_std = torch.tensor([[-0.5, 0.2], [-1.0, 0.5], [0.0, -2.0]], dtype=torch.float64)
    action, log_prob = squashed_gaussian(mean, log_std)
    assert action.shape == (3, 2) and log_prob.shape == (3,)
    assert (action.abs() < 1).all()
    reference = numerical_log_density(action, mean, log_std.exp())
    np.testing.assert_allclose(log_prob.numpy(), reference.numpy(), rtol=1e-5, atol=1e-5)
    # and the same as torch's own transformed distribution
    dist = torch.distributions.TransformedDistribution(
        torch.distributions.Normal(mean, log_std.exp()),
        [torch.distributions.transforms.TanhTransform()])
    np.testing.assert_allclose(log_prob.numpy(), dist.log_prob(action).sum(-1).numpy(),
                               rtol=1e-6, atol=1e-6)


def test_log_prob_stays_finite_where_tanh_saturates_and_gradients_flow():
    mean = torch.tensor([[30.0, -30.0]], requires_grad=True)
    log_std = torch.tensor([[-3.0, -3.0]], requires_grad=True)
    action, log_prob = squashed_gaussian(mean, log_std)
    assert torch.isfinite(log_prob).all()            # naive log(1 - tanh^2) gives -inf here
    log_prob.sum().backward()
    assert torch.isfinite(mean.grad).all() and torch.isfinite(log_std.grad).all()
    det, _ = squashed_gaussian(torch.tensor([[0.5]]), torch.tensor([[0.0]]), deterministic=True)
    assert det.item() == pytest.approx(math.tanh(0.5))


# --- targets and losses on hand-made batches ----------------------------------------------------

def test_q_target_bootstraps_after_truncation_not_after_termination():
    reward = torch.tensor([1.0, 1.0, 1.0])
    # transition 0: mid-episode; 1: the pole fell (terminated); 2: the time limit (truncated:
    # the worker stores terminated=False, so it bootstraps like a mid-episode step)
    terminated = torch.tensor([False, True, False])
    next_q1, next_q2 = torch.tensor([10.0, 10.0, 10.0]), torch.tensor([12.0, 8.0, 9.0])
    next_log_prob = torch.tensor([-1.0, -1.0, 2.0])
    y = q_target(reward, terminated, next_q1, next_q2, next_log_prob, alpha=0.5, gamma=0.9)
    expected = [1 + 0.9 * (10 + 0.5), 1.0, 1 + 0.9 * (9 - 1.0)]   # min Q - alpha log pi
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-6)


def test_losses_on_hand_made_numbers():
    q1, q2, y = torch.tensor([1.0, 2.0]), torch.tensor([0.0, 4.0]), torch.tensor([1.0, 3.0])
    assert critic_loss(q1, q2, y).item() == pytest.approx((0 + 1) / 2 + (1 + 1) / 2)
    log_prob = torch.tensor([-1.0, 0.5])
    assert actor_loss(log_prob, q1, q2, 0.2).item() == pytest.approx(
        ((0.2 * -1 - 0.0) + (0.2 * 0.5 - 2.0)) / 2)


@pytest.mark.parametrize("entropy,direction", [(-3.0, +1), (2.0, -1)])
def test_alpha_rises_when_entropy_is_below_target_and_falls_above(entropy, direction):
    log_alpha = torch.tensor(0.0, requires_grad=True)
    opt = torch.optim.SGD([log_alpha], lr=0.1)
    log_prob = torch.full((8,), -entropy)            # H = -mean log pi
    loss = alpha_loss(log_alpha, log_prob, target_entropy=-1.0)
    opt.zero_grad()
    loss.backward()
    assert log_alpha.grad.item() == pytest.approx(-(-entropy - 1.0))   # -(log pi + H_target)
    opt.step()
    assert np.sign(log_alpha.item()) == direction


def test_polyak_update_moves_targets_by_tau():
    source, target = nn.Linear(2, 1), nn.Linear(2, 1)
    with torch.no_grad():
        for p in source.parameters():
            p.fill_(1.0)
        for p in target.parameters():
            p.fill_(0.0)
    polyak_update(target, source, tau=0.005)
    for p in target.parameters():
        assert torch.allclose(p, torch.full_like(p, 0.005))
    polyak_update(target, source, tau=0.005)
    for p in target.parameters():
        assert torch.allclose(p, torch.full_like(p, 0.005 + 0.995 * 0.005))
    for p in source.parameters():                      # the source is untouched
        assert torch.equal(p, torch.ones_like(p))


# --- the learner --------------------------------------------------------------------------------

def pendulum_batch(rng, n=64):
    return {"obs": rng.standard_normal((n, 3), dtype=np.float32),
            "action": rng.uniform(-1, 1, (n, 1)).astype(np.float32),
            "reward": -rng.random(n).astype(np.float32),
            "next_obs": rng.standard_normal((n, 3), dtype=np.float32),
            "terminated": np.zeros(n, bool)}


def test_learner_update_moves_critics_and_targets_slowly_and_round_trips():
    torch.manual_seed(0)
    learner = SACLearner(3, 1, hidden=(16, 16), tau=0.01, device="cpu")
    before = [p.clone() for p in learner.critic_target.parameters()]
    critic_before = [p.clone() for p in learner.critic.parameters()]
    rng = np.random.default_rng(0)
    info = learner.update(pendulum_batch(rng))
    assert set(info) == {"critic_loss", "actor_loss", "alpha", "entropy", "q_mean"}
    assert info["alpha"] == pytest.approx(1.0)               # alpha used in this update
    for old, new, target in zip(critic_before, learner.critic.parameters(),
                                learner.critic_target.parameters(), strict=True):
        # the target moved 1% of the way towards the updated critic
        torch.testing.assert_close(target, 0.99 * old + 0.01 * new)
    assert any(not torch.equal(a, b) for a, b in zip(before, learner.critic_target.parameters(),
                                                     strict=True))
    for _ in range(5):
        learner.update(pendulum_batch(rng))
    assert learner.updates == 6 and learner.alpha != 1.0
    state = learner.state_dict()
    twin = SACLearner(3, 1, hidden=(16, 16), device="cpu")
    twin.load_state_dict(state)
    assert twin.updates == 6 and twin.alpha == pytest.approx(learner.alpha)
    for name, value in learner.get_weights().items():
        np.testing.assert_array_equal(twin.get_weights()[name], value)


def test_updates_due_and_resources():
    assert updates_due(500, 1.0, 1000) == 0
    assert updates_due(1500, 1.0, 1000) == 500
    assert updates_due(1500, 0.5, 1000) == 250
    for workers in (1, 2, 4):
        res = actor_resources(SACConfig(num_workers=workers), 2.0)
        assert res["learner_gpus"] == 0
        assert res["learner"] + res["evaluator"] + workers * res["worker"] <= 2
    # the GPU is asked for when the config says so, not when one happens to be there: on a
    # cluster whose GPU node starts at zero, that request is what launches it
    assert actor_resources(SACConfig(), 4.0)["learner_gpus"] == 0
    assert actor_resources(SACConfig(learner_gpus=1), 4.0)["learner_gpus"] == 1
    assert actor_resources(SACConfig(), 1.0)["worker"] == 0


def test_uniform_replay_server_for_sac():
    from course_lib.replay import ReplayStore, transition_spec

    spec = transition_spec((3,), action_shape=(1,), action_dtype=np.float32)
    server = ReplayStore(100, spec, seed=0, prioritized=False)
    server.add(pendulum_batch(np.random.default_rng(0), 50))
    batch = server.sample(16)
    assert set(batch) == set(spec) and batch["action"].shape == (16, 1)   # no indices/weights
    assert server.stats()["sampled"] == 16 and server.size() == 50
    with pytest.raises(ValueError, match="samples uniformly"):
        server.add(pendulum_batch(np.random.default_rng(1), 2), priorities=np.ones(2))


# --- environments -------------------------------------------------------------------------------

class NaNAfter(gym.Wrapper):
    """Pendulum whose observations turn to NaN after `after` steps."""

    def __init__(self, after: int = 0):
        super().__init__(gym.make("Pendulum-v1"))
        self.after, self.t = after, 0

    def reset(self, **kwargs):
        self.t = 0
        obs, info = self.env.reset(**kwargs)
        return (obs * np.nan if self.after == 0 else obs), info

    def step(self, action):
        self.t += 1
        obs, *rest = self.env.step(action)
        return (obs * np.nan if self.t >= self.after else obs), *rest


def test_env_checks():
    with pytest.raises(ValueError, match=r"Discrete action space.*use --algo apex"):
        sac.require_continuous(gym.make("CartPole-v1"))
    with pytest.raises(NonFiniteError, match="non-finite observation at env step 0"):
        sac.require_continuous(NaNAfter(0))
    sac.require_continuous(gym.make("Pendulum-v1"))
    with pytest.raises(NonFiniteError, match=r"Bad-v0 was given a non-finite action at env "
                                             r"step 7: \[inf\]"):
        check_finite(np.array([np.inf]), "action", "Bad-v0", 7)


# --- through the command line -------------------------------------------------------------------

BAD = {
    "discrete env": (["--env", "CartPole-v1"], "use --algo apex"),
    "unknown env": (["--env", "Pendulm-v1"], "did you mean Pendulum-v1"),
    "bad stop": (["--stop", '{"eval_return": "high"}'], "eval_return must be a number"),
    "bad config": (["--config", '{"tau": "slow"}'], "'tau' must be float"),
    "zero workers": (["--config", '{"num_workers": 0}'], "'num_workers' must be >= 1"),
}


@pytest.mark.parametrize("args,message", BAD.values(), ids=BAD.keys())
def test_bad_sac_input_is_one_line_and_exit_2(capsys, tmp_path, args, message):
    code = cli.main(["train", "--algo", "sac", "--results-dir", str(tmp_path), *args])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ")
    assert message in err
    assert not list(tmp_path.iterdir())


def run_cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "course_lib", *args], capture_output=True,
                          text=True, timeout=240, env={**os.environ, **(env or {})})


TINY = {"hidden": [32, 32], "start_steps": 300, "learning_starts": 300, "batch_size": 64,
        "eval_every_s": 1.0, "eval_episodes": 2, "worker_chunk": 50, "learner_chunk": 25}


def test_end_to_end_sac_through_the_command_line(tmp_path, capsys, ray_local):
    """Train through `python -m course_lib` (joining the tests' Ray), evaluate, resume."""
    address = ray_local.get_runtime_context().gcs_address
    proc = run_cli("train", "--algo", "sac", "--env", "Pendulum-v1", "--num-workers", "2",
                   "--stop", '{"eval_return": null, "env_steps": 600}',
                   "--config", json.dumps(TINY), "--checkpoint-at-end",
                   "--results-dir", str(tmp_path), env={"RAY_ADDRESS": address})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    # One line of ours. Ray may add its own "(raylet) Task ParameterStoreActor.push failed ...
    # will be retried" line: closing the run can kill the parameter server while a worker's
    # push is in flight (seen in CI under load; the close order is the fix, not made yet).
    ours = [line for line in proc.stdout.strip().splitlines() if "(raylet)" not in line]
    assert len(ours) == 1, proc.stdout
    [summary] = ours
    assert summary.startswith("sac Pendulum-v1: finished the env_steps budget"), proc.stdout
    [run] = tmp_path.iterdir()
    rows = list(csv.DictReader(open(run / "progress.csv")))
    for key in (*results.ROW_KEYS, "alpha", "entropy", "utd", "updates_per_s"):
        assert key in rows[0]
    last = rows[-1]
    assert int(last["env_steps"]) >= 600 and int(last["learner_updates"]) > 0
    # the update-to-data ratio holds: never more updates than transitions past the start
    assert int(last["learner_updates"]) <= int(last["env_steps"]) - TINY["learning_starts"]
    [checkpoint] = runs.list_checkpoints(run)
    extras = json.loads((run / "extras.json").read_text())
    assert extras["learner_device"] == "cpu" and len(extras["worker_returns"]) == 2
    meta = json.loads((checkpoint / "meta.json").read_text())
    assert meta["algo"] == "sac" and meta["config"]["hidden"] == [32, 32]

    assert cli.main(["evaluate", str(run), "--episodes", "2"]) == 0
    assert capsys.readouterr().out.startswith(f"sac Pendulum-v1 {checkpoint.name} (weights "
                                              f"version {meta['weights_version']}, ")

    resumed = tmp_path / "resumed"
    more = int(last["env_steps"]) + 200          # budgets count the whole run
    code = cli.main(["train", "--restore", str(run), "--quiet", "--results-dir", str(resumed),
                     "--stop", json.dumps({"env_steps": more})])
    assert code == 0, capsys.readouterr().err
    [run2] = resumed.iterdir()
    rows2 = list(csv.DictReader(open(run2 / "progress.csv")))
    assert int(rows2[0]["iteration"]) == int(last["iteration"]) + 1
    assert int(rows2[-1]["env_steps"]) >= more                 # trained past the checkpoint
    assert int(rows2[0]["learner_updates"]) >= int(last["learner_updates"])
    assert json.loads((run2 / "params.json").read_text())["algo"] == "sac"


def test_a_worker_stops_at_a_non_finite_observation(ray_local):
    """The worker's own loop (run in this process, so that it sees the test env) refuses the
    first NaN observation, naming the env and the step."""
    from course_lib.distributed import POLICY
    from course_lib.param_server import ParameterStoreActor
    from course_lib.replay import ReplayStoreActor, transition_spec

    gym.register("NaNPendulum-v0", entry_point=NaNAfter, kwargs={"after": 150})
    try:
        cfg = SACConfig.preset(quick=True).updated({**TINY, "env_id": "NaNPendulum-v0"})
        spec = transition_spec((3,), action_shape=(1,), action_dtype=np.float32)
        replay = ReplayStoreActor.options(name="nan:learner").remote(   # stands in for the learner
            1000, spec, prioritized=False)
        params = ParameterStoreActor.options(name="nan:parameter server").remote()
        actor = sac.SquashedGaussianActor(3, 1, tuple(cfg.hidden))
        ray_local.get(params.push.remote(POLICY, get_weights(actor)))
        worker = sac.RolloutWorker.__ray_actor_class__(0, cfg, "nan", 0, sac.SACSlots(),
                                                        random_steps=10)
        out = worker.run(100)
        assert out.replay_inserted == 100 and out.env_steps == 100
        with pytest.raises(NonFiniteError, match="NaNPendulum-v0 gave a non-finite "
                                                 "observation at env step 149"):
            worker.run(100)
    finally:
        gym.registry.pop("NaNPendulum-v0")
        for actor in (replay, params):     # (named: they would outlive the test otherwise)
            ray_local.kill(actor)


def test_a_non_finite_error_mid_run_is_one_line_through_the_cli(capsys, tmp_path,
                                                                 monkeypatch):
    def train(*args, **kwargs):
        raise NonFiniteError("Pendulum-v1 gave a non-finite observation at env step 3: [nan]")

    monkeypatch.setattr(sac.SACTrainer, "train", classmethod(train))
    code = cli.main(["train", "--algo", "sac", "--quiet", "--results-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("error: Pendulum-v1 gave a non-finite observation at env step 3")


def test_a_gpu_learner_on_a_local_instance_without_gpus_is_refused_in_one_line(ray_local,
                                                                                capsys, tmp_path):
    """A local Ray instance has no autoscaler: the learner's GPU would never come, and the run
    would wait for it forever. Refused before any actor starts."""
    from course_lib.distributed.run_actors import check_gpus
    from course_lib.errors import NoGPUError
    from course_lib.ray_tools import started_here

    assert started_here()                       # this test process started the instance
    assert ray_local.cluster_resources().get("GPU", 0) == 0
    with pytest.raises(NoGPUError, match="set learner_gpus 0"):
        sac.SACTrainer.train(SACConfig.preset().updated({"learner_gpus": 1, "num_workers": 1}))
    code = cli.main(["train", "--algo", "sac", "--env", "Pendulum-v1", "--quiet",
                     "--results-dir", str(tmp_path), "--config", '{"learner_gpus": 0.5}'])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: learner_gpus=0.5 but this local Ray instance")
    assert err.count("\n") == 1
    check_gpus(SACConfig(learner_gpus=1), {"CPU": 2.0}, can_add_nodes=True)   # a cluster: wait


def test_negative_learner_gpus_are_refused_before_ray_starts(capsys):
    assert cli.main(["train", "--algo", "sac", "--config", '{"learner_gpus": -1}']) == 2
    assert "'learner_gpus' must be >= 0" in capsys.readouterr().err


def test_the_quick_run_trains_from_learning_starts_and_its_utd_column_is_the_ratio_held(
        ray_local):
    """The SAC run CI executes (the quick preset: 1,500 env steps, learning_starts 400) trains
    from its 400th transition on, not from the 2,048th (batch 256 x 8 batches), and its `utd`
    column reads the ratio the driver holds: updates per transition past the start. The
    learner may trail the ratio by the lag the workers wait for, never lead it."""
    cfg = SACConfig.preset(quick=True)
    assert cfg.max_env_steps < cfg.batch_size * 8   # the old start: 8 batches per request
    result = sac.SACTrainer.train(cfg.updated({"max_time_s": 240.0}))
    last = result.last
    assert result.stopped_by == "env_steps" and last["learner_updates"] > 0
    lag = cfg.max_lag_updates + cfg.learner_chunk + cfg.num_workers * cfg.worker_chunk
    low = cfg.utd_ratio * (1 - lag / (cfg.max_env_steps - cfg.learning_starts))
    assert low <= last["utd"] <= cfg.utd_ratio + 1e-9
