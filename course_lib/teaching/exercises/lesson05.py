"""Checkers for notebook 05, Ape-X."""

from __future__ import annotations

import time

import ray

from course_lib.teaching.exercises.core import _Failed, checker, require_close


@checker(5, "dueling_q",
         "Q = V + A - mean A, row by row.")
def check_dueling_q(dueling_q):
    """dueling_q(value (B, 1), advantages (B, A)) = V + A - mean_a A: the dueling head."""
    import torch

    value = torch.tensor([[1.0], [-2.0]])
    advantages = torch.tensor([[1.0, 2.0, 6.0], [0.0, 0.0, 3.0]])
    expected = value + advantages - advantages.mean(dim=1, keepdim=True)
    got = torch.as_tensor(dueling_q(value, advantages), dtype=torch.float32)
    if got.shape != expected.shape:
        raise _Failed(f"it returned shape {tuple(got.shape)}, "
                      f"expected {tuple(expected.shape)}.",
                      "V has shape (B, 1) and broadcasts over the A actions.")
    if torch.allclose(got, value + advantages):
        raise _Failed("it adds V and A but does not subtract the mean advantage.",
                      "Without it V and A are not identifiable: subtract "
                      "advantages.mean(dim=1, keepdim=True).")
    if torch.allclose(got, value + advantages - advantages.max(dim=1, keepdim=True).values):
        raise _Failed("it subtracts the max advantage; Ape-X (like Wang et al.) uses the mean.",
                      "Use advantages.mean(dim=1, keepdim=True).")
    if not torch.allclose(got, expected):
        raise _Failed(f"it gave {got.tolist()}, expected {expected.tolist()}.",
                      "Q = V + A - mean over actions of A, per row.")


@checker(5, "explorer_epsilons",
         "explorer 0 explores most, the last one least.")
def check_explorer_epsilons(explorer_epsilons):
    """explorer_epsilons(n, eps, alpha): Ape-X's eps_i = eps^(1 + alpha i / (n - 1)) for each i."""
    import numpy as np

    from course_lib.dqn.learner import epsilon_for_explorer

    for n in (1, 2, 4, 8):
        expected = [epsilon_for_explorer(i, n, 0.4, 7.0) for i in range(n)]
        got = np.asarray(explorer_epsilons(n, 0.4, 7.0), dtype=float)
        if got.shape != (n,):
            raise _Failed(f"for n={n} it returned {got.size} values, expected {n}.",
                          "One epsilon per explorer, i = 0 .. n-1.")
        if n == 1 and not np.isclose(got[0], 0.4):
            raise _Failed(f"a single explorer got {got[0]:.4g}, expected eps = 0.4.",
                          "With n = 1 the formula divides by zero: give the one explorer "
                          "eps itself.")
        require_close(got, expected, f"for n={n} it gave {np.round(got, 4).tolist()}, "
                      f"expected {np.round(expected, 4).tolist()}.",
                      "eps ** (1 + alpha * i / (n - 1)) for i in range(n).")


@checker(5, "updates_allowed",
         "updates * batch / inserted stays at the replay ratio.")
def check_updates_allowed(updates_allowed):
    """updates_allowed(inserted, replay_ratio, batch_size): the replay-ratio throttle."""

    cases = [(1_000, 8.0, 64, 125), (1_000, 16.0, 64, 250), (100, 1.0, 64, 1),
             (63, 1.0, 64, 0), (0, 8.0, 64, 0)]
    for inserted, ratio, batch, expected in cases:
        got = updates_allowed(inserted, ratio, batch)
        if not isinstance(got, int):
            raise _Failed(f"it returned {type(got).__name__} {got!r}, expected an int.",
                          "A number of updates is a whole number: round down with int().")
        if got != expected:
            raise _Failed(f"for {inserted} inserted transitions, ratio {ratio:g} and batch "
                          f"{batch} it allowed {got} updates, expected {expected}.",
                          "updates * batch_size / inserted = replay_ratio, solved for "
                          "updates and rounded down.")


@ray.remote(num_cpus=0)
class _SlowReplay:
    """A stand-in for the replay actor: each add takes `delay` seconds and is logged."""

    def __init__(self, delay: float):
        self.delay, self.adds = delay, []

    def add(self, batch: dict, priorities) -> int:
        time.sleep(self.delay)
        self.adds.append({"x": list(batch["x"]), "priorities": list(priorities),
                          "done_at": time.time()})
        return len(priorities)

    def log(self) -> list[dict]:
        return self.adds


@checker(5, "Outbox", "batches of 50 with priorities, one add in flight, never waiting for it, "
         "and a flush that waits until all is stored.")
