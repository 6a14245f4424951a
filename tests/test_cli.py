"""Tests for the command line (course_lib.cli) and the run folder (course_lib.runs).

Bad input is checked in-process (fast: torch and Ray load once) and, for a sample of the
errors, through `python -m course_lib` in a subprocess; one short Ape-X run goes end to end
through the real command line in quick mode.
"""

import csv
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys

import pytest

from course_lib import cli, results, runs
from course_lib.runs import (
    CheckpointError,
    Run,
    load_checkpoint,
    save_checkpoint,
)

ROW = {"iteration": 1, "time_s": 0.5, "env_steps": 100, "learner_updates": 7,
       "eval_return": 12.5, "train_return": math.nan}


# --- TensorBoard event files, read back with TensorBoard's own reader ----------------------------

def read_events(folder):
    """The run's event file as TensorBoard itself loads it."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    return EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0}).Reload()


def test_tensorboard_shows_each_number_of_a_row_against_env_steps(tmp_path):
    run = Run.create(tmp_path, "apex", "CartPole-v1", {"lr": 0.001, "net": {"hidden": 64}})
    run.log(ROW)
    run.log({**ROW, "iteration": 2, "env_steps": 250, "eval_return": 20.0, "train_return": 3.5,
             "replay_size": 250})
    run.close()
    events = read_events(run.path)
    scalars = events.Tags()["scalars"]
    assert set(scalars) == {"iteration", "time_s", "learner_updates", "eval_return",
                            "train_return", "replay_size"}           # no env_steps, no NaN
    assert [(e.step, e.value) for e in events.Scalars("eval_return")] == [(100, 12.5),
                                                                         (250, 20.0)]
    assert [(e.step, e.value) for e in events.Scalars("train_return")] == [(250, 3.5)]
    [text] = events.Tensors("hyperparameters/text_summary")
    table = text.tensor_proto.string_val[0].decode()
    assert table.splitlines() == ["|param|value|", "|-|-|", "|lr|0.001|", "|net.hidden|64|"]


def test_tensorboard_reads_a_run_that_is_still_open(tmp_path):
    """flush_secs=1: a TensorBoard opened beside a running training follows it. Checked
    without a clock: the writer's own flush, which its background thread calls every second."""
    run = Run.create(tmp_path, "sac", "Pendulum-v1", {})
    assert run.events.flush_secs == 1
    run.log(ROW)
    run.events.flush()                               # what the thread does each second
    assert [e.step for e in read_events(run.path).Scalars("eval_return")] == [100]
    run.close()


# --- the run folder and checkpoints -------------------------------------------------------------

def test_run_folder_has_params_progress_and_events(tmp_path):
    run = Run.create(tmp_path, "apex", "ALE/Pong-v5", {"lr": 0.001, "nested": {"a": 1}})
    run.log(ROW)
    run.log({**ROW, "iteration": 2, "env_steps": 200, "train_return": 9.0})
    run.close()
    assert run.path.parent == tmp_path and run.path.name.startswith("apex_ALE-Pong-v5_")
    assert json.loads((run.path / "params.json").read_text())["nested"] == {"a": 1}
    rows = list(csv.DictReader(open(run.path / "progress.csv")))
    assert list(rows[0]) == list(ROW)
    assert [r["env_steps"] for r in rows] == ["100", "200"]
    lines = [json.loads(line) for line in open(run.path / "result.json")]
    assert lines[0]["train_return"] is None and lines[1]["train_return"] == 9.0
    assert len(list(run.path.glob("events.out.tfevents.*"))) == 1
    again = Run.create(tmp_path, "apex", "ALE/Pong-v5", {})          # same second: new name
    assert again.path != run.path
    again.close()


def fake_state(iteration, algo="apex", env_id="CartPole-v1"):
    return {"algo": algo, "env_id": env_id, "iteration": iteration,
            "counters": {"env_steps": 10 * iteration}, "config": {"lr": 0.001},
            "learner": {"updates": iteration}}


def test_checkpoints_keep_the_newest_n_and_load_back(tmp_path):
    run = Run(tmp_path, checkpoint_freq=2, keep_checkpoints=2)
    assert [i for i in range(1, 7) if run.checkpoint_due(i)] == [2, 4, 6]
    for i in (2, 4, 6):
        run.save_checkpoint(fake_state(i))
    run.close()
    assert [p.name for p in runs.list_checkpoints(tmp_path)] == ["checkpoint_000004",
                                                                    "checkpoint_000006"]
    state = load_checkpoint(tmp_path)                                # a run folder: newest
    assert state["iteration"] == 6 and state["counters"]["env_steps"] == 60
    assert load_checkpoint(tmp_path / "checkpoints" / "checkpoint_000004")["iteration"] == 4


