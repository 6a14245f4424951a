"""The exercise checkers: each notebook's exercises and checks, the typical mistakes a systems
checker names, the loopholes it closes, the find-the-bug symptoms, and the attendee edition.

That every checker rejects its TODO stub with a hint and passes its solution is asserted where
the cells run anyway, read from the committed notebooks (a checker and its exercise cannot
drift): tests/test_attendee.py's Run All of the attendee edition, whose checks run on the stubs
(each output has ❌ and "Hint:"), and nbval, whose checks run on the solutions (each output is
compared with the committed ✅ line).
"""

import ast
import re
from pathlib import Path

import nbformat
import pytest
from ray.job_submission import JobSubmissionClient

import scripts.notebooks as nbtools
from course_lib.teaching import exercises

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def tagged_cells(tag: str = "check"):
    """(notebook number, source) of every cell tagged `tag`, in notebook order."""
    for path in NOTEBOOKS:
        for cell in nbformat.read(path, as_version=4).cells:
            if tag in cell.metadata.get("tags", []):
                yield int(path.name[:2]), cell.source


def run_check(check_source: str, namespace: dict):
    """Execute the check cell; return the value of its last expression (the CheckResult)."""
    tree = ast.parse(check_source)
    *body, last = tree.body
    exec(compile(ast.Module(body, type_ignores=[]), "<check>", "exec"), namespace)
    return eval(compile(ast.Expression(last.value), "<check>", "eval"), namespace)


@pytest.fixture(scope="module")
def job_client():
    """The Jobs API of a real one-node cluster, for the exercise that submits a job."""
    from course_lib.cluster import LocalCluster

    with LocalCluster(num_workers=0, cpus_per_node=1) as cluster:
        yield JobSubmissionClient(cluster.dashboard_url, headers=cluster.headers)


def test_there_are_exercises():
    assert len(list(tagged_cells("exercise"))) >= 3


def test_every_lesson_has_an_exercise():
    numbers = {number for number, _ in tagged_cells()}
    assert numbers == set(range(1, len(NOTEBOOKS))), numbers


def test_checkers_are_declared_in_notebook_order_and_each_is_used_once():
    """CHECKERS lists the checkers notebook by notebook, in the order the check cells call them,
    and every checker has exactly one check cell (no dead or duplicated checker)."""
    called = [(number, name) for number, source in tagged_cells()
              for name in re.findall(r"exercises\.(check_\w+)\(", source)]
    declared = [(check.notebook, name) for name, check in exercises.CHECKERS.items()]
    assert sorted(declared, key=lambda item: item[0]) == declared, "sections out of order"
    assert sorted(called) == sorted(declared)
    assert len(set(called)) == len(called)


def test_yours_checks_each_piece_the_trainer_takes_with_its_checker():
    """`yours` finds the check of the piece `<key>` by name (`check_<key>`): every piece the
    trainer takes has one, and a piece that fails it is left out with the check's message."""
    from course_lib.teaching.pieces import PIECES

    assert {f"check_{key}" for key in PIECES} <= set(exercises.CHECKERS)
    from course_lib.sac import SACTrainer

    chosen, said = exercises.yours(SACTrainer, polyak=None)
    assert chosen.filled() == [] and said.startswith("Polyak target update: course_lib's (yours: ")
    with pytest.raises(ValueError, match="unknown piece 'replay'"):
        exercises.yours(SACTrainer, replay=object)


def test_from_notebook_brings_the_defined_pieces_of_an_earlier_notebook(tmp_path, capsys):
    """What an exercise or solution cell of notebook 04 defines comes along, run in a
    `__main__` of its own; an unfinished cell, an untagged cell or a missing notebook gives
    nothing, so the run falls back on course_lib's piece, and one printed line says so."""
    cells = [nbformat.v4.new_code_cell("def find_prefix_sum(sums, first, target):\n    return 7",
                                       metadata={"tags": ["exercise"]}),
             nbformat.v4.new_code_cell("def stratified_targets():\n    pass\nraise ValueError",
                                       metadata={"tags": ["solution"]}),
             nbformat.v4.new_code_cell("def polyak():\n    pass")]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), tmp_path / "04_replay.ipynb")
    found = exercises.from_notebook("04", "find_prefix_sum", "stratified_targets", "polyak",
                                    folder=tmp_path)
    assert list(found) == ["find_prefix_sum"] and found["find_prefix_sum"](0, 0, 0) == 7
    assert found["find_prefix_sum"].__module__ == "__main__"
    said = capsys.readouterr().out
    assert said == ("from notebook 04: 04_replay.ipynb has no working stratified_targets, "
                    "polyak (unfinished, or not saved): course_lib's instead\n")
    assert exercises.from_notebook("03", "find_prefix_sum", folder=tmp_path) == {}
    said = capsys.readouterr().out
    assert said.startswith("from notebook 03: no 03_*.ipynb in ") and said.count("\n") == 1


