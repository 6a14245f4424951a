"""The attendee's pieces train the agent (`course_lib.teaching.pieces`): the solutions of
notebook 05's `Outbox`, notebook 06's `WeightsFollower` and notebook 04's `find_prefix_sum`,
taken from the notebooks, run inside the real trainers' workers and learner; a wrong piece
ends the run with one line naming it, never a hang.

The pieces are defined as a notebook defines them (in `__main__`), so Ray pickles them by value,
and they report to a named actor: what the driver reads there was counted in the workers.
"""

import functools
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import ray

from course_lib.apex import ApexConfig, ApexTrainer
from course_lib.errors import ActorFailedError, StartError
from course_lib.sac import SACConfig, SACTrainer
from course_lib.teaching import exercises, pieces
from course_lib.teaching.pieces import slots_for

ROOT = Path(__file__).resolve().parents[1]

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"

APEX = ApexConfig.preset(quick=True).updated({
    "num_workers": 2, "hidden": (32,), "learning_starts": 300, "replay_ratio": 4.0,
    "batch_size": 32, "worker_chunk": 100, "learner_chunk": 20, "eval_every_s": 1.0,
    "eval_episodes": 2, "max_env_steps": 1_200, "max_time_s": None})
ONE_EXPLORER = APEX.updated({"num_workers": 1})   # for a piece that breaks in any explorer
SAC = SACConfig.preset(quick=True).updated({
    "num_workers": 2, "hidden": (32, 32), "batch_size": 64, "start_steps": 200,
    "learning_starts": 200, "worker_chunk": 100, "learner_chunk": 20, "eval_every_s": 1.0,
    "eval_episodes": 1, "max_env_steps": 800, "max_time_s": None})

# the pieces report what they did to a named actor; defined in `__main__`, as in a notebook
TALLY_ACTOR = '''
@ray.remote(num_cpus=0)
class Tally:
    def __init__(self):
        self.counts = {}

    def count(self, key, n):
        self.counts[key] = self.counts.get(key, 0) + n

    def read(self):
        return self.counts
'''
# each piece's counting subclass or wrapper, by the piece it counts
COUNTING = {"Outbox": '''
class TalliedOutbox(Outbox):
    added = 0

    def add(self, transition):
        super().add(transition)
        self.added += 1

    def flush(self):
        super().flush()
        ray.get(ray.get_actor("tally").count.remote("added", self.added))
        self.added = 0
''', "find_prefix_sum": '''
def tallied_descent(sums, first_leaf, target):
    ray.get_actor("tally").count.remote("descents", 1)
    return find_prefix_sum(sums, first_leaf, target)
''', "WeightsFollower": '''
class TalliedFollower(WeightsFollower):
    def step(self, episode_done):
        super().step(episode_done)
        ray.get_actor("tally").count.remote("steps", 1)
'''}
TALLY = TALLY_ACTOR + "".join(COUNTING.values())


def cell(notebook: str, tag: str, name: str) -> str:
    """The source of the cell tagged `tag` (solution, exercise) that defines `name`."""
    cells = nbformat.read(next(NOTEBOOKS.glob(f"{notebook}_*.ipynb")), as_version=4).cells
    for c in cells:
        if tag in c.metadata.get("tags", []) and re.search(rf"^(class|def) {name}\b", c.source,
                                                           re.MULTILINE):
            return c.source
    raise LookupError(f"no {tag} cell defines {name} in notebook {notebook}")


def notebook_namespace(notebook: str, tag: str, names, imports: str = "import numpy as np\n"
                       "import ray") -> dict:
    """A notebook-like `__main__` namespace: `imports`, then notebook `notebook`'s cells tagged
    `tag` ("solution" or "exercise") of the exercises `names`, run as a notebook runs them."""
    namespace = {"__name__": "__main__"}
    exec(imports, namespace)
    for name in names:
        exec(cell(notebook, tag, name), namespace)
    return namespace


@pytest.fixture(scope="module")
def notebook_main(ray_local):
    """A namespace like a notebook's `__main__`, with both solutions and the tallied pieces."""
    namespace = {"__name__": "__main__"}
    exec("import numpy as np\nimport ray\nfrom course_lib.param_server import pull_into",
         namespace)
    exec(cell("05", "solution", "Outbox"), namespace)
    exec(cell("06", "solution", "WeightsFollower"), namespace)
    exec(cell("04", "solution", "find_prefix_sum"), namespace)
    exec(TALLY, namespace)
    return namespace