def test_bad_checkpoints_raise_one_clear_error(tmp_path):
    folder = save_checkpoint(tmp_path / "ck", fake_state(1))
    with pytest.raises(CheckpointError, match="no checkpoint at"):
        load_checkpoint(tmp_path / "missing")
    with pytest.raises(CheckpointError, match="from algorithm 'apex', not 'sac'"):
        load_checkpoint(folder, algo="sac")
    with pytest.raises(CheckpointError, match="trained on CartPole-v1, not Acrobot-v1"):
        load_checkpoint(folder, env_id="Acrobot-v1")
    (folder / "state.pt").write_bytes(b"not a torch file")
    with pytest.raises(CheckpointError, match="corrupt checkpoint .*state.pt does not load"):
        load_checkpoint(folder)
    (folder / "meta.json").write_text("{broken")
    with pytest.raises(CheckpointError, match="corrupt checkpoint .*meta.json"):
        load_checkpoint(folder)


# --- bad input: one line on stderr, exit status 2 -----------------------------------------------

@pytest.fixture(scope="module")
def dqn_checkpoint(tmp_path_factory):
    """A real (tiny) DQN checkpoint, trained through the command line in-process."""
    out = tmp_path_factory.mktemp("dqn")
    code = cli.main(["train", "--algo", "dqn", "--quiet", "--results-dir", str(out),
                     "--stop", '{"env_steps": 400, "eval_return": null}',
                     "--config", '{"steps_per_iteration": 200, "learning_starts": 100, '
                     '"hidden": [16], "eval_episodes": 1}', "--checkpoint-at-end"])
    assert code == 0
    [run] = out.iterdir()
    return run


def corrupt(checkpoint, tmp_path, what):
    copy = tmp_path / "ck"
    shutil.copytree(runs.find_checkpoint(checkpoint), copy)
    if what == "meta":
        (copy / "meta.json").write_text("{not json")
    else:
        (copy / "state.pt").write_bytes(b"\x00garbage")
    return str(copy)


BAD_TRAIN = {
    "unknown algorithm": (["--algo", "dqm"], "unknown algorithm 'dqm'; did you mean 'dqn'"),
    "unknown env": (["--env", "CartPol-v1"], "unknown environment 'CartPol-v1'; did you mean "
                    "CartPole-v1"),
    "continuous env": (["--env", "Pendulum-v1"], "use --algo sac"),
    "malformed stop": (["--stop", "{eval_return: 475}"], "--stop is not valid JSON"),
    "stop not an object": (["--stop", "[475]"], "--stop must be a JSON object"),
    "unknown stop key": (["--stop", '{"reward": 475}'], "unknown criterion 'reward'"),
    "ill-typed stop": (["--stop", '{"time_s": "soon"}'], "time_s must be a number"),
    "negative budget": (["--stop", '{"env_steps": -5}'], "env_steps must be >= 0"),
    "malformed config": (["--config", '{"lr": }'], "--config is not valid JSON"),
    "unknown config key": (["--config", '{"lrate": 0.1}'], "unknown config key 'lrate'"),
    "ill-typed config key": (["--config", '{"batch_size": 6.5}'], "'batch_size' must be int"),
    "zero workers": (["--num-workers", "0"], "--num-workers: must be a positive integer"),
    "negative workers": (["--num-workers", "-3"], "must be a positive integer"),
    "workers via config": (["--config", '{"num_workers": 0}'], "'num_workers' must be >= 1"),
    "buffer below a batch": (["--config", '{"buffer_size": 10}'],
                             "buffer_size 10 is smaller than one sample request"),
    "missing checkpoint": (["--restore", "/nonexistent/ck"], "no checkpoint at /nonexistent"),
}


@pytest.mark.parametrize("args,message", BAD_TRAIN.values(), ids=BAD_TRAIN.keys())
def test_bad_train_input_is_one_line_and_exit_2(capsys, tmp_path, args, message):
    code = cli.main(["train", "--results-dir", str(tmp_path), *args])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert message in err
    assert not list(tmp_path.iterdir())                     # nothing started, nothing written