def test_a_checker_reports_an_exception_in_one_line_and_never_raises():
    def broken(*args):
        raise ValueError("first line\nsecond line")

    result = exercises.check_td_target(broken)
    assert not result.passed and "ValueError: first line" in result.message
    assert "second line" not in result.message


def test_student_version_moves_solutions_after_their_check_as_markdown():
    nb = nbformat.read(NOTEBOOKS[1], as_version=4)
    solutions = [c.source for c in nb.cells if "solution" in c.metadata.get("tags", [])]
    student = nbtools.student_version(nb)
    tags = [set(c.metadata.get("tags", [])) for c in student.cells]
    assert not any(t & {"solution", "ci"} for t in tags)
    exercise_cells = [c for c, t in zip(student.cells, tags, strict=True)
                      if t & {"exercise", "check"}]
    assert exercise_cells and all(c.outputs == [] for c in exercise_cells)
    assert any("raise NotImplementedError" in c.source for c in exercise_cells)
    reveals = [i for i, t in enumerate(tags) if "solution-reveal" in t]
    assert len(reveals) == len(solutions)
    for i, source in zip(reveals, solutions, strict=True):
        cell = student.cells[i]
        assert cell.cell_type == "markdown" and source.strip() in cell.source
        assert cell.source.startswith("<details>")
        assert "check" in tags[i - 1]            # right after its check
    assert "Solution" in student.cells[0].source


def test_workshop_is_created_once_and_refreshed_with_a_backup(tmp_path):
    folder = tmp_path / "workshop"
    nbtools.workshop(folder)
    mine = folder / NOTEBOOKS[1].name
    mine.write_text(mine.read_text().replace("TODO", "MY EDIT"))
    assert "exists" in nbtools.workshop(folder)
    assert "MY EDIT" in mine.read_text()                       # a second make lab keeps it
    message = nbtools.workshop(folder, refresh=True)
    [backup] = tmp_path.glob("workshop.backup-*")
    assert str(backup) in message and "MY EDIT" in (backup / mine.name).read_text()
    assert "MY EDIT" not in mine.read_text()
    assert sorted(p.name for p in folder.glob("*.ipynb")) == [p.name for p in NOTEBOOKS]


