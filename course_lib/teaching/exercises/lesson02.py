"""Checkers for notebook 02, parallel rollouts."""

from __future__ import annotations

import time

import ray

from course_lib.teaching.exercises.core import (
    _Failed,
    _Spy,
    _watch_waits,
    checker,
    require_close,
)


@checker(2, "reward_to_go",
         "G_t = r_t + gamma * G_{t+1}, computed backwards.")
def check_reward_to_go(reward_to_go):
    """reward_to_go(rewards, gamma) must match G_t = r_t + gamma * G_{t+1} for one episode."""
    import numpy as np

    rewards = np.array([1.0, 0.0, 2.0, 1.0])
    expected = np.array([1 + 0.5 * 0 + 0.25 * 2 + 0.125 * 1, 0 + 0.5 * 2 + 0.25 * 1,
                         2 + 0.5 * 1, 1.0])
    got = np.asarray(reward_to_go(rewards, 0.5), dtype=float)
    if got.shape != expected.shape:
        raise _Failed(f"it returned shape {got.shape}, expected {expected.shape}.",
                      "Return one value per step.")
    if np.allclose(got, np.cumsum(rewards[::-1])[::-1]):
        raise _Failed("it ignores gamma (that is the undiscounted sum).",
                      "Multiply the running sum by gamma before adding r_t.")
    require_close(got, expected, f"for rewards [1, 0, 2, 1] and gamma 0.5 it gave "
                  f"{np.round(got, 3)}, expected {expected}.",
                  "Loop t from the last step backwards: G_t = r_t + gamma * G_{t+1}.")


class _Broadcast:
    """What the attendee's code does with the weights, observed: the value of each `ray.put`,
    and in `log`, in the order they happened, each `sample` call of the spied `workers`
    (method, args, kwargs, the batch's ref) and each wait for an unfinished batch (a number)."""

    def __init__(self, actors):
        self.puts, self.log = [], []
        self.workers = [_Spy(actor, self.log, "sample") for actor in actors]

    def calls(self) -> list:
        return [entry for entry in self.log if isinstance(entry, tuple)]

    def __enter__(self):
        self.put = put = ray.put

        def counting_put(value, *args, **kwargs):
            self.puts.append(value)
            return put(value, *args, **kwargs)

        ray.put = counting_put
        self.watch = _watch_waits(self.log, lambda ref: ref in {c[3] for c in self.calls()},
                                  waits=True)
        self.watch.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.watch.__exit__(*exc)
        ray.put = self.put

    def require(self, current: dict, what: str) -> None:
        """_Failed unless every sample call got the policy's `current` weights, those went
        into the object store once, and every worker was asked before the driver first
        waited for a batch."""
        import numpy as np

        def same(weights) -> bool:
            return isinstance(weights, dict) and set(weights) == set(current) and all(
                np.array_equal(weights[k], current[k]) for k in current)

        sent = [args[0] if args else kwargs.get("weights") for _, args, kwargs, _ in self.calls()]
        got = [ray.get(w) if isinstance(w, ray.ObjectRef) else w for w in sent]
        if wrong := [w for w in got if not same(w)]:
            raise _Failed(f"{what}: a worker was handed {wrong[0]!r:.40} instead of the "
                          "policy's current weights, so it sampled with whatever weights it "
                          "had.", "ray.put(get_weights(policy)) once and hand that reference "
                          "to every sample.remote call.")
        by_value = sum(not isinstance(w, ray.ObjectRef) for w in sent)
        copies = sum(map(same, self.puts)) + by_value
        if by_value:
            raise _Failed(f"{what}: it passed the weights to sample.remote by value, so Ray "
                          f"copied them into the object store once per call: {copies} copies "
                          "of one set of weights.",
                          "Hand every sample.remote call the reference that ray.put returned.")
        if copies != 1:
            raise _Failed(f"{what}: the weights went into the object store {copies} times for "
                          f"{len(self.workers)} workers; one copy, read by all, is enough.",
                          "Call ray.put(get_weights(policy)) once, before the loop over "
                          "workers.")
        first_wait = next((i for i, e in enumerate(self.log) if not isinstance(e, tuple)),
                          len(self.log))
        if first_wait < len(self.workers):
            raise _Failed(f"{what}: the driver waited for a batch when only {first_wait} of the "
                          f"{len(self.workers)} workers had been asked for one: they sampled "
                          "one after the other, not side by side.",
                          "Ask every worker first (a list of sample.remote references), then "
                          "wait for all of them with one ray.get.")