@pytest.fixture
def tally(notebook_main):
    actor = notebook_main["Tally"].options(name="tally").remote()
    yield actor
    ray.kill(actor)


# -- one run per trainer for the pieces that train it --------------------------------------------
# A run starts some five processes, each a few CPU-seconds (mostly `import torch`): the tests of
# the pieces a trainer takes side by side share one run, and each asserts on its own counts.

COUNTED = TALLY_ACTOR + '''

def tallied(name, piece):
    """`piece`, counting its calls in the named actor "tally" under `name`."""
    def counted(*args):
        ray.get_actor("tally").count.remote(name, 1)
        return piece(*args)
    return counted
'''

# the assembled sample calls the module's names: count them where it looks them up
COUNTED_STEPS = '''
stratified_targets = tallied("stratified_targets", stratified_targets)
importance_weights = tallied("importance_weights", importance_weights)
'''

# the driver's pieces count in this process; the explorers' and the learner's in "tally"
COUNTED_05 = '''
driver_calls = {"updates_allowed": 0, "learner_chunks": 0}


def tallied_throttle(inserted, replay_ratio, batch_size):
    driver_calls["updates_allowed"] += 1
    return updates_allowed(inserted, replay_ratio, batch_size)


def tallied_chunks(due, submitted, in_flight, chunk):
    sizes = learner_chunks(due, submitted, in_flight, chunk)
    driver_calls["learner_chunks"] += len(sizes)
    return sizes


drive_rounds = []


def tallied_drive(explorers, learner, allowed, chunks, env_steps):
    inserted, updates = drive(explorers, learner, allowed, chunks, env_steps)
    drive_rounds.append((inserted, updates))
    return inserted, updates
'''


def solutions_of(*pieces: tuple[str, str], imports: str = "import numpy as np\nimport ray\n"
                 "from course_lib.param_server import pull_into") -> dict:
    """A notebook-like `__main__` with the solutions of `pieces` ((notebook, name) pairs),
    the counting actor and wrappers (`COUNTED`, `COUNTED_05`) and each piece's `COUNTING`."""
    namespace = {"__name__": "__main__"}
    exec(imports, namespace)
    for notebook, name in pieces:
        exec(cell(notebook, "solution", name), namespace)
    exec(COUNTED, namespace)
    exec(COUNTED_05, namespace)
    for _, name in pieces:
        exec(COUNTING.get(name, ""), namespace)
    return namespace


def counted_run(namespace: dict, run) -> tuple:
    """(what `run()` returns, the counts the pieces sent to the actor "tally" meanwhile)."""
    tally = namespace["Tally"].options(name="tally").remote()
    try:
        result = run()
        return result, ray.get(tally.read.remote())
    finally:
        ray.kill(tally)


@functools.cache
def apex_with_every_piece() -> dict:
    """One Ape-X run (`train`, APEX) with the solutions of every piece its explorers, learner
    and driver call side by side, each counted: 05's Outbox, explorer_epsilons, updates_allowed
    and learner_chunks, and 04's find_prefix_sum, stratified_targets and importance_weights in
    course_lib's draw. {"result", "counts", "driver_calls"}."""
    ns = solutions_of(("05", "Outbox"), ("04", "find_prefix_sum"), ("04", "stratified_targets"),
                      ("04", "importance_weights"), ("05", "explorer_epsilons"),
                      ("05", "updates_allowed"), ("05", "learner_chunks"))
    pieces = {"outbox": ns["TalliedOutbox"], "find_prefix_sum": ns["tallied_descent"],
              **{name: ns["tallied"](name, ns[name]) for name in
                 ("stratified_targets", "importance_weights", "explorer_epsilons")},
              "updates_allowed": ns["tallied_throttle"], "learner_chunks": ns["tallied_chunks"]}
    result, counts = counted_run(ns, lambda: ApexTrainer.train(
        APEX, slots=slots_for(ApexTrainer, pieces)))
    return {"result": result, "counts": counts, "driver_calls": ns["driver_calls"]}


