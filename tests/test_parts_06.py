"""Notebook 06's pieces train the agent: the solutions of `squashed_log_prob`, `soft_target`,
`actor_step` and `polyak`, taken from the notebook, run inside the real SAC learner (its maths
slots, `sac.SACSlots`), each checked
against `course_lib`'s at every call; a wrong one ends the run with one line naming it; a blank
one is left out and said so. Also the find-the-bug and assemble exercises' checks (`actor_step`,
`rollout`), with the notebook's own cells. The weights follower has its tests in test_parts.py.
"""

import math
import re

import numpy as np
import pytest
import test_parts
import torch
from test_parts import SAC, cell

from course_lib import sac
from course_lib.apex import ApexTrainer
from course_lib.errors import ActorFailedError
from course_lib.teaching import exercises
from course_lib.teaching.pieces import Guarded, PieceError, slots_for
from course_lib.teaching.pieces.sac import MATHS as GUARDS

MATHS = ("squashed_log_prob", "soft_target", "actor_step", "polyak")
#: the piece -> the name of its function in `sac.SACMaths`
SLOT = {"squashed_log_prob": "squashed_log_prob", "soft_target": "q_target",
        "actor_step": "actor_step", "polyak": "polyak_update"}

def notebook_namespace(tag: str) -> dict:
    """The three maths exercises as the notebook's cells tagged `tag` define them."""
    namespace = {"__name__": "__main__"}
    exec("import math\nimport ray\nimport torch\nimport torch.nn.functional as F\n"
         "from course_lib import sac", namespace)
    for name in MATHS:
        exec(cell("06", tag, name), namespace)
    return namespace


def a_batch(n: int = 64) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"obs": rng.standard_normal((n, 3), dtype=np.float32),
            "action": rng.uniform(-1, 1, (n, 1)).astype(np.float32),
            "reward": -rng.random(n).astype(np.float32),
            "next_obs": rng.standard_normal((n, 3), dtype=np.float32),
            "terminated": rng.random(n) < 0.2}


def updates(given_pieces: dict, n: int = 3) -> sac.SACLearner:
    """A SACLearner calling the attendee's maths, guarded as in the learner actor."""
    torch.manual_seed(0)
    maths = sac.SACMaths(**{SLOT[key]: GUARDS[key](Guarded(key, fn, 10.0, where="the learner"))
                            for key, fn in given_pieces.items()})
    learner = sac.SACLearner(3, 1, (16, 16), device="cpu", maths=maths)
    for _ in range(n):
        learner.update(a_batch())
    return learner


def test_the_learner_with_the_notebooks_maths_learns_exactly_as_course_libs():
    solutions = notebook_namespace("solution")
    theirs = updates({name: solutions[name] for name in MATHS})
    ours = updates({})
    for a, b in zip(theirs.critic_target.parameters(), ours.critic_target.parameters(),
                    strict=True):
        assert torch.allclose(a, b, atol=1e-5)
    assert theirs.updates == ours.updates == 3


WRONG = {
    "squashed_log_prob": ('''
def squashed_log_prob(u, mean, log_std):
    return (-0.5 * ((u - mean) / log_std.exp()) ** 2 - log_std
            - 0.5 * math.log(2 * math.pi)).sum(dim=-1)
''', r"your squashed_log_prob broke its contract in the learner: for a batch u of shape "
     r"\(64, 1\) it gave \S+ where course_lib's gives \S+ \(\d+ of 64 values differ\)"),
    "soft_target": ('''
def soft_target(reward, terminated, next_q1, next_q2, next_log_prob, alpha, gamma):
    return reward + gamma * (torch.max(next_q1, next_q2) - alpha * next_log_prob)
''', r"your soft_target broke its contract in the learner: for a batch of 64 transitions it "
     r"gave \S+ where course_lib's gives \S+"),
    "actor_step": ('''
def actor_step(actor, critic, optimizer, batch, alpha):
    obs = batch["obs"]
    new_action, log_prob = actor(obs)
    q1, q2 = critic(obs, batch["action"])
    loss = (alpha * log_prob - torch.min(q1, q2)).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item(), log_prob.detach()
''', r"your actor_step broke its contract in the learner: its step's loss was \S+ where "
     r"course_lib's, on the same sample, is \S+$"),
    "polyak": ('''
def polyak(target, source, tau):
    with torch.no_grad():
        for t, s in zip(target.parameters(), source.parameters()):
            t.mul_(tau).add_((1 - tau) * s)
''', r"your polyak broke its contract in the learner: with tau=0.005 the target did not move "
     r"tau of the way to the source: it gave"),
}


