"""Notebook 03's parts train the agent (`course_lib.teaching.pieces.param`): the solutions of its
`VersionedWeights`, `CachedWeights`, fixed `PrefetchedWeights`, `average_gradients` and
`worker_step`, taken from the notebook, run inside `pg.train_with_param_server`,
`data_parallel.sync_sgd` and `data_parallel.async_sgd`; a blank part falls back to course_lib's
and says so; a wrong part ends the run with one line naming it, never a hang.

The parts are defined as the notebook defines them (in `__main__`, pickled by value by Ray) and
report to a named actor: what the driver reads there was counted where the part ran.
"""

import re
import time

import pytest
import ray
from test_parts import notebook_namespace

from course_lib import data_parallel, pg
from course_lib.teaching import exercises
from course_lib.teaching.pieces import PieceError, slots_for

PG = pg.PGConfig.preset(quick=True).updated({
    "max_iterations": 6, "steps_per_worker": 300, "eval_every": 3, "eval_episodes": 1,
    "confirm_episodes": 1, "hidden": (16,)})
DP = data_parallel.DataParallelConfig.preset(quick=True).updated({"steps": 12, "n_samples": 2_000})

TALLY = '''
@ray.remote(num_cpus=0)
class Tally:
    def __init__(self):
        self.counts = {}

    def count(self, key, n=1):
        self.counts[key] = self.counts.get(key, 0) + n

    def read(self):
        return self.counts


def tell(key):
    ray.get(ray.get_actor("tally").count.remote(key))


@ray.remote
class TalliedVersioned(VersionedWeights.__ray_actor_class__):
    def pull(self, known_version=-1):
        tell("server pulls")
        return super().pull(known_version)


class TalliedCached(CachedWeights):
    def get(self, ps, name):
        tell("cached gets")
        return super().get(ps, name)


class TalliedPrefetched(PrefetchedWeights):
    def latest(self):
        tell("prefetched latests")
        return super().latest()


def tallied_average(grads_list):
    tell("averages")
    return average_gradients(grads_list)


def tallied_step(ps, cache, compute_gradients, lr):
    tell("worker steps")
    return worker_step(ps, cache, compute_gradients, lr)
'''

NAMES = ("VersionedWeights", "CachedWeights", "PrefetchedWeights", "average_gradients",
         "worker_step")


def parts(tag: str) -> dict:
    """The notebook's cells tagged `tag` ("solution" or "exercise") run as a notebook runs them."""
    return notebook_namespace("03", tag, NAMES, "import numpy as np\nimport ray\n"
                              "from course_lib.param_server import pull_weights")


@pytest.fixture(scope="module")
def notebook_main(ray_local):
    namespace = parts("solution")
    exec(TALLY, namespace)
    return namespace


@pytest.fixture
def tally(notebook_main):
    actor = notebook_main["Tally"].options(name="tally").remote()
    yield lambda: ray.get(actor.read.remote())
    ray.kill(actor)


def test_the_solutions_pass_their_checks(notebook_main):
    _, said = exercises.yours(pg.train_with_param_server, **{key: notebook_main[PIECE] for
                                                            key, PIECE in (
        ("versioned_weights", "VersionedWeights"), ("cached_weights", "CachedWeights"),
        ("prefetched_weights", "PrefetchedWeights"))})
    assert said == "parameter server: yours; pull if newer: yours; prefetched pull: yours"
    slots, said = exercises.yours(data_parallel.sync_sgd,
                                  average_gradients=notebook_main["average_gradients"])
    assert said == "gradient average: yours" and list(slots) == ["average"]
    slots, said = exercises.yours(data_parallel.async_sgd,
                                  worker_step=notebook_main["worker_step"],
                                  cached_weights=notebook_main["CachedWeights"])
    assert said == "asynchronous worker step: yours; pull if newer: yours"
    assert list(slots) == ["make_step"]


def test_param_server_pg_runs_on_the_attendees_server_and_pulls(notebook_main, tally):
    _, history = pg.train_with_param_server(PG, **slots_for(pg.train_with_param_server, {
        "versioned_weights": notebook_main["TalliedVersioned"],
        "cached_weights": notebook_main["TalliedCached"],
        "prefetched_weights": notebook_main["TalliedPrefetched"]}))
    counts = tally()
    assert history[-1]["version"] == history[-1]["iteration"] + 1
    # every episode of worker 0 began with a get, of worker 1 with a latest; all reached their
    # server (the prefetched pulls keep going in the background)
    assert counts["cached gets"] > 0 and counts["prefetched latests"] > 0
    assert counts["server pulls"] >= counts["cached gets"]


def test_sync_sgd_averages_with_the_attendees_function(notebook_main, tally):
    history = data_parallel.sync_sgd(DP, **slots_for(data_parallel.sync_sgd, {
        "average_gradients": notebook_main["tallied_average"]}))
    assert tally()["averages"] == DP.steps and history[-1]["update"] == DP.steps