@functools.cache
def apex_driven_by_the_attendee() -> dict:
    """Three iterations of an Ape-X (APEX) driven by 05's `drive` (counted round by round)
    that draws with 04's assembled `prioritized_sample`, which calls their own
    stratified_targets and importance_weights (counted). {"rows", "counters", "counts",
    "drive_rounds"}."""
    ns = solutions_of(("04", "find_prefix_sum"), ("04", "stratified_targets"),
                      ("04", "importance_weights"), ("04", "prioritized_sample"), ("05", "drive"))
    exec(COUNTED_STEPS, ns)

    def three_iterations():
        trainer = ApexTrainer(APEX, slots=slots_for(ApexTrainer, {
            "drive": ns["tallied_drive"], "prioritized_sample": ns["prioritized_sample"]}))
        try:
            return [trainer.step() for _ in range(3)], trainer.counters
        finally:
            trainer.close()

    (rows, counters), counts = counted_run(ns, three_iterations)
    return {"rows": rows, "counters": counters, "counts": counts,
            "drive_rounds": ns["drive_rounds"]}


@functools.cache
def sac_with_every_piece() -> dict:
    """One SAC run (SAC, one env per worker, as the rollout loop asks) with the solutions of
    06's WeightsFollower, rollout loop and maths pieces, each counted. {"result", "counts"}."""
    ns = solutions_of(("06", "WeightsFollower"), ("06", "rollout"), ("06", "squashed_log_prob"),
                      ("06", "soft_target"), ("06", "actor_step"), ("06", "polyak"),
                      imports="import math\nimport numpy as np\nimport ray\nimport torch\n"
                      "import torch.nn.functional as F\nfrom course_lib import sac\n"
                      "from course_lib.param_server import pull_into")
    exec('''
def tallied_rollout(env, actor, follower, send, num_steps, send_every, seed):
    ray.get_actor("tally").count.remote("rollout_steps", num_steps)
    return rollout(env, actor, follower, send, num_steps, send_every, seed)
''', ns)
    pieces = {"weights_follower": ns["TalliedFollower"], "rollout": ns["tallied_rollout"],
              **{name: ns["tallied"](name, ns[name]) for name in
                 ("squashed_log_prob", "soft_target", "actor_step", "polyak")}}
    result, counts = counted_run(ns, lambda: SACTrainer.train(
        SAC.updated({"num_envs": 1}), slots=slots_for(SACTrainer, pieces)))
    return {"result": result, "counts": counts}


def test_apex_trains_on_the_attendees_outbox_and_descent(notebook_main):
    """The explorers send through the attendee's outbox and the learner samples through
    their descent (in the run with every piece)."""
    chosen, said = exercises.yours(ApexTrainer, outbox=notebook_main["Outbox"])
    assert said == "explorer send step: yours" and chosen.filled() == ["outbox"]
    _, said = exercises.yours(ApexTrainer, find_prefix_sum=notebook_main["find_prefix_sum"])
    assert said == "sum-tree descent: yours"
    run = apex_with_every_piece()
    result, counts = run["result"], run["counts"]
    assert result.last["learner_updates"] > 0
    # every transition the replay reported stored went through the attendee's outbox
    assert counts["added"] >= result.last["replay_size"] > 0
    assert counts.get("descents", 0) > 0                         # sent from the learner


def test_sac_trains_on_the_attendees_weights_follower(notebook_main):
    _, said = exercises.yours(SACTrainer, weights_follower=notebook_main["WeightsFollower"])
    assert said == "weights follower: yours"
    run = sac_with_every_piece()
    steps = run["counts"]["steps"]
    assert run["result"].last["learner_updates"] > 0
    assert steps >= run["result"].last["env_steps"] > 0     # each env step went through its step()


def test_a_wrong_descent_ends_the_run_with_one_line_naming_it(notebook_main):
    namespace = dict(notebook_main)
    exec('''
def off_by_one(sums, first_leaf, target):
    return max(0, find_prefix_sum(sums, first_leaf, target) - 1)
''', namespace)
    with pytest.raises(ActorFailedError) as caught:
        ApexTrainer.train(ONE_EXPLORER, slots=slots_for(
            ApexTrainer, {"find_prefix_sum": namespace["off_by_one"]}))
    line = str(caught.value)
    assert re.match(r"^your find_prefix_sum broke its contract in the learner: for target "
                    r"\S+ it found slot \d+, the tree's own descent slot \d+$", line), line


def test_a_blank_exercise_is_left_out_and_said_so(ray_local):
    namespace = {"__name__": "__main__"}
    exec(cell("05", "exercise", "Outbox"), namespace)
    chosen, said = exercises.yours(ApexTrainer, outbox=namespace["Outbox"])
    assert chosen.filled() == []
    assert said == "explorer send step: course_lib's (yours: not implemented yet.)"