@pytest.mark.parametrize("name", MATHS)
def test_a_wrong_maths_piece_is_named_in_one_line(name):
    namespace = notebook_namespace("solution")
    exec(WRONG[name][0], namespace)
    with pytest.raises(PieceError) as caught:
        updates({name: namespace[name]})
    assert re.match(WRONG[name][1], str(caught.value)), str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_maths_piece_that_raises_is_named():
    def broken(u, mean, log_std):
        raise ValueError("boom")
    with pytest.raises(PieceError, match=r"^your squashed_log_prob failed in the learner, in "
                                         r"squashed_log_prob\(\): ValueError: boom$"):
        updates({"squashed_log_prob": broken})


def test_the_maths_pieces_are_refused_outside_sac():
    with pytest.raises(ValueError, match=r"^pieces: ApexTrainer never calls your polyak \(the "
                                         r"trainers that do: sac.SACTrainer"):
        slots_for(ApexTrainer, {"polyak": print})


def test_blank_maths_exercises_are_left_out_and_said_so(ray_local):
    stubs = notebook_namespace("exercise")
    names = [name for name in MATHS if name != "actor_step"]     # (a find-the-bug)
    chosen, said = exercises.yours(sac.SACTrainer, **{name: stubs[name] for name in names})
    assert chosen.filled() == []
    assert said == ("squashed log-prob: course_lib's (yours: not implemented yet.); "
                    "soft Bellman target: course_lib's (yours: not implemented yet.); "
                    "Polyak target update: course_lib's (yours: not implemented yet.)")


def test_sac_trains_on_the_attendees_maths(ray_local):
    namespace = notebook_namespace("solution")
    _, said = exercises.yours(sac.SACTrainer, **{name: namespace[name] for name in MATHS})
    assert said == ("squashed log-prob: yours; soft Bellman target: yours; actor's gradient "
                    "step: yours; Polyak target update: yours")
    run = test_parts.sac_with_every_piece()
    counts, updates_done = run["counts"], run["result"].last["learner_updates"]
    assert updates_done > 0
    # every update: two log-probs (s and s'), one target, one actor step, one Polyak step, in
    # the learner
    assert counts["squashed_log_prob"] >= 2 * updates_done
    assert counts["soft_target"] >= updates_done and counts["polyak"] >= updates_done
    assert counts["actor_step"] >= updates_done


def test_a_wrong_maths_piece_ends_a_run_with_one_line(ray_local):
    namespace = notebook_namespace("solution")
    exec(WRONG["soft_target"][0], namespace)
    with pytest.raises(ActorFailedError) as caught:
        sac.SACTrainer.train(SAC.updated({"num_workers": 1}), slots=slots_for(sac.SACTrainer, {
            "soft_target": namespace["soft_target"]}))            # a learner piece: one worker
    assert re.match("^" + WRONG["soft_target"][1], str(caught.value)), str(caught.value)


# -- the find-the-bug and assemble exercises -------------------------------------------------

def exercise_namespace(tag: str, name: str) -> dict:
    namespace = {"__name__": "__main__", "torch": torch, "sac": sac, "math": math}
    exec(cell("06", tag, name), namespace)
    return namespace


