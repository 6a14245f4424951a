"""Faults a distributed run survives, with real Ray: a killed parameter server or evaluator is
restarted and the run goes on; a killed learner ends the run in one line whose command
continues it. (A killed explorer: tests/test_apex.py; the same kills on a schedule, measured:
bench/chaos.py.)"""

import functools
import json
import re
import threading
import time
from types import SimpleNamespace

import numpy as np
import ray
import torch

from bench import chaos
from bench.chaos import kill_the_learner, run_as_printed
from course_lib import cli, runs
from course_lib.apex import ApexConfig, ApexSlots, ApexTrainer
from course_lib.distributed import Call, Role, Round, WeightsFollower
from course_lib.nets import get_weights
from course_lib.param_server import ParameterStoreActor
from course_lib.ray_tools import live_actors

#: a small Ape-X, stepped by hand: a learner that trains from 200 transitions, short iterations
TINY = {"hidden": [16], "learning_starts": 200, "batch_size": 16, "worker_chunk": 100,
        "learner_chunk": 20, "eval_every_s": 0.5, "eval_episodes": 1, "confirm_episodes": 0}
CFG = ApexConfig.preset(quick=True).updated({**TINY, "target_return": None,
                                             "max_env_steps": None, "max_time_s": None})


def ray_restarts(trainer, part: str) -> int:
    """How often Ray has restarted the run's actor `part` (its actor table's count)."""
    name = trainer.actors.ray_name(part)
    return next(a["restarts"] for a in live_actors() if a["name"] == name)


def test_a_killed_parameter_server_is_restarted_and_the_run_goes_on(ray_local):
    """Ray restarts the server empty; the learner publishes again (at the next snapshot at the
    latest) while the workers keep their weights, and a worker restarted meanwhile waits for
    the first weights instead of acting on a random net."""
    trainer = ApexTrainer(CFG.updated({"num_workers": 2}))
    try:
        before = trainer.step()
        ray.kill(trainer.params, no_restart=False)           # as if its process crashed
        ray.kill(trainer.workers[1], no_restart=False)       # restarts while the server is empty
        deadline, rows = time.monotonic() + 300, [trainer.step()]
        while trainer.counters.worker_restarts < 1 or len(rows) < 3:
            assert time.monotonic() < deadline, "explorer 1 never came back"
            rows.append(trainer.step())
        assert ray_restarts(trainer, "parameter server") == 1
        version = ray.get(trainer.params.version.remote("policy"))
        held = ray.get(trainer.workers[1].__ray_call__.remote(lambda w: w.follower.version))
    finally:
        trainer.close()
    assert version >= 1 and held >= 1                        # published again, and followed
    assert rows[-1]["env_steps"] > before["env_steps"]
    assert rows[-1]["learner_updates"] > before["learner_updates"]


def test_the_chaos_of_the_bench_kills_each_part_and_the_run_goes_on(ray_local, monkeypatch):
    """bench/chaos.py's thread, on a faster schedule: the parameter server, the evaluator and an
    explorer killed; Ray brings each back and the run keeps learning after the last kill."""
    monkeypatch.setattr(chaos, "ONCE", [(0.5, "parameter server"), (1.0, "evaluator")])
    monkeypatch.setattr(chaos, "FIRST_WORKER_S", 1.5)
    monkeypatch.setattr(chaos, "WORKER_EVERY_S", 1e6)           # one explorer killed
    trainer = ApexTrainer(CFG.updated({"num_workers": 2}))
    killer = chaos.Chaos(trainer, seed=0)
    try:
        rows = [trainer.step()]
        killer.start()
        deadline = time.monotonic() + 300
        while len(killer.kills) < 3 or any(k["back_s"] is None for k in killer.kills) \
                or trainer.counters.worker_restarts < 1:
            assert time.monotonic() < deadline, f"not all back: {killer.kills}"
            rows.append(trainer.step())
        back, after = rows[-1], [trainer.step()]
        while after[-1]["env_steps"] <= back["env_steps"] \
                or after[-1]["learner_updates"] <= back["learner_updates"]:
            assert time.monotonic() < deadline, f"no progress after the kills: {after}"
            after.append(trainer.step())
    finally:
        killer.stop()
        trainer.close()
    assert [k["actor"] for k in killer.kills[:2]] == ["parameter server", "evaluator"]
    assert killer.kills[2]["actor"] in ("explorer 0", "explorer 1") and len(killer.kills) == 3
    assert all(np.isfinite(r["eval_return"]) for r in after)


def lost(ref) -> bool:
    """Whether the object of `ref` is lost (its owner died), after a moment."""
    try:
        ray.get(ref, timeout=10)
    except ray.exceptions.ObjectLostError:
        return True
    time.sleep(0.2)
    return False