def check_outbox(outbox_class):
    """Outbox(replay, send_every, priorities) must send one replay.add.remote(batch, priorities)
    per `send_every` transitions (and the rest on flush), in order, without waiting for that add
    but with at most one add in flight; flush() returns once everything is stored (the stand-in
    replay logs when each add is done: the last must be done before flush returns)."""
    import numpy as np

    def priorities(batch):
        return np.abs(np.asarray(batch["x"], dtype=float)) + 1.0

    replay = _SlowReplay.remote(0.5)
    try:
        ray.get(replay.log.remote())
        outbox = outbox_class(replay, 50, priorities)
        slowest_add, second_send_done = 0.0, None
        for i in range(120):
            start = time.perf_counter()
            outbox.add({"x": float(i), "reward": 1.0})
            if i < 60:                                 # the first send happens at i = 49
                slowest_add = max(slowest_add, time.perf_counter() - start)
            if i == 99:
                second_send_done = time.time()
        outbox.flush()
        flushed_at = time.time()
        log = ray.get(replay.log.remote())
    finally:
        ray.kill(replay)
    sizes = [len(a["x"]) for a in log]
    if sizes != [50, 50, 20]:
        raise _Failed(f"120 transitions with send_every=50 reached the replay as batches of "
                      f"{sizes}, expected [50, 50, 20] (the last 20 on flush).",
                      "Send when the outbox holds send_every transitions; flush sends the rest "
                      "and waits for the last add.")
    if [x for a in log for x in a["x"]] != [float(i) for i in range(120)]:
        raise _Failed("the transitions arrived out of order or changed.",
                      "Stack the outbox in the order added: {key: np.array([t[key] ...])}.")
    if not all(np.allclose(a["priorities"], priorities({"x": a["x"]})) for a in log):
        raise _Failed("the priorities sent are not priorities(batch) of the batch sent.",
                      "Compute them on the stacked batch and pass them with it.")
    if slowest_add > 0.3:
        raise _Failed(f"one add() took {slowest_add:.2f} s: it waited for the replay actor to "
                      "store the batch it had just sent.",
                      "Keep the reference of replay.add.remote(...) and wait for it only before "
                      "the next send.")
    if log[-1]["done_at"] > flushed_at:
        raise _Failed(f"flush() returned {log[-1]['done_at'] - flushed_at:.2f} s before the "
                      "replay actor had stored the last batch: it did not wait for its add, so "
                      "a run could end with transitions sent but never stored.",
                      "After sending what is left, ray.get the last add's reference.")
    if log[0]["done_at"] > second_send_done:
        raise _Failed("the second batch was sent while the first add was still running: more "
                      "than one add in flight, so a slow replay actor lets them pile up.",
                      "Before each send, ray.get the previous add's reference (back-pressure).")


@checker(5, "learner_chunks", "at most two learner calls in flight, however fast data arrives.")
def check_learner_chunks(learner_chunks):
    """Find the bug: learner_chunks(due, submitted, in_flight, chunk) must keep at most
    `distributed.MAX_LEARNER_CALLS` learner calls in flight. The checker plays a driver whose
    data arrives faster than its learner trains (300 updates due per turn, one call of 50
    finished per turn) and watches the learner's queue."""
    from course_lib.distributed import MAX_LEARNER_CALLS

    queue, submitted, due, peak = [], 0, 0, 0
    for _turn in range(10):
        due += 300
        sizes = [int(n) for n in learner_chunks(due, submitted, len(queue), 50)]
        if any(not 1 <= n <= 50 for n in sizes) or sum(sizes) > due - submitted:
            raise _Failed(f"with {due - submitted} updates due it asked for chunks {sizes}.",
                          "Chunks of 1 to `chunk` updates, no more in all than is due.")
        if not sizes and not queue:
            raise _Failed("with updates due and no call in flight it sent none: the learner "
                          "would wait forever.", "Send a chunk while fewer than 2 are in flight.")
        queue += sizes
        submitted += sum(sizes)
        peak = max(peak, len(queue))
        queue.pop(0)                                  # the learner finishes one call per turn
    if peak > MAX_LEARNER_CALLS:
        raise _Failed(f"the learner's queue grew to {peak} calls in 10 turns of a driver whose "
                      "learner finishes one call per turn: calls in flight without bound, each "
                      "run long after it was due.",
                      "Play the check's driver by hand: call it with 300 more due per turn, "
                      "one call finishing per turn, and print the sizes it returns each turn. "
                      "How many calls does it think are in flight while it loops?",
                      line="The loop tests `in_flight < 2` but never counts the calls it has "
                      "just added: add `in_flight += 1` after each chunk it appends.")
    if learner_chunks(120, 0, 1, 50) != [50]:
        raise _Failed("with one call in flight and 120 updates due it did not send one more.",
                      f"Keep {MAX_LEARNER_CALLS} calls queued, so the learner never waits for "
                      "the driver.")


def _pending(refs: list) -> list:
    """The refs among `refs` whose calls are still running."""
    return ray.wait(refs, num_returns=len(refs), timeout=0)[1] if refs else []


