"""Notebook 04's pieces train the agent (`course_lib.teaching.pieces.replay`): the solutions of
`stratified_targets`, `importance_weights` and the assembled `prioritized_sample`, taken from the
notebook, draw the batches of the real Ape-X learner's prioritized buffer; a blank one leaves
course_lib's in place and says so; a wrong one ends the run with one line naming it. And the
fixed `learner_loop` is what trains section 6's DQN learner around a replay actor.

The pieces are defined as the notebook defines them (in `__main__`, so Ray pickles them by
value), and report to a named actor: what the driver reads there was counted in the learner.
"""

import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
import ray
import test_parts
from test_parts import ONE_EXPLORER  # its quick Ape-X with one explorer

from course_lib.apex import ApexTrainer
from course_lib.errors import ActorFailedError
from course_lib.replay import PrioritizedReplayBuffer
from course_lib.teaching import exercises
from course_lib.teaching.pieces import PieceError, slots_for
from course_lib.teaching.pieces.replay import DrawSlot

tally = test_parts.tally   # the fixture: a fresh counting actor named "tally"

NOTEBOOK = next((Path(__file__).resolve().parents[1] / "notebooks").glob("04_*.ipynb"))
CELLS = nbformat.read(NOTEBOOK, as_version=4).cells
PARTS = ("find_prefix_sum", "stratified_targets", "importance_weights", "prioritized_sample")

TALLY = test_parts.COUNTED + test_parts.COUNTED_STEPS


def cell(tag: str, name: str) -> str:
    """The source of notebook 04's cell tagged `tag` that defines `name`."""
    for c in CELLS:
        if tag in c.metadata.get("tags", []) and re.search(rf"^def {name}\b", c.source, re.M):
            return c.source
    raise LookupError(f"no {tag} cell defines {name} in notebook 04")


def solutions() -> dict:
    """A namespace like the notebook's `__main__` with the four solutions."""
    namespace = {"__name__": "__main__"}
    exec("import numpy as np\nimport ray", namespace)
    for name in PARTS:
        exec(cell("solution", name), namespace)
    return namespace


@pytest.fixture(scope="module")
def notebook_main(ray_local):
    namespace = solutions()
    exec(TALLY, namespace)          # the parts from here on are counted
    return namespace


def test_the_solutions_pass_their_checks_and_yours_says_so():
    namespace = solutions()
    chosen, said = exercises.yours(ApexTrainer, **{name: namespace[name] for name in PARTS})
    assert chosen.filled() == ["draw"] and set(chosen.draw.pieces) == set(PARTS)
    assert said == ("sum-tree descent: yours; stratified targets: yours; importance weights: "
                    "yours; prioritized sample: yours")


def test_blank_exercises_are_left_out_and_said_so():
    namespace = {"__name__": "__main__"}
    for name in PARTS[1:]:
        exec(cell("exercise", name), namespace)
    chosen, said = exercises.yours(ApexTrainer, **{name: namespace[name] for name in PARTS[1:]})
    assert chosen.filled() == []
    assert said == "; ".join(f"{title}: course_lib's (yours: not implemented yet.)" for title in
                             ("stratified targets", "importance weights", "prioritized sample"))


def test_apex_draws_its_batches_with_the_attendees_steps(ray_local):
    run = test_parts.apex_with_every_piece()      # their steps in course_lib's draw
    result, counts = run["result"], run["counts"]
    assert result.last["learner_updates"] > 0
    # one call of each per batch the learner sampled (the learner's snapshot is taken after)
    assert counts["stratified_targets"] >= result.last["learner_updates"]
    assert counts["importance_weights"] >= result.last["learner_updates"]


def test_apex_draws_its_batches_with_the_attendees_assembled_sample(ray_local):
    run = test_parts.apex_driven_by_the_attendee()    # (driven by their 05 drive too)
    updates, counts = run["counters"].learner_updates, run["counts"]
    assert updates > 0
    # the assembled sample ran in the learner, and called the attendee's own steps
    assert counts["stratified_targets"] >= updates
    assert counts["importance_weights"] >= updates


WRONG = {
    "stratified_targets": ('''
def wrong(total, k, rng):
    return np.sort(rng.random(k)) * total          # uniform, not one per segment
''', r"^your stratified_targets broke its contract in the learner: target \d+ is \S+, "
     r"outside its segment \[\S+, \S+\) of \[0, \S+\)$"),
    "importance_weights": ('''
def wrong(probs, beta):
    w = (len(probs) * probs) ** -beta
    return w / w.sum()                             # scaled by the sum, not the largest
''', r"^your importance_weights broke its contract in the learner: for probability \S+ "
     r"\(smallest in the batch \S+, beta 0.4\) it gave weight \S+, expected \S+$"),
    "prioritized_sample": ('''
def wrong(tree, batch_size, beta, rng):
    slots, weights = prioritized_sample(tree, batch_size, beta, rng)
    return slots[::-1], weights                    # the batch in the wrong order
''', r"^your prioritized_sample broke its contract in the learner: slot \d+ of the batch is "
     r"\d+, but segment \d+ of the prefix sums lies in slots \d+ to \d+ \(one stratified "
     r"target per segment\)$"),
}


