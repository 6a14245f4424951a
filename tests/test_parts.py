"""The attendee's pieces train the agent (`course_lib.teaching.pieces`): the solutions of
notebook 05's `Outbox`, notebook 06's `WeightsFollower` and notebook 04's `find_prefix_sum`,
taken from the notebooks, run inside the real trainers' workers and learner; a wrong piece
ends the run with one line naming it, never a hang.

The pieces are defined as a notebook defines them (in `__main__`), so Ray pickles them by value,
and they report to a named actor: what the driver reads there was counted in the workers.
"""

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
TALLY = TALLY_ACTOR + '''

class TalliedOutbox(Outbox):
    added = 0

    def add(self, transition):
        super().add(transition)
        self.added += 1

    def flush(self):
        super().flush()
        ray.get(ray.get_actor("tally").count.remote("added", self.added))
        self.added = 0


def tallied_descent(sums, first_leaf, target):
    ray.get_actor("tally").count.remote("descents", 1)
    return find_prefix_sum(sums, first_leaf, target)


class TalliedFollower(WeightsFollower):
    def step(self, episode_done):
        super().step(episode_done)
        ray.get_actor("tally").count.remote("steps", 1)
'''


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


def test_apex_trains_on_the_attendees_outbox_and_descent(notebook_main, tally):
    """One run with both pieces: the explorers send through the attendee's outbox and the
    learner samples through their descent."""
    chosen, said = exercises.yours(ApexTrainer, outbox=notebook_main["Outbox"])
    assert said == "explorer send step: yours" and chosen.filled() == ["outbox"]
    _, said = exercises.yours(ApexTrainer, find_prefix_sum=notebook_main["find_prefix_sum"])
    assert said == "sum-tree descent: yours"
    result = ApexTrainer.train(APEX, slots=slots_for(ApexTrainer, {
        "outbox": notebook_main["TalliedOutbox"],
        "find_prefix_sum": notebook_main["tallied_descent"]}))
    counts = ray.get(tally.read.remote())
    assert result.last["learner_updates"] > 0
    # every transition the replay reported stored went through the attendee's outbox
    assert counts["added"] >= result.last["replay_size"] > 0
    assert counts.get("descents", 0) > 0                         # sent from the learner


def test_sac_trains_on_the_attendees_weights_follower(notebook_main, tally):
    _, said = exercises.yours(SACTrainer, weights_follower=notebook_main["WeightsFollower"])
    assert said == "weights follower: yours"
    result = SACTrainer.train(SAC, slots=slots_for(
        SACTrainer, {"weights_follower": notebook_main["TalliedFollower"]}))
    steps = ray.get(tally.read.remote())["steps"]
    assert result.last["learner_updates"] > 0
    assert steps >= result.last["env_steps"] > 0     # each env step went through its step()


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