def test_async_sgd_is_driven_by_the_attendees_worker_step(notebook_main, tally):
    history, staleness = data_parallel.async_sgd(DP, **slots_for(data_parallel.async_sgd, {
        "worker_step": notebook_main["tallied_step"],
        "cached_weights": notebook_main["TalliedCached"]}))
    counts, total = tally(), DP.steps * DP.num_workers
    assert counts["worker steps"] == total and counts["cached gets"] == total
    assert len(staleness) == total and min(staleness) >= 0
    assert history[-1]["update"] == total             # the server applied every gradient


def test_blank_parts_fall_back_to_course_libs_and_say_so(ray_local):
    blank = parts("exercise")
    chosen, said = exercises.yours(
        pg.train_with_param_server, versioned_weights=blank["VersionedWeights"],
        cached_weights=blank["CachedWeights"])
    assert chosen == {}
    assert said == "; ".join(f"{title}: course_lib's (yours: not implemented yet.)" for title in (
        "parameter server", "pull if newer"))
    chosen, said = exercises.yours(data_parallel.async_sgd, worker_step=blank["worker_step"])
    assert chosen == {}
    assert said == "asynchronous worker step: course_lib's (yours: not implemented yet.)"
    # the exercise cell of the find-the-bug holds the bug: it fails its check, is left out
    chosen, said = exercises.yours(pg.train_with_param_server,
                                   prefetched_weights=blank["PrefetchedWeights"])
    assert chosen == {} and said.startswith("prefetched pull: course_lib's (yours: after the "
                                            "learner pushed version 2")


WRONG = {
    "the planted bug": ("pg", "prefetched_weights", "PrefetchedWeights", "exercise", "",
                        r"^your PrefetchedWeights broke its contract in rollout worker \d: its "
                        r"pull was answered and latest\(\) sent no new one: no newer weights can "
                        r"arrive \(weights stop arriving\)$"),
    "a server that always sends": ("pg", "versioned_weights", "Always", "solution", '''
@ray.remote
class Always(VersionedWeights.__ray_actor_class__):
    def pull(self, known_version=-1):
        return self.version, self.weights
''', r"^your VersionedWeights broke its contract in the parameter server: pull\(\d+\) at "
     r"version \d+ sent the weights again \(the caller has them: send None\)$"),
    "a sum, not a mean": ("sync", "average_gradients", "summed", "solution", '''
def summed(grads_list):
    return {name: sum(g[name] for g in grads_list) for name in grads_list[0]}
''', r"^your average_gradients broke its contract in the driver: entry '\S+' is not the "
     r"element-wise mean of the 2 workers' gradients$"),
    "a step that hangs": ("async", "worker_step", "stuck", "solution", '''
import threading

def stuck(ps, cache, compute_gradients, lr):
    threading.Event().wait()
''', r"^your worker_step did not return from worker_step\(\) within 2 s in a DataWorker "
     r"actor \(timeout_s\)$"),
}


@pytest.mark.parametrize("kind", list(WRONG))
def test_a_wrong_part_ends_the_run_with_one_line_naming_it(ray_local, kind):
    trainer, key, name, tag, source, message = WRONG[kind]
    namespace = parts(tag)
    exec(source, namespace)
    given = {key: namespace[name]}
    run = {"pg": pg.train_with_param_server, "sync": data_parallel.sync_sgd,
           "async": data_parallel.async_sgd}[trainer]
    with pytest.raises(PieceError) as caught:
        run(PG if trainer == "pg" else DP,
            **slots_for(run, given, timeout_s=10.0 if trainer == "pg" else 2.0))
    assert re.match(message, str(caught.value)), str(caught.value)
    # nothing left behind, without a garbage collection: every CPU free within a few seconds
    # (Ray frees a killed actor's CPU when its process exits; a leaked one would hold it
    # until the traceback's cycle is collected, and the next trainer cell would wait forever)
    assert all_cpus_free_within(5.0)


def all_cpus_free_within(seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while ray.available_resources().get("CPU", 0) < ray.cluster_resources()["CPU"]:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_after_a_failed_run_the_next_run_finishes(ray_local, notebook_main):
    """A wrong piece fails a run in the notebook; the next cell's run then finishes: the failed
    run freed its workers on the way out (no gc.collect(), no restart of the kernel)."""
    namespace = parts("solution")
    exec(WRONG["a sum, not a mean"][4], namespace)
    with pytest.raises(PieceError):
        data_parallel.sync_sgd(DP, **slots_for(data_parallel.sync_sgd, {
            "average_gradients": namespace["summed"]}))
    history = data_parallel.sync_sgd(DP)
    assert history[-1]["update"] == DP.steps


def test_a_part_a_trainer_does_not_use_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"^pieces: sync_sgd never calls your worker_step \(the "
                                         r"trainers that do: data_parallel.async_sgd"):
        slots_for(data_parallel.sync_sgd, {"worker_step": print})