@pytest.mark.parametrize("key", list(WRONG))
def test_a_wrong_piece_ends_the_run_with_one_line_naming_it(notebook_main, tally, key):
    source, message = WRONG[key]
    namespace = dict(notebook_main)
    exec(source, namespace)
    with pytest.raises(ActorFailedError) as caught:
        ApexTrainer.train(ONE_EXPLORER, slots=slots_for(ApexTrainer, {key: namespace["wrong"]}))
    line = str(caught.value)
    assert re.match(message, line) and "\n" not in line, line


def test_a_piece_that_hangs_is_named_not_waited_for():
    namespace = solutions()
    exec('''
import threading

def stuck(total, k, rng):
    threading.Event().wait()
''', namespace)
    buffer = filled_buffer(DrawSlot({"stratified_targets": namespace["stuck"]}, 0.5)())
    with pytest.raises(PieceError, match=r"^your stratified_targets did not return from "
                       r"stratified_targets\(\) within 0.5 s in the driver \(timeout_s\)$"):
        buffer.sample(8)


def filled_buffer(draw=None) -> PrioritizedReplayBuffer:
    """A prioritized buffer of 100 numbered items, priorities 0 to 9 (so some are never drawn),
    drawing with `draw` (its own if None)."""
    buffer = PrioritizedReplayBuffer(128, {"x": ((), np.int64)}, seed=0, draw=draw)
    buffer.add({"x": np.arange(100)}, priorities=np.arange(100) % 10)
    return buffer


@pytest.mark.parametrize("key", PARTS)
def test_a_buffer_with_a_piece_samples_as_its_own_does(key):
    """The same generator gives the same batch through the attendee's piece as without it."""
    namespace = solutions()
    own, theirs = filled_buffer(), filled_buffer(DrawSlot({key: namespace[key]}, 30.0)())
    for _ in range(5):
        expected, got = own.sample(16, 0.4), theirs.sample(16, 0.4)
        for field in ("x", "indices"):
            np.testing.assert_array_equal(got[field], expected[field])
        np.testing.assert_allclose(got["weights"], expected["weights"], rtol=1e-6)


def test_without_pieces_the_apex_slots_leave_the_draw_alone():
    assert slots_for(ApexTrainer, {}).draw is None


def test_sections_6_dqn_trains_on_the_attendees_learner_loop(ray_local):
    """Section 6's demo cell, run as the notebook runs it: every update of its DQN learner
    went through the fixed `learner_loop` of the exercise above it (counted), each batch's
    new priorities are the learner's |TD errors| on it, and the replay's stats agree with
    what the explorers sent."""
    from course_lib import init_ray, quick_mode, replay

    namespace = {"__name__": "__main__", "np": np, "ray": ray, "replay": replay,
                 "init_ray": init_ray, "quick_mode": quick_mode, "time": __import__("time"),
                 "exercises": exercises}
    exec(next(c.source for c in CELLS if c.id == "94308b9e"), namespace)   # its set-up
    exec(cell("solution", "learner_loop"), namespace)
    fixed, calls, written = namespace["learner_loop"], [], []

    def learner_loop(replay_actor, train_step, updates, batch_size):
        if replay_actor is not namespace["shared"]:  # the check's own replay
            return fixed(replay_actor, train_step, updates, batch_size)
        calls.append(updates)

        def recorded(batch):                         # what train_step hands back, kept
            errors = train_step(batch)
            written.append((batch["indices"].copy(), np.array(errors)))
            return errors
        return fixed(replay_actor, recorded, updates, batch_size)

    namespace["learner_loop"] = learner_loop
    exec(next(c.source for c in CELLS if c.id == "b2256d14"), namespace)
    shared, learner = namespace["shared"], namespace["learner"]
    stats = ray.get(shared.stats.remote())
    assert calls and sum(calls) == namespace["updates"] == learner.updates > 0
    assert len(written) == learner.updates and namespace["fixed"] is True
    assert stats["inserted"] == namespace["sent"] > 0
    assert stats["sampled"] >= 64 * namespace["updates"]
    # each batch's new priorities are the learner's |TD errors| on that batch, one per row
    assert all(len(ids) == len(err) == 64 and np.all(np.isfinite(err)) and np.all(err >= 0)
               for ids, err in written)
    ray.kill(shared)