def test_a_worker_keeps_its_weights_when_the_server_dies_after_answering(ray_local):
    """The weights' object dies with the server that put it (Ray's ownership): the worker's
    next pull fails to read it and keeps what it has, instead of ending the run."""
    net = torch.nn.Linear(2, 1)
    server = ParameterStoreActor.remote()
    ray.get(server.push.remote("policy", get_weights(torch.nn.Linear(2, 1))))
    follower = WeightsFollower(server, "policy", net, pull_every=1)
    held = {k: v.copy() for k, v in get_weights(net).items()}

    dying = ParameterStoreActor.remote()
    ray.get(dying.push.remote("policy", {k: v + 1 for k, v in held.items()}))
    ray.get(dying.push.remote("policy", {k: v + 2 for k, v in held.items()}))
    answer = ray.get(dying.pull.remote("policy", -1))        # (2, the weights' object)
    ray.kill(dying)
    deadline = time.monotonic() + 60
    while not lost(answer[1]):                                # Ray learns of it soon after
        assert time.monotonic() < deadline, "the dead server's object is still readable"
    follower.params = SimpleNamespace(pull=SimpleNamespace(remote=lambda *a: ray.put(answer)))
    follower.step(episode_ended=False)
    assert follower.version == 1
    for key, value in get_weights(net).items():
        np.testing.assert_array_equal(value, held[key])
    follower.params = server                                  # the server is back: it follows
    ray.get(server.push.remote("policy", {k: v + 3 for k, v in held.items()}))
    follower.step(episode_ended=False)
    assert follower.version == 2
    np.testing.assert_array_equal(get_weights(net)["weight"], held["weight"] + 3)
    ray.kill(server)


# ---------------------------------------------------------------------------------------------
# The evaluator, killed in the middle of an evaluation
# ---------------------------------------------------------------------------------------------

def slowly(score, net, episodes, seed):
    """`score`, a second later: long enough for a kill to land while it plays."""
    time.sleep(1.0)
    return score(net, episodes=episodes, seed=seed)


class SlowEvaluationApex(ApexTrainer):
    def evaluation_functions(self):
        make_net, score = super().evaluation_functions()
        return make_net, functools.partial(slowly, score)


class KillTheEvaluator(Round):
    """course_lib's round, which kills the evaluator (as a crash would) once, while it plays."""

    killed = False

    def run(self, wait_s):
        if not self.killed and Call(Role.EVALUATE) in self.driver.tasks.values():
            time.sleep(0.3)
            ray.kill(self.driver.evaluator, no_restart=False)
            self.killed = True
        super().run(wait_s)


def test_a_killed_evaluator_is_restarted_and_its_evaluation_played_again(ray_local, by_value):
    trainer = SlowEvaluationApex(CFG.updated({"num_workers": 1}),
                                 slots=ApexSlots(round=KillTheEvaluator))
    try:
        rows = [trainer.step(), trainer.step()]
        restarts = ray_restarts(trainer, "evaluator")
    finally:
        trainer.close()
    assert trainer.round.killed and restarts == 1
    assert [r["eval_episodes"] for r in rows] == [1, 1]      # the killed one played again
    assert all(np.isfinite(r["eval_return"]) for r in rows)


# ---------------------------------------------------------------------------------------------
# The learner, killed: one line, and a command that continues the run
# ---------------------------------------------------------------------------------------------

def test_a_killed_learner_ends_the_run_in_one_line_whose_command_continues_it(
        ray_local, tmp_path, capsys):
    results, ended = tmp_path / "my results", threading.Event()   # a space: it is quoted
    threading.Thread(target=kill_the_learner, args=(results, 2, ended), daemon=True).start()
    try:
        code = cli.main(["train", "--algo", "apex", "--quiet", "--num-workers", "1",
                         "--checkpoint-freq", "1", "--results-dir", str(results),
                         "--config", json.dumps(TINY),
                         "--stop", '{"env_steps": 6000, "eval_return": null, "time_s": null}'])
    finally:
        ended.set()
    err = capsys.readouterr().err
    assert code == cli.EXIT_CRASHED and err.count("\n") == 1, err
    (run,) = results.iterdir()
    checkpoint = runs.list_checkpoints(run)[-1]
    iteration = runs.read_checkpoint_meta(checkpoint)["iteration"]
    assert err.startswith("error: the learner died: ")
    assert f"the last checkpoint is {checkpoint} (iteration {iteration}); continue with: " in err
    command = re.search(r"continue with: (.+); results so far in ", err)[1]

    done = run_as_printed(command, tmp_path)                  # in a shell, as a user would
    assert done.returncode == 0, done.stderr[-2_000:]
    assert done.stdout.startswith(f"resuming {checkpoint} ")
    (continued,) = set(results.iterdir()) - {run}
    rows = [json.loads(line) for line in (continued / "result.json").read_text().splitlines()]
    assert rows[0]["iteration"] == iteration + 1 and rows[-1]["env_steps"] >= 6000
    assert json.loads((continued / "params.json").read_text())["restored_from"] == str(checkpoint)
    assert runs.list_checkpoints(continued)                  # it checkpoints as the first did
