"""Checkers for notebook 05, Ape-X."""

from __future__ import annotations

import time

import ray

from course_lib.exercises.core import _Failed, checker, require_close


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


@checker(5, "Outbox", "batches of 50 with priorities, one add in flight, never waiting for it.")
def check_outbox(outbox_class):
    """Outbox(replay, send_every, priorities) must send one replay.add.remote(batch, priorities)
    per `send_every` transitions (and the rest on flush), in order, without waiting for that add
    but with at most one add in flight; flush() returns once everything is stored."""
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
    if log[0]["done_at"] > second_send_done:
        raise _Failed("the second batch was sent while the first add was still running: more "
                      "than one add in flight, so a slow replay actor lets them pile up.",
                      "Before each send, ray.get the previous add's reference (back-pressure).")
