"""Notebook 05's parts train the agent (`course_lib.teaching.pieces.apex`): the solutions of
`explorer_epsilons`, `updates_allowed` and the find-the-bug `learner_chunks`, taken from the
notebook, run in a real Ape-X run (the explorers' epsilons, the throttle and the learner calls
in the driver); a blank part falls back to course_lib's and says so; a wrong part
ends the run with one line naming it, never a hang.
"""

import re

import pytest
import test_parts
from test_parts import APEX, cell, notebook_namespace

from course_lib.apex import ApexTrainer
from course_lib.dqn import epsilon_for_explorer
from course_lib.sac import SACTrainer
from course_lib.teaching import exercises
from course_lib.teaching.pieces import PieceError, slots_for

PARTS = ("explorer_epsilons", "updates_allowed", "learner_chunks")

def namespace_of(tag: str) -> dict:
    """A notebook-like `__main__` namespace with notebook 05's cells tagged `tag` of the parts."""
    return notebook_namespace("05", tag, PARTS)


@pytest.fixture(scope="module")
def solutions(ray_local):
    return namespace_of("solution")


def test_apex_trains_on_the_attendees_05_parts(solutions):
    chosen, said = exercises.yours(ApexTrainer, **{name: solutions[name] for name in PARTS})
    assert chosen.filled() == ["updates_due", "learner_chunks", "epsilons"]
    assert said == ("explorers' epsilons: yours; driver's throttle: yours; "
                    "driver's learner calls: yours")
    run = test_parts.apex_with_every_piece()
    result, counts, calls = run["result"], run["counts"], run["driver_calls"]
    assert counts["explorer_epsilons"] == 1                     # once, in the driver
    assert result.extras["epsilons"] == [epsilon_for_explorer(i, APEX.num_workers)
                                         for i in range(APEX.num_workers)]
    assert calls["updates_allowed"] > 0                         # the driver's throttle ...
    # ... and every learner call the driver sent was one of the attendee's chunks
    assert calls["learner_chunks"] * APEX.learner_chunk >= result.last["learner_updates"] > 0


def test_blank_parts_are_left_out_and_said_so(ray_local):
    chosen, said = exercises.yours(ApexTrainer, **{name: namespace_of("exercise")[name]
                                                   for name in PARTS})
    assert chosen.filled() == []
    assert said.startswith("explorers' epsilons: course_lib's (yours: not implemented yet.); "
                           "driver's throttle: course_lib's (yours: not implemented yet.); "
                           "driver's learner calls: course_lib's (yours: the learner's queue "
                           "grew to ")


WRONG = {
    "explorer_epsilons": ('''
def wrong(n, eps, alpha):
    return [eps] * (n - 1)
''', PieceError, r"^your explorer_epsilons broke its contract in the driver: it returned 1 "
                 r"epsilons for 2 explorers$"),
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
        ApexTrainer.train(APEX, slots=slots_for(ApexTrainer, {key: namespace["wrong"]}))
    line = str(caught.value)
    assert re.match(message, line) and "\n" not in line, line


def test_the_throttle_needs_a_replay_ratio(solutions):
    with pytest.raises(ValueError, match=r"^pieces: updates_allowed needs a replay ratio"):
        exercises.yours(SACTrainer, updates_allowed=solutions["updates_allowed"])


# -- the assembled driver loop in the real driver --------------------------------------------

def drive_namespace(tag: str = "solution") -> dict:
    return notebook_namespace("05", tag, ("drive",))


def test_apex_trains_on_the_attendees_driver_loop(ray_local):
    chosen, said = exercises.yours(ApexTrainer, drive=drive_namespace()["drive"])
    assert said == "driver's loop: yours"
    run = test_parts.apex_driven_by_the_attendee()    # (drawing with their 04 sample too)
    rounds, counters = run["drive_rounds"], run["counters"]
    # every env step and every update the driver booked went through the attendee's loop
    assert sum(n for n, _ in rounds) == counters.env_steps > 0
    assert sum(u for _, u in rounds) == counters.learner_updates > 0
    assert all(row["eval_return"] == row["eval_return"] for row in run["rows"])  # scored, not NaN


def test_a_blank_driver_loop_is_left_out_and_said_so(ray_local):
    chosen, said = exercises.yours(ApexTrainer, drive=drive_namespace("exercise")["drive"])
    assert chosen.filled() == [] and said.startswith("driver's loop: course_lib's (yours: ")


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
        ApexTrainer.train(APEX, slots=slots_for(ApexTrainer, {"drive": namespace["drive"]}))
    line = str(caught.value)
    assert re.match(r"^your drive broke its contract in the driver: " + message, line), line
    assert "\n" not in line


OWN_DRIVES = {
    "asks for no updates": ('''
def drive(explorers, learner, allowed, chunks, env_steps):
    inserted = updates = 0
    while inserted < env_steps:
        refs = [explorer.run.remote() for explorer in explorers]
        inserted += sum(ray.get(refs))
        updates += ray.get(learner.train.remote(0))
    return inserted, updates
''', r"it asked the learner for train.remote\(0\): ask for 1 or more updates"),
    "one explorer at a time": ('''
def drive(explorers, learner, allowed, chunks, env_steps):
    inserted = submitted = updates = 0
    while inserted < env_steps:
        for explorer in explorers:
            inserted += ray.get(explorer.run.remote())
            for n in chunks(allowed(inserted), submitted, 0):
                updates += ray.get(learner.train.remote(n))
                submitted += n
    return inserted, updates
''', r"its explorers never played at the same time"),
}


@pytest.mark.parametrize("kind", list(OWN_DRIVES))
def test_a_drive_is_named_for_what_it_asked_of_the_actors(ray_local, kind):
    """Issue 36 item 6 and issue 38: a drive's calls into the real actors are checked (one
    asking for 0 updates is named, not blamed on the learner's IndexError), and a drive whose
    explorers never overlap (a serial loop) fails: concurrency is what the exercise builds."""
    source, message = OWN_DRIVES[kind]
    namespace = {"__name__": "__main__"}
    exec("import ray\n" + source, namespace)
    with pytest.raises(PieceError) as caught:
        ApexTrainer.train(APEX, slots=slots_for(ApexTrainer, {"drive": namespace["drive"]}))
    line = str(caught.value)
    assert re.match(r"^your drive broke its contract in the driver: " + message, line), line