# The typical wrong answer to each systems exercise (checker, answer's name, words its ❌ message
# must contain, source):
# a checker that only rejects the TODO stub could still accept anything else.
MISTAKES = {
    "get_in_loop": ("check_fast_sum_of_squares", "fast_sum_of_squares", "one after the other", '''
def fast_sum_of_squares(square, xs):
    return sum(ray.get(square.remote(x)) for x in xs)
'''),
    "sync_rounds": ("check_async_batches", "async_batches", "not finished", '''
def async_batches(workers, weights_ref, steps, num_batches):
    batches = []
    while len(batches) < num_batches:
        batches += ray.get([w.sample.remote(weights_ref, steps) for w in workers])
    return batches[:num_batches]
'''),
    "always_copies": ("check_versioned_weights", "VersionedWeights", "again", '''
@ray.remote
class VersionedWeights:
    def __init__(self):
        self.version, self.weights = 0, None

    def push(self, weights):
        self.weights, self.version = weights, self.version + 1
        return self.version

    def pull(self, known_version=-1):
        return self.version, self.weights
'''),
    "scans_leaves": ("check_find_prefix_sum", "find_prefix_sum", "entries of the tree", '''
import numpy as np

def find_prefix_sum(sums, first_leaf, target):
    leaves = sums[first_leaf:2 * first_leaf]
    return int(np.searchsorted(np.cumsum(leaves), target, side="right"))
'''),
    "waits_for_own_add": ("check_outbox", "Outbox", "waited", '''
import numpy as np

class Outbox:
    def __init__(self, replay, send_every, priorities):
        self.replay, self.send_every, self.priorities = replay, send_every, priorities
        self.items = []

    def add(self, transition):
        self.items.append(transition)
        if len(self.items) >= self.send_every:
            self.flush()

    def flush(self):
        if self.items:
            batch = {k: np.array([t[k] for t in self.items]) for k in self.items[0]}
            self.items = []
            ray.get(self.replay.add.remote(batch, self.priorities(batch)))
'''),
    "no_back_pressure": ("check_outbox", "Outbox", "more than one add in flight", '''
import numpy as np

class Outbox:
    def __init__(self, replay, send_every, priorities):
        self.replay, self.send_every, self.priorities = replay, send_every, priorities
        self.items = []
        self.sent = []

    def add(self, transition):
        self.items.append(transition)
        if len(self.items) >= self.send_every:
            self._send()

    def _send(self):
        batch = {k: np.array([t[k] for t in self.items]) for k in self.items[0]}
        self.items = []
        self.sent.append(self.replay.add.remote(batch, self.priorities(batch)))

    def flush(self):
        if self.items:
            self._send()
        ray.get(self.sent)
'''),
    "flush_does_not_wait": ("check_outbox", "Outbox", "did not wait for its add", '''
import numpy as np

class Outbox:
    def __init__(self, replay, send_every, priorities):
        self.replay, self.send_every, self.priorities = replay, send_every, priorities
        self.items, self.adding = [], None

    def add(self, transition):
        self.items.append(transition)
        if len(self.items) >= self.send_every:
            self._send()

    def flush(self):
        if self.items:
            self._send()

    def _send(self):
        batch = {k: np.array([t[k] for t in self.items]) for k in self.items[0]}
        self.items = []
        if self.adding is not None:
            ray.get(self.adding)
        self.adding = self.replay.add.remote(batch, self.priorities(batch))
'''),
    "serial_drive": ("check_drive", "drive", "never played at the same time", '''
def drive(explorers, learner, allowed, chunks, env_steps):
    inserted = updates = 0
    while inserted < env_steps or updates < allowed(inserted):
        for explorer in explorers:
            if inserted < env_steps:
                inserted += ray.get(explorer.run.remote())
        for n in chunks(allowed(inserted), updates, 0):
            updates += ray.get(learner.train.remote(n))
    return inserted, updates
'''),
    "acting_then_learning": ("check_drive", "drive", "took turns", '''
def drive(explorers, learner, allowed, chunks, env_steps):
    inserted = updates = 0
    while inserted < env_steps or updates < allowed(inserted):
        if inserted < env_steps:
            inserted += sum(ray.get([explorer.run.remote() for explorer in explorers]))
        for n in chunks(allowed(inserted), updates, 0):
            updates += ray.get(learner.train.remote(n))
    return inserted, updates
'''),
    "terminated_hard_coded": ("check_rollout", "rollout", "terminated=False", '''
from course_lib import sac


def rollout(env, actor, follower, send, num_steps, send_every, seed):
    low, high = env.action_space.low, env.action_space.high
    obs, _ = env.reset(seed=seed)
    outbox, returns, episode_return = [], [], 0.0
    for _ in range(num_steps):
        action = actor.act(obs[None])[0]
        next_obs, reward, terminated, truncated, _ = env.step(sac.scale_action(action, low, high))
        outbox.append({"obs": obs, "action": action, "reward": reward, "next_obs": next_obs,
                       "terminated": False})
        episode_return += reward
        if len(outbox) >= send_every:
            send(outbox)
            outbox = []
        follower.step(terminated or truncated)
        if terminated or truncated:
            returns.append(episode_return)
            obs, episode_return = env.reset()[0], 0.0
        else:
            obs = next_obs
    if outbox:
        send(outbox)
    return returns
'''),
    "quick_hard_coded": ("check_launch", "launch", "COURSE_QUICK=0 in this kernel", '''
import json

from course_lib.workspace import REPO


def launch(jobs, algo, env_id, num_workers, stop, results_dir):
    argv = ["python", "-m", "course_lib", "train", "--algo", algo, "--env", env_id,
            "--num-workers", str(num_workers), "--stop", json.dumps(stop),
            "--checkpoint-at-end", "--results-dir", str(results_dir)]
    job_id = jobs.submit(argv, working_dir=REPO, env_vars={"COURSE_QUICK": "1"})
    for line in jobs.follow(job_id, timeout_s=600):
        print(line)
    return jobs.wait(job_id, timeout_s=60, raise_on_failure=False)
'''),
    "forgets_its_version": ("check_weights_follower", "WeightsFollower", "known versions", '''
from course_lib.param_server import pull_into

class WeightsFollower:
    def __init__(self, ps, name, module, pull_every):
        self.ps, self.name, self.module, self.pull_every = ps, name, module, pull_every
        pull_into(ps, name, module)
        self.since_pull = 0

    def step(self, episode_done):
        self.since_pull += 1
        if episode_done or self.since_pull >= self.pull_every:
            pull_into(self.ps, self.name, self.module)
            self.since_pull = 0
'''),
    "default_env_runners": ("check_rllib_from_apex", "rllib_from_apex", "num_env_runners", '''
from ray.rllib.algorithms.dqn import DQNConfig
from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

def rllib_from_apex(cfg):
    return (DQNConfig().environment(cfg.env_id)
            .training(lr=cfg.lr, gamma=cfg.gamma, train_batch_size_per_learner=cfg.batch_size,
                      n_step=cfg.n_step, dueling=True, double_q=True,
                      replay_buffer_config={"type": "PrioritizedEpisodeReplayBuffer",
                                            "capacity": cfg.buffer_size,
                                            "alpha": cfg.priority_alpha,
                                            "beta": cfg.priority_beta})
            .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=list(cfg.hidden))))
'''),
    "unquoted_entrypoint": ("check_submit_with_env", "submit_with_env", "other arguments", '''
def submit_with_env(client, argv, working_dir, env_vars):
    return client.submit_job(entrypoint=" ".join(argv),
                             runtime_env={"working_dir": working_dir, "env_vars": env_vars})
'''),
    # Issue 38: answers wrong in what makes them distributed (overlap, waits, finish order,
    # copies, calls in flight), each of which passed the checkers of 39201f1
    "live_mean_waits_then_sorts": ("check_live_mean", "live_mean", "as soon as its episode "
                                   "finishes", '''
def live_mean(play, seeds, tracker):
    values = ray.get([play.remote(seed) for seed in seeds])      # every episode, then ...
    for value in sorted(values):                                  # ... in sorted order
        tracker.add.remote(value)
        yield ray.get(tracker.mean.remote())
'''),
    "as_completed_reversed": ("check_as_completed", "as_completed", "order the tasks finish", '''
def as_completed(refs):
    for ref in reversed(refs):
        yield ray.get(ref)
'''),
    "squares_half_batched": ("check_fast_sum_of_squares", "fast_sum_of_squares",
                             "had been submitted", '''
def fast_sum_of_squares(square, xs):
    total = 0
    for i in range(0, len(xs), 2):            # two at a time: they overlap, the rest wait
        total += sum(ray.get([square.remote(x) for x in xs[i:i + 2]]))
    return total
'''),
    "collect_put_none": ("check_collect", "collect", "instead of the policy's current weights",
                         '''
def collect(workers, policy, steps):
    weights_ref = ray.put(None)               # one put, one reference for every worker ...
    return ray.get([w.sample.remote(weights_ref, steps) for w in workers])   # ... of nothing
'''),
    "collect_one_worker_at_a_time": ("check_collect", "collect", "one after the other", '''
from course_lib.nets import get_weights


def collect(workers, policy, steps):
    weights_ref = ray.put(get_weights(policy))
    return [ray.get(w.sample.remote(weights_ref, steps)) for w in workers]
'''),
    "sync_iteration_one_collect_per_worker": ("check_sync_iteration", "sync_iteration",
                                              "object store 2 times", '''
from course_lib import pg
from course_lib.nets import get_weights


def collect(workers, policy, steps):
    weights_ref = ray.put(get_weights(policy))
    return ray.get([w.sample.remote(weights_ref, steps) for w in workers])


def sync_iteration(workers, policy, optimizer, cfg):
    batches = [collect([w], policy, cfg.steps_per_worker)[0] for w in workers]   # one by one
    batch = pg.concat_batches(batches)
    pg.update_policy(policy, optimizer, batch, cfg)
    return batch
'''),
    "async_one_request_at_a_time": ("check_async_batches", "async_batches", "in flight", '''
def async_batches(workers, weights_ref, steps, num_batches):
    batches = []
    while len(batches) < num_batches:         # only ever the first worker, one call at a time
        [ready], _ = ray.wait([workers[0].sample.remote(weights_ref, steps)], num_returns=1)
        batches.append(ray.get(ready))
    return batches
'''),
    "cached_weights_copies_every_pull": ("check_cached_weights", "CachedWeights",
                                         "copied them again", '''
from course_lib.param_server import pull_weights


class CachedWeights:
    def __init__(self):
        self.version, self.weights = -1, None

    def get(self, ps, name):
        version, weights = pull_weights(ps, name)        # no known_version: always sent
        if version != self.version:
            self.version, self.weights = version, weights
        return self.weights
'''),
    "prefetched_waits_for_the_server": ("check_prefetched_weights", "PrefetchedWeights",
                                        "waited for the server", '''
class PrefetchedWeights:
    def __init__(self, ps, name):
        self.ps, self.name, self.version, self.weights = ps, name, -1, None

    def latest(self):
        version, ref = ray.get(self.ps.pull.remote(self.name, self.version))   # waits
        if ref is not None:
            self.version, self.weights = version, ray.get(ref)
        return self.weights
'''),
    "worker_step_around_the_cache": ("check_worker_step", "worker_step", "around the cache",
                                     '''
from course_lib.param_server import pull_weights


def worker_step(ps, cache, compute_gradients, lr):
    _, weights = pull_weights(ps, "model")            # a copy every step, changed or not
    return ray.get(ps.push_gradients.remote("model", compute_gradients(weights), lr))
'''),
    "learner_loop_without_prefetch": ("check_learner_loop", "learner_loop", "had not been asked",
                                      '''
def learner_loop(replay, train_step, updates, batch_size):
    for _ in range(updates):                  # right priorities, but it waits for every batch
        batch = ray.get(replay.sample.remote(batch_size))
        replay.update_priorities.remote(batch["indices"], train_step(batch))
'''),
}


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_systems_checker_names_the_typical_mistake(ray_local, request, mistake):
    checker, name, words, source = MISTAKES[mistake]
    namespace: dict = {"ray": ray_local}
    exec(source, namespace)
    args = [request.getfixturevalue("job_client")] if name == "submit_with_env" else []
    result = getattr(exercises, checker)(namespace[name], *args)
    assert not result.passed and words in result.message, repr(result)