CANNOT_WORK = {  # settings that would hang or crash inside an actor: refused before Ray starts
    "apex lag": ("apex", '{"max_lag_updates": -1}', "'max_lag_updates' must be >= 0, got -1"),
    "apex publish": ("apex", '{"publish_every": 0}', "'publish_every' must be >= 1"),
    "sac tau": ("sac", '{"tau": 0}', "'tau' must be in (0, 1], got 0.0"),
    "sac gamma": ("sac", '{"gamma": 1.01}', "'gamma' must be in [0, 1]"),
    "dqn steps": ("dqn", '{"steps_per_iteration": 0}', "'steps_per_iteration' must be >= 1"),
    "dqn n_step": ("dqn", '{"n_step": 0}', "'n_step' must be >= 1"),
}


@pytest.mark.parametrize("algo,config,message", CANNOT_WORK.values(), ids=CANNOT_WORK.keys())
def test_a_setting_that_cannot_work_ends_in_one_line_before_ray_starts(
        capsys, monkeypatch, tmp_path, algo, config, message):
    def no_ray(*args, **kwargs):
        raise AssertionError("Ray was started")

    monkeypatch.setattr("ray.init", no_ray)
    code = cli.main(["train", "--algo", algo, "--results-dir", str(tmp_path), "--config", config])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ")
    assert message in err and not list(tmp_path.iterdir())