@checker(2, "collect",
         "one copy of the current weights, every worker asked before the first wait.")
def check_collect(collect):
    """collect(workers, policy, steps) must hand every worker's sample call the policy's
    current weights as one object-store copy (a ray.put once), and ask every worker before it
    waits for a batch: observed in its ray.put and sample calls, and in its waits."""
    import gymnasium as gym

    from course_lib import pg
    from course_lib.nets import get_weights

    sampler = pg.EpisodeSampler.options(num_cpus=0)   # placed even if a CPU is still held
    actors = [sampler.remote("CartPole-v1", (16,), 0.99, seed) for seed in (1, 2)]
    policy = pg.make_policy(gym.make("CartPole-v1"), (16,))
    try:
        with _Broadcast(actors) as seen:
            batches = collect(seen.workers, policy, 20)
        if not isinstance(batches, list) or len(batches) != 2:
            raise _Failed(f"it returned {type(batches).__name__}, expected a list of 2 "
                          "batches.", "ray.get a list of worker.sample.remote(...) references.")
        if any(len(b["reward"]) < 20 for b in batches):
            raise _Failed("a batch has fewer than `steps` steps.",
                          "Pass `steps` as the second argument of sample.remote.")
        seen.require(get_weights(policy), "collect")
    finally:
        for actor in actors:
            ray.kill(actor)


@ray.remote(num_cpus=0)
class _FakeSampler:
    """A stand-in for a rollout worker: `sample` takes `delay` seconds and says who made it."""

    def __init__(self, name: str, delay: float):
        self.name, self.delay, self.calls = name, delay, 0

    def ready(self) -> bool:
        return True

    def sample(self, weights, min_steps: int) -> dict:
        import numpy as np

        self.calls += 1
        time.sleep(self.delay)
        return {"worker": self.name, "reward": np.zeros(min_steps, np.float32)}

    def num_calls(self) -> int:
        return self.calls


@checker(2, "async_batches", "one request in flight per worker, batches taken as they finish.")
def check_async_batches(async_batches):
    """async_batches(workers, weights_ref, steps, num_batches) must keep one sample request in
    flight per worker and return the batches in the order they finish: with one fast and one
    slow worker, the fast one supplies them, the slow one has its request in flight all along,
    and ray.get never waits on an unfinished batch (observed, not timed)."""
    fast, slow = _FakeSampler.remote("fast", 0.05), _FakeSampler.remote("slow", 3.0)
    ray.get([fast.ready.remote(), slow.ready.remote()])
    with _watch_waits([]) as blocked:
        batches = async_batches([fast, slow], ray.put({"w": 0}), 8, 6)
    try:
        calls = ray.get([fast.num_calls.remote(), slow.num_calls.remote()], timeout=10)
    finally:
        for actor in (fast, slow):
            ray.kill(actor)
    if not isinstance(batches, list) or len(batches) != 6:
        raise _Failed(f"it returned {type(batches).__name__} of length "
                      f"{len(batches) if hasattr(batches, '__len__') else '-'}, expected a "
                      "list of 6 batches.",
                      "Loop until you have num_batches batches, appending each finished one.")
    if blocked:
        raise _Failed("it called ray.get on a batch that was not finished: the driver waited "
                      "for a slow worker.",
                      "ready, _ = ray.wait(list(in_flight), num_returns=1), then ray.get only "
                      "the ready reference.")
    sources = [b.get("worker") if isinstance(b, dict) else None for b in batches]
    if sources.count("fast") < 5:
        raise _Failed(f"the batches came from {sources}: the slow worker (3 s per batch) held "
                      "the fast one (0.05 s) back.",
                      "Give a worker its next request as soon as its batch arrives, and "
                      "take batches in the order they finish.")
    if calls[1] == 0:
        raise _Failed("the slow worker was never asked for a batch: one request was in flight "
                      "at a time, where each worker should have its own.",
                      "Start with one request per worker: {w.sample.remote(...): w for w in "
                      "workers}.")
    if calls[0] > 6 + 1 or calls[1] > 1:
        raise _Failed(f"it sent {calls[0]} requests to the fast worker and {calls[1]} to the "
                      "slow one for 6 batches: more than one request in flight per worker.",
                      "Keep a dict {reference: worker}; submit one new request to a worker only "
                      "after you took its batch.")