# Right answers that an earlier checker refused (issue 38): (checker, answer's name, source).
RIGHT_ANSWERS = {
    "submit_all_then_get_each": ("check_fast_sum_of_squares", "fast_sum_of_squares", '''
def fast_sum_of_squares(square, xs):
    refs = [square.remote(x) for x in xs]          # every task submitted first
    return sum(ray.get(ref) for ref in refs)       # then one ray.get per ref: quiz 01 says fine
'''),
}


@pytest.mark.parametrize("case", list(RIGHT_ANSWERS))
def test_systems_checker_passes_a_right_answer(ray_local, case):
    checker, name, source = RIGHT_ANSWERS[case]
    namespace: dict = {"ray": ray_local}
    exec(source, namespace)
    result = getattr(exercises, checker)(namespace[name])
    assert result.passed, repr(result)


# Answers that passed an earlier checker without doing what the exercise asks (issue 27):
# (checker, answer's name, words its ❌ message must contain, source).
LOOPHOLES = {
    "squares_without_ray": ("check_fast_sum_of_squares", "fast_sum_of_squares", "without Ray",
                            '''
def fast_sum_of_squares(square, xs):
    return sum(x * x for x in xs)
'''),
    "chain_of_adds": ("check_tree_sum", "tree_sum", "a chain", '''
@ray.remote
def add(a, b):
    return a + b


def tree_sum(refs):
    total = refs[0]
    for ref in refs[1:]:
        total = add.remote(total, ref)
    return total
'''),
    "unused_put": ("check_collect", "collect", "by value", '''
from course_lib.nets import get_weights


def collect(workers, policy, steps):
    ray.put(get_weights(policy))
    return ray.get([w.sample.remote(get_weights(policy), steps) for w in workers])
'''),
    "nan_as_zero": ("check_time_to_goal", "time_to_goal", "nan", '''
import numpy as np


def time_to_goal(history, goal):
    for row in history:
        if np.nan_to_num(row["eval_return"]) >= goal:
            return row["time_s"], row["env_steps"]
    return None
'''),
}


