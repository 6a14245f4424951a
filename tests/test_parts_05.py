"""Notebook 05's parts train the agent (`course_lib.pieces.apex`): the solutions of
`explorer_epsilons`, `updates_allowed` and the find-the-bug `learner_chunks`, taken from the
notebook, run in a real Ape-X run (the explorers' epsilons in the explorers, the throttle and the
learner calls in the driver); a blank part falls back to course_lib's and says so; a wrong part
ends the run with one line naming it, never a hang.
"""

import re

import pytest
import ray

from course_lib.apex import ApexTrainer
from course_lib.dqn import epsilon_for_explorer
from course_lib.failures import PieceError, StartError
from course_lib.sac import SACConfig, SACTrainer
from course_lib.teaching import exercises
from tests.test_parts import APEX, TALLY_ACTOR, cell, notebook_namespace

PARTS = ("explorer_epsilons", "updates_allowed", "learner_chunks")

# the explorers report to a named actor; the driver's parts count in this process
TALLIED = TALLY_ACTOR + '''

driver_calls = {"updates_allowed": 0, "learner_chunks": 0}


def tallied_epsilons(n, eps, alpha):
    ray.get(ray.get_actor("tally05").count.remote("explorer_epsilons", 1))
    return explorer_epsilons(n, eps, alpha)


def tallied_throttle(inserted, replay_ratio, batch_size):
    driver_calls["updates_allowed"] += 1
    return updates_allowed(inserted, replay_ratio, batch_size)


def tallied_chunks(due, submitted, in_flight, chunk):
    sizes = learner_chunks(due, submitted, in_flight, chunk)
    driver_calls["learner_chunks"] += len(sizes)
    return sizes
'''


def namespace_of(tag: str) -> dict:
    """A notebook-like `__main__` namespace with notebook 05's cells tagged `tag` of the parts."""
    return notebook_namespace("05", tag, PARTS)


@pytest.fixture(scope="module")
def solutions(ray_local):
    namespace = namespace_of("solution")
    exec(TALLIED, namespace)
    return namespace


def test_apex_trains_on_the_attendees_05_parts(solutions):
    chosen, said = exercises.yours(**{name: solutions[name] for name in PARTS})
    assert set(chosen) == set(PARTS)
    assert said == ("explorers' epsilons: yours; driver's throttle: yours; "
                    "driver's learner calls: yours")
    tally = solutions["Tally"].options(name="tally05").remote()
    try:
        result = ApexTrainer.train(APEX, pieces={"explorer_epsilons": solutions["tallied_epsilons"],
                                          "updates_allowed": solutions["tallied_throttle"],
                                          "learner_chunks": solutions["tallied_chunks"]})
        counts = ray.get(tally.read.remote())
    finally:
        ray.kill(tally)
    calls = solutions["driver_calls"]
    assert counts["explorer_epsilons"] == APEX.num_workers      # once in each explorer
    assert result.extras["epsilons"] == [epsilon_for_explorer(i, APEX.num_workers)
                                         for i in range(APEX.num_workers)]
    assert calls["updates_allowed"] > 0                         # the driver's throttle ...
    # ... and every learner call the driver sent was one of the attendee's chunks
    assert calls["learner_chunks"] * APEX.learner_chunk >= result.last["learner_updates"] > 0


def test_blank_parts_are_left_out_and_said_so(ray_local):
    chosen, said = exercises.yours(**{name: namespace_of("exercise")[name] for name in PARTS})
    assert chosen == {}
    assert said.startswith("explorers' epsilons: course_lib's (yours: not implemented yet.); "
                           "driver's throttle: course_lib's (yours: not implemented yet.); "
                           "driver's learner calls: course_lib's (yours: the learner's queue "
                           "grew to ")