@checker(2, "fragment_returns", "a time limit bootstraps from the critic, a fall ends the sum.")
def check_fragment_returns(fragment_returns):
    """Find the bug: fragment_returns(rewards, terminated, truncated, next_values, gamma) over
    a fragment holding a terminated episode, a truncated one, and one cut off by the
    fragment's end: only the terminated one ends its sum with zero."""
    import numpy as np

    rewards = np.ones(6, np.float32)
    terminated = np.array([0, 0, 0, 1, 0, 0], bool)
    truncated = np.array([0, 0, 1, 0, 0, 0], bool)          # step 2 hit the time limit
    next_values = np.array([1.0, 2.0, 8.0, 3.0, 5.0, 4.0], np.float32)
    expected = np.array([2.75, 3.5, 5.0, 1.0, 2.5, 3.0])
    got = np.asarray(fragment_returns(rewards, terminated, truncated, next_values, 0.5),
                     dtype=float)
    if got.shape != expected.shape:
        raise _Failed(f"it returned shape {got.shape}, expected {expected.shape}.",
                      "Return one value per step.")
    if np.isclose(got[2], 1.0):
        raise _Failed("at step 2 the episode was truncated by its time limit, and its return "
                      "came out as 1.0 = r_2 alone, as if the pole had fallen there; expected "
                      "5.0 = r_2 + 0.5 * V(s_3) = 1 + 0.5 * 8.",
                      "terminated and truncated both end an episode, but only one ends the "
                      "task. What should the sum go on with after a time limit?",
                      "`done = np.logical_or(terminated, truncated)` makes a time limit zero "
                      "the future as a fall does; after a truncation it goes on from "
                      "next_values[t].")
    require_close(got, expected, f"for the fragment in the checker it gave {np.round(got, 3)}, "
                  f"expected {expected}.",
                  "Walk backwards: restart at zero after a termination, at next_values[t] "
                  "after a truncation, and at next_values[-1] at the fragment's end.")


@checker(2, "sync_iteration", "your collect, one batch, one update: the same step as train_sync.")
def check_sync_iteration(sync_iteration):
    """sync_iteration(workers, policy, optimizer, cfg) must collect one batch per worker with
    the current weights (one copy, every worker asked before the first wait: `_Broadcast`),
    concatenate them and take one `pg.update_policy` step on the result: the policy's new
    weights must be those of that step on the batches the workers returned."""
    import torch

    from course_lib import pg
    from course_lib.nets import get_weights

    cfg = pg.PGConfig(steps_per_worker=64, hidden=(16,), seed=3)
    policy, optimizer = pg.make_policy_and_optimizer(cfg)
    twin, twin_optimizer = pg.make_policy_and_optimizer(cfg)          # same seed: same start
    sampler = pg.EpisodeSampler.options(num_cpus=0)   # placed even if a CPU is still held
    actors = [sampler.remote(cfg.env_id, cfg.hidden, cfg.gamma, seed) for seed in (5, 6)]
    before = get_weights(policy)
    try:
        with _Broadcast(actors) as seen:
            batch = sync_iteration(seen.workers, policy, optimizer, cfg)
        if len(seen.calls()) != len(actors):
            raise _Failed(f"the workers were asked for {len(seen.calls())} batches, expected "
                          f"one each ({len(actors)}).",
                          "Call your collect(workers, policy, steps) once.")
        seen.require(before, "sync_iteration")
        given = pg.concat_batches(ray.get([call[3] for call in seen.calls()]))
    finally:
        for actor in actors:
            ray.kill(actor)
    if not isinstance(batch, dict) or len(batch.get("reward", ())) != len(given["reward"]):
        raise _Failed("it did not return the concatenated batch of every worker's steps.",
                      "Return pg.concat_batches(the list your collect returned).")
    if len(given["reward"]) < len(actors) * cfg.steps_per_worker:
        raise _Failed("a worker was asked for fewer than cfg.steps_per_worker steps.",
                      "Pass cfg.steps_per_worker to collect as `steps`.")
    pg.update_policy(twin, twin_optimizer, given, cfg)
    same = all(torch.allclose(a, b, atol=1e-6) for a, b in
               zip(policy.state_dict().values(), twin.state_dict().values(), strict=True))
    unchanged = all(torch.equal(a, b) for a, b in zip(
        policy.state_dict().values(), pg.make_policy_and_optimizer(cfg)[0].state_dict().values(),
        strict=True))
    if unchanged:
        raise _Failed("the policy's weights did not change: no update was made.",
                      "Finish with pg.update_policy(policy, optimizer, batch, cfg).")
    if not same:
        raise _Failed("the policy moved, but not by one update_policy step on the batch the "
                      "workers returned.",
                      "Update once, on the concatenation of all the workers' batches.")