@pytest.mark.parametrize("what", ["meta", "state"])
def test_corrupt_checkpoint_is_refused(capsys, tmp_path, dqn_checkpoint, what):
    code = cli.main(["train", "--restore", corrupt(dqn_checkpoint, tmp_path, what)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "corrupt checkpoint" in err


def test_checkpoint_from_another_algorithm_or_env_is_refused(capsys, dqn_checkpoint):
    assert cli.main(["train", "--algo", "apex", "--restore", str(dqn_checkpoint)]) == 2
    assert "is from algorithm 'dqn', not 'apex'" in capsys.readouterr().err
    assert cli.main(["train", "--env", "Acrobot-v1", "--restore", str(dqn_checkpoint)]) == 2
    assert "trained on CartPole-v1, not Acrobot-v1" in capsys.readouterr().err
    assert cli.main(["evaluate", "/nonexistent"]) == 2
    assert capsys.readouterr().err.startswith("error: no checkpoint at")


def test_restore_with_a_config_that_does_not_fit_is_refused(capsys, dqn_checkpoint):
    code = cli.main(["train", "--restore", str(dqn_checkpoint), "--config", '{"hidden": [8]}'])
    assert code == 2
    assert "does not fit this config" in capsys.readouterr().err


@pytest.mark.skipif(importlib.util.find_spec("Box2D") is not None, reason="box2d is installed")
def test_env_with_a_missing_dependency_is_one_line(capsys):
    assert cli.main(["train", "--env", "LunarLander-v3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot make LunarLander-v3:") and err.count("\n") == 1


def test_dqn_has_no_workers(capsys):
    assert cli.main(["train", "--algo", "dqn", "--num-workers", "2"]) == 2
    assert "dqn runs in a single process" in capsys.readouterr().err


# --- restore and evaluate (single-process DQN: no Ray needed) -----------------------------------

def test_restore_through_the_command_line_continues_the_counters(capsys, tmp_path,
                                                                 dqn_checkpoint):
    code = cli.main(["train", "--restore", str(dqn_checkpoint), "--quiet",
                     "--results-dir", str(tmp_path), "--stop", '{"env_steps": 600}'])
    assert code == 0
    out = capsys.readouterr().out
    assert "after 600 env steps" in out
    assert "resuming " in out and "stops at env_steps >= 600 (the new --stop" in out
    [run] = tmp_path.iterdir()
    rows = list(csv.DictReader(open(run / "progress.csv")))
    assert [(r["iteration"], r["env_steps"]) for r in rows] == [("3", "600")]
    params = json.loads((run / "params.json").read_text())
    assert params["restored_from"].endswith("checkpoint_000002")
    assert params["config"]["hidden"] == [16]                 # the checkpoint's config


def test_a_resume_takes_the_new_stop_and_trains_past_the_checkpoint(capsys, tmp_path):
    """The checkpoint met its own goal (eval_return -1000, which the bound of any 3 CartPole
    episodes clears); a resume with a new --stop trains on under the new criteria only, not
    the old goal."""
    first, resumed = tmp_path / "first", tmp_path / "resumed"
    code = cli.main(["train", "--algo", "dqn", "--quiet", "--results-dir", str(first),
                     "--stop", '{"eval_return": -1000, "env_steps": 10000}',
                     "--checkpoint-at-end", "--config", '{"steps_per_iteration": 200, '
                     '"learning_starts": 100, "hidden": [16], "eval_episodes": 3, '
                     '"confirm_episodes": 0}'])
    assert code == 0
    [run] = first.iterdir()
    checkpoint_steps = load_checkpoint(run)["counters"]["env_steps"]
    assert checkpoint_steps == 200
    capsys.readouterr()
    code = cli.main(["train", "--restore", str(run), "--quiet", "--results-dir", str(resumed),
                     "--stop", '{"env_steps": 600}'])
    out = capsys.readouterr().out
    assert code == 0, out
    [line] = [line for line in out.splitlines() if line.startswith("resuming ")]
    assert "at 200 env steps" in line and "stops at env_steps >= 600 (the new --stop" in line
    [new_run] = resumed.iterdir()
    rows = list(csv.DictReader(open(new_run / "progress.csv")))
    assert int(rows[-1]["env_steps"]) == 600 > checkpoint_steps
    assert "finished the env_steps budget" in out


@pytest.mark.parametrize("stop, message", [
    (None, "already used up the budget env_steps >= 400 (it has 400"),
    ('{"env_steps": 300}', "already used up the budget env_steps >= 300 (it has 400"),
    ('{"eval_return": -5, "env_steps": 800}', "already reached the goal eval_return >= -5.0"),
])
def test_a_resume_under_criteria_the_checkpoint_already_meets_is_refused(capsys, tmp_path,
                                                                         dqn_checkpoint, stop,
                                                                         message):
    argv = ["train", "--restore", str(dqn_checkpoint), "--quiet", "--results-dir", str(tmp_path)]
    assert cli.main(argv + (["--stop", stop] if stop else [])) == 2
    err = capsys.readouterr().err
    assert message in err and "--stop" in err and err.count("\n") == 1
    assert not list(tmp_path.iterdir())                     # refused before a run folder


def test_help_config_lists_every_key_with_its_meaning(capsys):
    from course_lib.sac import SACConfig

    assert cli.main(["train", "--algo", "sac", "--help-config"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(SACConfig().to_dict())
    [tau] = [line for line in lines if line.startswith("tau ")]
    assert tau.split()[1:3] == ["float", "0.05"] and "Polyak" in tau
    assert all(len(line.split()) >= 4 for line in lines)        # every key has a meaning


def test_evaluate_reports_mean_and_std(capsys, dqn_checkpoint):
    assert cli.main(["evaluate", str(dqn_checkpoint), "--episodes", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("dqn CartPole-v1 checkpoint_000002 (weights version ")
    assert "over 3 episodes" in out


def test_render_without_pygame_says_so(capsys, tmp_path, dqn_checkpoint, monkeypatch):
    import gymnasium as gym
    from gymnasium.envs.classic_control.cartpole import CartPoleEnv

    def missing(self):
        raise gym.error.DependencyNotInstalled("pygame is not installed, run `pip install pygame`")

    monkeypatch.setattr(CartPoleEnv, "render", missing)
    code = cli.main(["evaluate", str(dqn_checkpoint), "--render", "--out",
                     str(tmp_path / "ep.gif")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "pygame" in err
    assert not (tmp_path / "ep.gif").exists()


def test_evaluate_render_writes_the_first_episode(capsys, tmp_path, dqn_checkpoint):
    from PIL import Image

    out = tmp_path / "ep.gif"
    assert cli.main(["evaluate", str(dqn_checkpoint), "--episodes", "2", "--render",
                     "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    frames = int(printed.split("first episode (")[1].split(" frames")[0])
    with Image.open(out) as gif:
        assert gif.size == (600, 400) and gif.n_frames >= 2     # CartPole's own picture size
        shown_ms = 0
        for i in range(gif.n_frames):               # Pillow merges identical neighbours and
            gif.seek(i)                             # adds up their durations
            shown_ms += gif.info["duration"]
    # the start state and every step after it, 33 ms each, stored in hundredths of a second
    assert shown_ms == frames * 30


def test_write_gif_with_pillow(tmp_path):
    import numpy as np
    from PIL import Image

    from course_lib.viz import render

    frames = [np.full((8, 8, 3), i * 40, np.uint8) for i in range(4)]
    render.write_gif(frames, tmp_path / "a.gif")
    with Image.open(tmp_path / "a.gif") as gif:
        assert gif.n_frames == 4


# --- through `python -m course_lib` --------------------------------------------------------------

def run_cli(*args, env=None, timeout=240):
    return subprocess.run([sys.executable, "-m", "course_lib", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("args,message", [
    (["train", "--algo", "ppo"], "unknown algorithm 'ppo'"),
    (["evaluate", "/nonexistent/checkpoint"], "no checkpoint at"),
    (["train", "--config", '{"gamma": "high"}'], "'gamma' must be float"),  # loads torch
    (["train", "--config", '{"send_every": 0}'], "'send_every' must be >= 1, got 0"),
], ids=["algo", "checkpoint", "config", "range"])
def test_errors_through_python_m(args, message):
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ")
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_end_to_end_apex_run_in_quick_mode(tmp_path, capsys, ray_local):
    """A short Ape-X run through the real command line, then its checkpoint evaluated.

    The command joins the tests' Ray instance (RAY_ADDRESS) instead of starting its own.
    """
    address = ray_local.get_runtime_context().gcs_address
    proc = run_cli("train", "--algo", "apex", "--env", "CartPole-v1", "--num-workers", "2",
                   "--stop", '{"eval_return": null, "env_steps": 1500}',
                   "--config", '{"hidden": [32], "eval_every_s": 1.5}',
                   "--checkpoint-freq", "1", "--checkpoint-at-end",
                   "--keep-checkpoints", "2", "--results-dir", str(tmp_path),
                   env={"RAY_ADDRESS": address})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    [summary] = proc.stdout.strip().splitlines()
    assert summary.startswith("apex CartPole-v1: finished the env_steps budget")
    [run] = tmp_path.iterdir()
    assert run.name.startswith("apex_CartPole-v1_")
    params = json.loads((run / "params.json").read_text())
    assert params["algo"] == "apex" and params["config"]["num_workers"] == 2
    rows = list(csv.DictReader(open(run / "progress.csv")))
    for key in results.ROW_KEYS:
        assert key in rows[0]
    assert int(rows[-1]["env_steps"]) >= 1500
    steps = [int(r["env_steps"]) for r in rows]
    assert steps == sorted(steps)
    assert list(run.glob("events.out.tfevents.*"))
    extras = json.loads((run / "extras.json").read_text())
    assert len(extras["worker_returns"]) == len(extras["worker_nodes"]) == 2
    assert extras["worker_nodes"] == [ray_local.get_runtime_context().get_node_id()] * 2
    checkpoints = runs.list_checkpoints(run)
    assert 1 <= len(checkpoints) <= 2
    assert checkpoints[-1].name == f"checkpoint_{int(rows[-1]['iteration']):06d}"
    meta = json.loads((checkpoints[-1] / "meta.json").read_text())
    assert meta["algo"] == "apex" and meta["counters"]["env_steps"] == int(rows[-1]["env_steps"])

    assert cli.main(["evaluate", str(run), "--episodes", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"apex CartPole-v1 {checkpoints[-1].name} (weights version "
                          f"{meta['weights_version']}, ")


@pytest.mark.parametrize("args", [["--num-workers", "auto"],
                                  ["--config", '{"num_workers": "auto"}']],
                         ids=["flag", "config"])
def test_auto_workers_start_the_count_the_model_picks_and_say_why(
        capsys, monkeypatch, tmp_path, args):
    """`--num-workers auto` measures the costs (here: fixed ones where the learner binds at 2
    explorers), prints the model's reason, and the run starts with that count."""
    from course_lib import sizing
    from course_lib.apex import ApexTrainer
    from tests.test_sizing import LEARNER_BOUND

    monkeypatch.setattr(sizing, "measure_costs", lambda cfg, seconds: LEARNER_BOUND)
    started = []

    def no_training(cfg, **kwargs):
        started.append(cfg)
        raise KeyboardInterrupt

    monkeypatch.setattr(ApexTrainer, "train", no_training)
    code = cli.main(["train", "--algo", "apex", "--results-dir", str(tmp_path), *args])
    out = capsys.readouterr().out
    assert code == cli.EXIT_INTERRUPTED and [cfg.num_workers for cfg in started] == [2]
    assert out.startswith("--num-workers auto: 2 explorer(s): each explorer gives 1,818 ")
    [run] = tmp_path.iterdir()
    assert json.loads((run / "params.json").read_text())["config"]["num_workers"] == 2


@pytest.mark.parametrize("args", [["--num-workers", "auto"],
                                  ["--config", '{"num_workers": "auto"}']],
                         ids=["flag", "config"])
def test_auto_workers_are_for_ape_x_only(capsys, tmp_path, args):
    assert cli.main(["train", "--algo", "sac", "--results-dir", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err
    assert err == ("error: --num-workers auto sizes Ape-X's explorers only; give --algo sac a "
                   "number of workers\n") and not list(tmp_path.iterdir())
    assert cli.main(["train", "--num-workers", "some"]) == 2
    assert "--num-workers: must be a positive integer, got 'some'" in capsys.readouterr().err