WRONG = {
    "explorer_epsilons": ('''
def wrong(n, eps, alpha):
    return [eps] * (n - 1)
''', StartError, r"^explorer \d could not start: your explorer_epsilons broke its contract in "
                 r"explorer \d: it returned 1 epsilons for 2 explorers"),
    "updates_allowed": ('''
def wrong(inserted, replay_ratio, batch_size):
    return replay_ratio * inserted / batch_size
''', PieceError, r"^your updates_allowed broke its contract in the driver: it returned float "
                 r"\S+, not a whole number of updates$"),
    "learner_chunks": ('''
def wrong(due, submitted, in_flight, chunk):
    return []
''', PieceError, r"^your learner_chunks broke its contract in the driver: with \d+ updates due "
                 r"and 0 call\(s\) in flight it sent none: the learner would wait forever$"),
}


@pytest.mark.parametrize("key", list(WRONG))
def test_a_wrong_part_ends_the_run_with_one_line_naming_it(ray_local, key):
    source, error, message = WRONG[key]
    namespace = {"__name__": "__main__"}
    exec(source, namespace)
    with pytest.raises(error) as caught:
        ApexTrainer.train(APEX, pieces={key: namespace["wrong"]})
    line = str(caught.value)
    assert re.match(message, line) and "\n" not in line, line


def test_the_throttle_needs_a_replay_ratio(ray_local, solutions):
    with pytest.raises(ValueError, match=r"^pieces: updates_allowed needs a replay ratio"):
        SACTrainer.train(SACConfig.preset(quick=True),
                  pieces={"updates_allowed": solutions["updates_allowed"]})


# -- the assembled driver loop in the real driver --------------------------------------------

TALLIED_DRIVE = '''
drive_rounds = []


def tallied_drive(explorers, learner, allowed, chunks, env_steps):
    inserted, updates = drive(explorers, learner, allowed, chunks, env_steps)
    drive_rounds.append((inserted, updates))
    return inserted, updates
'''


def drive_namespace(tag: str = "solution") -> dict:
    namespace = notebook_namespace("05", tag, ("drive",))
    exec(TALLIED_DRIVE, namespace)
    return namespace


def test_apex_trains_on_the_attendees_driver_loop(ray_local):
    namespace = drive_namespace()
    chosen, said = exercises.yours(drive=namespace["drive"])
    assert said == "driver's loop: yours"
    trainer = ApexTrainer(APEX, pieces={"drive": namespace["tallied_drive"]})
    try:
        rows = [trainer.step() for _ in range(3)]
        counters = trainer.counters
    finally:
        trainer.close()
    rounds = namespace["drive_rounds"]
    # every env step and every update the driver booked went through the attendee's loop
    assert sum(n for n, _ in rounds) == counters.env_steps > 0
    assert sum(u for _, u in rounds) == counters.learner_updates > 0
    assert all(row["eval_return"] == row["eval_return"] for row in rows)   # scored, not NaN


def test_a_blank_driver_loop_is_left_out_and_said_so(ray_local):
    chosen, said = exercises.yours(drive=drive_namespace("exercise")["drive"])
    assert chosen == {} and said.startswith("driver's loop: course_lib's (yours: ")


WRONG_DRIVES = {
    "undercounted": ("            updates += ray.get(done)", "            updates += 0",
                     r"it returned \(\d+, 0\); its calls played \d+ transitions and did \d+ "
                     r"updates: book every call's result before returning"),
    "early return": ("    while inserted < env_steps or tasks:",
                     "    while inserted < env_steps:",
                     # still in flight when it returned, or (if they finished since) not booked
                     r"(it returned with \d+ call\(s\) still in flight: loop until every call "
                     r"is booked|it returned \(\d+, \d+\); its calls played \d+ transitions and "
                     r"did \d+ updates: book every call's result before returning)"),
}


@pytest.mark.parametrize("kind", list(WRONG_DRIVES))
def test_a_wrong_driver_loop_ends_the_run_with_one_line_naming_it(ray_local, kind):
    old, new, message = WRONG_DRIVES[kind]
    namespace = drive_namespace()
    source = cell("05", "solution", "drive")
    assert old in source
    exec(source.replace(old, new), namespace)
    with pytest.raises(PieceError) as caught:
        ApexTrainer.train(APEX, pieces={"drive": namespace["drive"]})
    line = str(caught.value)
    assert re.match(r"^your drive broke its contract in the driver: " + message, line), line
    assert "\n" not in line