def test_an_unknown_piece_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"unknown piece 'replay'.*'outbox'"):
        pieces.check_keys({"replay": object})


BROKEN = {
    "raises": ('''
class Broken(Outbox):
    def add(self, transition):
        raise ValueError("boom")
''', r"^your Outbox failed in explorer \d, in add\(\): ValueError: boom$"),
    "never sends": ('''
class Broken(Outbox):
    def add(self, transition):
        self.items.append(transition)

    def flush(self):
        pass
''', r"^your Outbox broke its contract in explorer \d: \d+ transitions added, 0 sent by the "
     r"end of flush\(\) \(flush sends what is left\)$"),
    "flush never returns": ('''
import threading

class Broken(Outbox):
    def flush(self):
        threading.Event().wait()
''', r"^your Outbox did not return from flush\(\) within 2 s in explorer \d "
     r"\(timeout_s\)$"),
}


@pytest.mark.parametrize("kind", list(BROKEN))
def test_a_broken_outbox_ends_the_run_with_one_line_naming_it(notebook_main, kind):
    source, message = BROKEN[kind]
    namespace = dict(notebook_main)
    exec(source, namespace)
    with pytest.raises(ActorFailedError) as caught:
        ApexTrainer.train(ONE_EXPLORER, slots=slots_for(
            ApexTrainer, {"outbox": namespace["Broken"]}, timeout_s=2.0))
    assert re.match(message, str(caught.value)), str(caught.value)


def test_a_follower_that_never_pulls_is_named_at_start(notebook_main):
    namespace = dict(notebook_main)
    exec('''
class Lazy(WeightsFollower):
    def __init__(self, ps, name, module, pull_every):
        pass

    def step(self, episode_done):
        pass
''', namespace)
    with pytest.raises(StartError) as caught:
        SACTrainer.train(SAC, slots=slots_for(SACTrainer, {"weights_follower": namespace["Lazy"]}))
    line = str(caught.value)
    assert re.match(r"^rollout worker \d could not start: your WeightsFollower broke its "
                    r"contract in rollout worker \d: it did not pull when created", line), line
    assert "\n" not in line


def test_a_hung_piece_does_not_keep_the_process_from_exiting(tmp_path):
    """A piece that never returns is reported (PieceError) and then left behind: the kernel,
    the test run or the actor that called it still exits. (With a ThreadPoolExecutor, Python
    joined the hung thread at exit and `pytest` hung after its last test.)"""
    script = tmp_path / "hung.py"
    script.write_text(
        "import threading\n"
        "from course_lib.teaching.pieces import Guarded, PieceError\n"
        "def stuck(total, k, rng):\n"
        "    threading.Event().wait()\n"
        "guarded = Guarded('stratified_targets', stuck, 0.2, where='a test')\n"
        "try:\n"
        "    guarded.call('stratified_targets()', guarded.cls, 1.0, 4, None)\n"
        "except PieceError as err:\n"
        "    print(err)\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)   # a hang fails here, with TimeoutExpired
    assert proc.returncode == 0, proc.stderr
    assert "your stratified_targets did not return" in proc.stdout


def test_a_trainer_without_slots_refuses_them_in_one_line():
    from course_lib.dqn import DQNConfig, DQNTrainer
    from course_lib.sac import SACSlots

    with pytest.raises(ValueError, match=r"^slots: DQNTrainer has none; the distributed "):
        DQNTrainer.train(DQNConfig.preset(quick=True), slots=SACSlots())


def test_a_piece_the_trainer_never_calls_is_refused_before_ray_starts():
    """Issue 36 item 4: a piece handed to a trainer that never calls it is refused in one line
    that names the trainer that does, before any actor starts; and `yours` does not report it
    as yours."""
    with pytest.raises(ValueError, match=r"^pieces: ApexTrainer never calls your rollout \(the "
                                         r"trainers that do: sac.SACTrainer"):
        exercises.yours(ApexTrainer, rollout=print)
    with pytest.raises(ValueError, match=r"^slots: ApexTrainer never calls rollout \(a part of "
                                         r"SACSlots\)"):
        from course_lib.sac import SACSlots
        ApexTrainer(APEX, slots=SACSlots(rollout=print))
