"""A distributed run's actors (`course_lib.distributed.run_actors`): a run that cannot place its
actors ends within its deadline in one line that says what it needs and what holds the CPUs
(issue 36 item 1), and the learner trains on the device it reserved, and only that (item 3)."""

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import ray

from course_lib.apex import ApexConfig, ApexTrainer
from course_lib.distributed import driver as driver_module
from course_lib.distributed.run_actors import held_by, room_report, wait_dead
from course_lib.errors import StartError

ROOT = Path(__file__).resolve().parents[1]

TINY = ApexConfig.preset(quick=True).updated({
    "num_workers": 2, "hidden": (16,), "learning_starts": 200, "batch_size": 16,
    "eval_every_s": 0.5, "eval_episodes": 1, "max_env_steps": 400})


@ray.remote(num_cpus=1)
class Hog:
    """An actor an earlier cell left behind, holding one CPU."""

    def ping(self) -> int:
        return 1


@pytest.fixture
def hogs(ray_local):
    """Two Hogs holding both CPUs of the test's Ray instance, killed after the test."""
    actors = [Hog.remote() for _ in range(2)]
    ray.get([a.ping.remote() for a in actors])
    yield actors
    for actor in actors:
        ray.kill(actor)
    deadline = time.monotonic() + 30
    while ray.available_resources().get("CPU", 0) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)


def finished_within(seconds: float, fn) -> list:
    """[fn's result or exception] if fn returned within `seconds`, else [] (it hung)."""
    outcome = []

    def run():
        try:
            outcome.append(fn())
        except BaseException as err:       # noqa: BLE001  (handed to the test)
            outcome.append(err)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=seconds)
    return outcome


def test_held_by_names_the_actors_that_hold_cpus(hogs):
    assert held_by() == "2 Hog actors (1 CPU each)"
    assert room_report().startswith("0 of 2 CPUs are free; 2 Hog actors (1 CPU each) hold the "
                                    "rest, left by an earlier run: restart the kernel")


def test_a_run_that_cannot_place_its_actors_is_refused_at_once_naming_what_holds_them(hogs):
    outcome = finished_within(60, lambda: ApexTrainer(TINY))
    assert outcome, "the run waited for CPUs that never came"
    err = outcome[0]
    assert isinstance(err, StartError), err
    assert str(err).startswith("the run cannot place its actors: the learner needs 0.5 CPU")
    assert "2 Hog actors (1 CPU each) hold the rest" in str(err) and "\n" not in str(err)


def test_an_actor_that_cannot_start_ends_the_run_within_its_deadline(hogs, monkeypatch):
    """Past the up-front check (on a cluster, say, where more CPUs may come): an actor Ray
    cannot place ends the run at the deadline, `max_time_s` here, with the one line."""
    monkeypatch.setattr(driver_module, "check_room", lambda *args: None)
    started = time.perf_counter()
    outcome = finished_within(120, lambda: ApexTrainer(TINY.updated({"max_time_s": 20.0})))
    assert outcome, "the run waited past its deadline"
    err = outcome[0]
    assert isinstance(err, StartError), err
    assert time.perf_counter() - started < 60         # the deadline, not Ray's patience
    assert str(err).startswith("the learner did not start within 20 s: it needs 0.5 CPU; 0 of 2 "
                               "CPUs are free; 2 Hog actors (1 CPU each) hold the rest")
    assert ray.available_resources().get("CPU", 0) == 0     # only the Hogs: nothing left over


DEVICE = textwrap.dedent('''
    import ray, torch
    from course_lib.apex import ApexConfig, ApexTrainer
    from course_lib.ray_tools import init_ray, reserved_device

    init_ray(num_cpus=2, num_gpus=1)          # a GPU Ray can hand out (none really there)

    @ray.remote(num_cpus=0)
    class Probe:
        def device(self):
            torch.cuda.is_available = lambda: True     # as on a machine with a GPU visible
            return reserved_device()

    @ray.remote(num_cpus=0, num_gpus=1)
    class GpuProbe(Probe.__ray_actor_class__):
        pass

    print("without", ray.get(Probe.remote().device.remote()))
    print("with", ray.get(GpuProbe.remote().device.remote()))
    cfg = ApexConfig.preset(quick=True).updated({"num_workers": 1, "learner_gpus": 0.0})
    trainer = ApexTrainer(cfg)
    print("learner", trainer.learner_device)
    trainer.close()
''')


def test_the_learner_uses_the_device_it_reserved_and_only_that(tmp_path):
    """Ray 2.60 no longer hides GPUs from actors that did not ask for one: `learner_gpus=0`
    must still train on the CPU where a GPU is visible, and an actor that reserved one trains
    on it. (Its own Ray instance, with a GPU resource: the shared one has none.)"""
    script = tmp_path / "device.py"
    script.write_text(DEVICE)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["without", "cpu", "with", "cuda", "learner", "cpu"]


CLOSE = textwrap.dedent('''
import threading, time
import ray
from course_lib import init_ray
from course_lib.distributed.run_actors import RunActors

@ray.remote(max_restarts=-1, max_task_retries=-1)
class Server:                      # as the parameter server: retried calls, restarts
    def push(self, x):
        time.sleep(0.001)
        return x

@ray.remote(num_cpus=0)
class Caller:                      # as the learner: pushes it never waits for
    def __init__(self, server):
        self.server = server
    def start(self):
        def loop():
            while True:
                self.server.push.remote(1)
                time.sleep(0.0005)
        threading.Thread(target=loop, daemon=True).start()

init_ray(num_cpus=1)
actors = RunActors("close-test", time.perf_counter() + 60, 60)
server = actors.add("parameter server", Server.remote(), serves=True)
callers = [actors.add(f"learner {i}", Caller.remote(server)) for i in range(3)]
ray.get([c.start.remote() for c in callers])
time.sleep(1.0)
actors.kill_all()
time.sleep(3.0)                    # Ray's log lines reach the driver's stderr late
for actor in [server, *callers]:
    try:
        ray.get(actor.__ray_ready__.options(max_task_retries=0).remote(), timeout=5)
        print("alive")
    except ray.exceptions.RayActorError:
        print("dead")
''')


def test_closing_kills_the_callers_before_the_server_they_push_to(tmp_path):
    """`kill_all` kills a run's callers first and its parameter server once they are dead: a
    push in flight to a killed server is a task Ray retries (it has `max_task_retries=-1`) and
    reports on stderr, as SAC runs did after every close. Every actor ends dead."""
    script = tmp_path / "close.py"
    script.write_text(CLOSE)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["dead"] * 4
    assert "will be retried" not in done.stderr, done.stderr[-2000:]


@ray.remote(num_cpus=0)
class Pid:
    def pid(self) -> int:
        return os.getpid()


def test_wait_dead_returns_once_a_killed_actors_process_has_exited(ray_local):
    """`ray.kill` marks an actor dead in Ray's table at once, and its process exits later (a
    call to it fails before then): `wait_dead` returns only once the process is gone, so no
    thread of a killed caller still pushes to the server killed next (CI on 494c1de)."""
    actors = [Pid.remote() for _ in range(3)]
    pids = ray.get([actor.pid.remote() for actor in actors])
    for actor in actors:
        ray.kill(actor, no_restart=True)
    wait_dead(actors, timeout_s=30)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