class _Submitted:
    """A stand-in actor's handle for the assembled driver: forwards `method.remote(...)` and
    records, at each call, how many of its own earlier calls were still in flight (`log`) and
    how many explorer calls, of any explorer, were (`playing`: the explorers' refs, shared)."""

    def __init__(self, actor, method: str, log: list, playing: list, overlap: list):
        self.actor, self.method, self.log, self.refs = actor, method, log, []
        self.playing, self.overlap = playing, overlap
        setattr(self, method, self)

    def remote(self, *args):
        self.log.append(len(_pending(self.refs)))
        self.overlap.append(len(_pending(self.playing)))
        ref = getattr(self.actor, self.method).remote(*args)
        self.refs.append(ref)
        if self.method == "run":
            self.playing.append(ref)
        return ref


@ray.remote(num_cpus=0)
class _StandInExplorer:
    """Plays for `seconds` and reports `transitions` inserted."""

    def __init__(self, transitions: int, seconds: float):
        self.transitions, self.seconds = transitions, seconds

    def run(self) -> int:
        time.sleep(self.seconds)
        return self.transitions


@ray.remote(num_cpus=0)
class _StandInLearner:
    """Runs n updates of `seconds` each and reports n."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def train(self, n: int) -> int:
        time.sleep(n * self.seconds)
        return n


def stand_ins(num_explorers: int = 3, transitions: int = 100, explore_s: float = 0.01,
              update_s: float = 0.002):
    """(explorers, learner, in_flight) for trying a driver loop without Ray's trainer: stand-in
    explorers whose `run.remote()` plays `explore_s` and inserts `transitions`, a learner whose
    `train.remote(n)` takes n * `update_s` and returns n. `in_flight` records, each time a
    handle is called, the calls still in flight: per handle its own ("learner", 0, 1, ...), and
    the explorers' calls of every explorer, at the explorers' calls ("playing") and at the
    learner's ("playing while learning")."""
    in_flight: dict = {"learner": [], "playing": [], "playing while learning": []}
    explorers, playing = [], []
    for i in range(num_explorers):
        in_flight[i] = []
        explorers.append(_Submitted(_StandInExplorer.remote(transitions, explore_s), "run",
                                    in_flight[i], playing, in_flight["playing"]))
    learner = _Submitted(_StandInLearner.remote(update_s), "train", in_flight["learner"],
                         playing, in_flight["playing while learning"])
    return explorers, learner, in_flight


@checker(5, "drive", "explorers playing side by side while the learner trains, the learner fed "
         "at the replay ratio, calls bounded.")
def check_drive(drive):
    """Assemble: drive(explorers, learner, allowed, chunks, env_steps) runs the driver's loop
    on stand-in actors with course_lib's throttle and learner chunks, and must end with every
    update the inserted transitions pay for done, one call per explorer and at most two
    learner calls in flight; the explorers' calls must overlap in time (two or more in flight
    at once) and the learner must be given work while explorers play (the stand-ins record
    the calls in flight at each call)."""
    from functools import partial

    from course_lib.distributed import MAX_LEARNER_CALLS, learner_chunks
    from course_lib.trainer import updates_due

    explorers, learner, in_flight = stand_ins(explore_s=0.03)
    try:
        allowed = partial(updates_due, ratio=16 / 64, learning_starts=0)
        inserted, updates = drive(explorers, learner, allowed, partial(learner_chunks,
                                                                       chunk=50), 3_000)
    finally:
        for handle in [*explorers, learner]:
            ray.kill(handle.actor)
    booked = 100 * sum(len(in_flight[i]) for i in range(3))
    if inserted != booked or inserted < 3_000:
        raise _Failed(f"it returned {inserted:,} transitions inserted; the explorers' calls "
                      f"made {booked:,} (at least 3,000 asked for).",
                      "Add each finished explorer call's result to `inserted`, and keep the "
                      "explorers playing until env_steps are in.")
    for i in range(3):
        if max(in_flight[i], default=0) > 0:
            raise _Failed(f"explorer {i} was given a new call while one was still in flight.",
                          "Start an explorer only when none of its calls is in `tasks`.")
    if max(in_flight["playing"], default=0) < 1:
        raise _Failed("its explorers never played at the same time: each run.remote() went out "
                      "only after the previous explorer call had finished, so three explorers "
                      "play no faster than one.",
                      "Send a call to every idle explorer first, then ray.wait for whichever "
                      "call finishes first.")
    if max(in_flight["playing while learning"], default=0) < 1:
        raise _Failed("the learner was given work only while no explorer played: acting and "
                      "learning took turns instead of running at the same time.",
                      "Send the learner its chunks while the explorers' calls are in flight; "
                      "do not wait for every explorer first.")
    if max(in_flight["learner"], default=0) >= MAX_LEARNER_CALLS:
        raise _Failed(f"the learner had {max(in_flight['learner']) + 1} calls in flight.",
                      "Send what `chunks(due, submitted, in_flight)` returns, with `in_flight` "
                      "the learner calls in `tasks`.")
    if updates != allowed(inserted):
        raise _Failed(f"the learner did {updates:,} updates for {inserted:,} transitions; the "
                      f"replay ratio pays for {allowed(inserted):,}.",
                      "Each turn send the chunks now due, add each finished learner call's "
                      "result to `updates`, and loop until no call is in flight.")