@pytest.mark.parametrize("loophole", list(LOOPHOLES))
def test_checker_closes_the_loophole(ray_local, loophole):
    checker, name, words, source = LOOPHOLES[loophole]
    namespace: dict = {"ray": ray_local}
    exec(source, namespace)
    result = getattr(exercises, checker)(namespace[name])
    assert not result.passed and words in result.message, repr(result)


# Find the bug (Spinning Up's problem set 2): the exercise cell is working code with one planted
# fault. Its checker must fail it on the symptom the fault causes (words in the ❌ message), not
# on an error, and pass the fixed code of the solution cell.
FIND_THE_BUG = {
    "check_mean_return": "one after the other",
    "check_fragment_returns": "truncated by its time limit",
    "check_prefetched_weights": "kept returning version 1",
    "check_learner_loop": "the one sampled next",
    "check_learner_chunks": "calls in flight without bound",
    "check_actor_step": "not towards 0.5",
}
# ... and says the symptom first: the faulty line (these words of it) only from the second
# failed check on
FAULTY_LINE = {
    "check_mean_return": "episode_return(play, seed) for seed in seeds",
    "check_fragment_returns": "np.logical_or(terminated, truncated)",
    "check_prefetched_weights": "self.pending = self.ps.pull.remote",
    "check_learner_loop": "batch = ray.get(next_batch)",
    "check_learner_chunks": "in_flight += 1",
    "check_actor_step": "critic(obs, new_action)",
}