def test_the_planted_bug_is_found_and_the_fix_accepted(monkeypatch):
    # a kernel that has not failed this check yet (earlier tests' failures would show the line)
    monkeypatch.setattr(exercises.core, "FAILED", exercises.core.Counter())
    buggy = exercises.check_actor_step.quietly(
        exercise_namespace("exercise", "actor_step")["actor_step"])
    assert not buggy and "not towards 0.5" in buggy.message and "gradient" in buggy.hint
    assert exercises.check_actor_step(exercise_namespace("solution", "actor_step")["actor_step"])


def test_the_assembled_rollout_loop_is_checked(ray_local):
    assert not exercises.check_rollout(exercise_namespace("exercise", "rollout")["rollout"])
    fixed = cell("06", "solution", "rollout")
    assert exercises.check_rollout(exercise_namespace("solution", "rollout")["rollout"])
    for wrong, message in [('"action": action,', "not the policy's"),
                           ('"terminated": terminated}', "time-limit end as terminated")]:
        broken = fixed.replace(wrong, wrong.replace("action,", "sac.scale_action(action, low, "
                                                    "high),").replace(
            "terminated}", "terminated or truncated}"))
        namespace = {"__name__": "__main__", "torch": torch, "sac": sac}
        exec(broken, namespace)
        result = exercises.check_rollout(namespace["rollout"])
        assert not result and message in result.message, result


# -- the assembled rollout loop in the real rollout workers ----------------------------------

def test_sac_trains_on_the_attendees_rollout_loop(ray_local):
    chosen, said = exercises.yours(sac.SACTrainer, rollout=exercise_namespace(
        "solution", "rollout")["rollout"])
    assert said == "rollout worker's loop: yours"
    run = test_parts.sac_with_every_piece()       # one env per worker, as the loop asks
    result, counts = run["result"], run["counts"]
    # the env steps booked were played by the attendee's loop (tasks still running when the
    # run stopped are counted too), in whole Pendulum episodes of 200 steps
    assert counts["rollout_steps"] >= result.last["env_steps"] >= SAC.max_env_steps
    assert counts["rollout_steps"] % 200 == 0 and result.last["env_steps"] % 200 == 0
    assert result.last["learner_updates"] > 0 and result.last["episodes"] > 0


BROKEN_ROLLOUTS = {
    "short": ("for _ in range(num_steps):", "for _ in range(num_steps - 1):",
              r"asked for 200 steps it played 199"),
    "unsent": ("    if outbox:\n        send(outbox)\n", "",
               r"it played 200 steps and sent 180 transitions: one per step, each sent once"),
    "keys": ('"terminated": terminated}', '"terminated": terminated, "extra": 1}',
             r"send\(\) takes a list of transitions, each a dict of"),
}


@pytest.mark.parametrize("kind", list(BROKEN_ROLLOUTS))
def test_a_broken_rollout_ends_the_run_with_one_line_naming_it(ray_local, kind):
    old, new, message = BROKEN_ROLLOUTS[kind]
    source = cell("06", "solution", "rollout")
    assert old in source
    namespace = {"__name__": "__main__", "torch": torch, "sac": sac}
    exec(source.replace(old, new), namespace)
    with pytest.raises(ActorFailedError) as caught:
        sac.SACTrainer.train(SAC.updated({"num_workers": 1, "num_envs": 1, "send_every": 30}),
                             slots=slots_for(sac.SACTrainer, {"rollout": namespace["rollout"]}))
    text = str(caught.value)
    assert re.match(r"^your rollout broke its contract in rollout worker \d: " + message,
                    text), text
    assert "\n" not in text


def test_the_rollout_piece_asks_for_one_env_per_worker(ray_local):
    namespace = exercise_namespace("solution", "rollout")
    with pytest.raises(Exception, match=r"pieces: rollout plays one env per worker; num_envs "
                                        r"is 2: set num_envs=1"):
        sac.SACTrainer.train(SAC.updated({"num_envs": 2}), slots=slots_for(
            sac.SACTrainer, {"rollout": namespace["rollout"]}))