def find_the_bug_groups():
    for path in NOTEBOOKS:
        code = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
        for i, cell in enumerate(code):
            if "check" in cell.metadata.get("tags", []):
                name = re.search(r"exercises\.(check_\w+)\(", cell.source).group(1)
                if name in FIND_THE_BUG:
                    yield pytest.param(name, code[i - 2].source, code[i - 1].source, cell.source,
                                       id=name)


def test_every_find_the_bug_checker_has_its_cells():
    assert sorted(p.id for p in find_the_bug_groups()) == sorted(FIND_THE_BUG)


@pytest.mark.parametrize("name,buggy,fixed,check", list(find_the_bug_groups()))
def test_find_the_bug_fails_on_the_symptom_and_passes_the_fix(ray_local, name, buggy, fixed,
                                                              check):
    namespace: dict = {"exercises": exercises}
    exec(buggy, namespace)
    result = run_check(check, namespace)
    assert not result.passed and FIND_THE_BUG[name] in result.message, repr(result)
    assert "raised" not in result.message          # the planted fault runs: it is not an error
    exec(fixed, namespace)
    result = run_check(check, namespace)
    assert result.passed, repr(result)


@pytest.mark.parametrize("name", list(FAULTY_LINE))
def test_find_the_bug_names_the_line_only_on_a_second_failed_run(ray_local, monkeypatch, name):
    """The first failed check gives the symptom and a way to see it; the second names the line;
    `quietly` (what `yours` calls) counts no failure."""
    from course_lib.teaching.exercises import core

    monkeypatch.setattr(core, "FAILED", core.Counter())
    [(_, buggy, _, check_cell)] = [p.values for p in find_the_bug_groups() if p.id == name]
    namespace: dict = {}
    exec(buggy, namespace)
    piece = namespace[re.search(r"check_\w+\((\w+)\)", check_cell)[1]]
    check = getattr(exercises, name)
    assert not check.quietly(piece)
    first = check(piece)
    assert not first and FAULTY_LINE[name] not in first.hint, first.hint
    second = check(piece)
    assert not second and FAULTY_LINE[name] in second.hint, second.hint
    assert second.message == first.message
