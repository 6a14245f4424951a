"""Checkers for notebook 03, parameter server."""

from __future__ import annotations

import ray

from course_lib.teaching.exercises.core import _Failed, _watch_waits, checker


@checker(3, "average_gradients",
         "the element-wise mean of every entry.")
def check_average_gradients(average_gradients):
    """average_gradients(list of {name: array}) must return {name: element-wise mean}."""
    import numpy as np

    rng = np.random.default_rng(0)
    grads = [{"w": rng.normal(size=(3, 2)), "b": rng.normal(size=2)} for _ in range(4)]
    got = average_gradients(grads)
    if not isinstance(got, dict) or set(got) != {"w", "b"}:
        raise _Failed(f"it returned {type(got).__name__} with keys "
                      f"{sorted(got) if isinstance(got, dict) else '-'}; expected keys b, w.",
                      "Build the result with one entry per name of the first dict.")
    for name in ("w", "b"):
        expected = sum(g[name] for g in grads) / len(grads)
        if np.shape(got[name]) != expected.shape or not np.allclose(got[name], expected):
            raise _Failed(f"entry {name!r} is not the mean over the workers.",
                          "np.mean([g[name] for g in grads_list], axis=0) averages "
                          "element by element.")


@checker(3, "VersionedWeights", "a pull copies the weights only when they are newer.")
def check_versioned_weights(server_class):
    """VersionedWeights must be a Ray actor: push(weights) returns the new version (1, 2, ...),
    pull(known_version) returns (version, weights), or (version, None) when the caller already
    has the newest version."""
    import numpy as np

    if not hasattr(server_class, "remote"):
        raise _Failed("it is a plain class, not a Ray actor.",
                      "Decorate the class with @ray.remote.")
    server = server_class.remote()
    try:
        versions = ray.get([server.push.remote({"w": np.zeros(3)})])
        if versions != [1]:
            raise _Failed(f"the first push returned {versions[0]!r}, expected version 1.",
                          "Start at version 0 and add one per push; return the new version.")
        version, weights = ray.get(server.pull.remote(-1))
        if version != 1 or weights is None or not np.array_equal(weights["w"], np.zeros(3)):
            raise _Failed(f"pull(-1) after one push gave version {version!r} and weights "
                          f"{weights!r}.", "A caller with an older version gets the weights.")
        if ray.get(server.pull.remote(1)) != (1, None):
            raise _Failed("pull(1) sent the weights again although the caller has version 1.",
                          "When known_version equals the current version return (version, None): "
                          "nothing is copied.")
        if ray.get(server.push.remote({"w": np.ones(3)})) != 2:
            raise _Failed("the second push did not return version 2.", "Count every push.")
        version, weights = ray.get(server.pull.remote(1))
        if version != 2 or weights is None or not np.array_equal(weights["w"], np.ones(3)):
            raise _Failed("after a second push, pull(1) did not return version 2 and the new "
                          "weights.", "Compare known_version with the current version.")
    finally:
        ray.kill(server)


def _poll(latest, wanted=None, polls: int = 150, pause_s: float = 0.02) -> bool:
    """Call latest() until it returns weights whose "w" equals `wanted` (then True), at most
    `polls` times, pausing in between (with wanted=None: all `polls` times, then False)."""
    import time

    import numpy as np

    for _ in range(polls):
        weights = latest()
        if wanted is not None and weights is not None and np.array_equal(weights["w"], wanted):
            return True
        time.sleep(pause_s)
    return False


@ray.remote(num_cpus=0)
class _CountingServer:
    """A ParameterStoreActor that counts the pulls it answered with weights (copies)."""

    def __init__(self):
        from course_lib.param_server import ParameterStoreActor

        self.server = ParameterStoreActor.__ray_actor_class__()
        self.pulls = self.copies = 0

    def push(self, name, weights):
        return self.server.push(name, weights)

    def pull(self, name, known_version=-1):
        version, ref = self.server.pull(name, known_version)
        self.pulls, self.copies = self.pulls + 1, self.copies + (ref is not None)
        return version, ref

    def counts(self) -> tuple[int, int]:
        return self.pulls, self.copies


@checker(3, "CachedWeights",
         "copies only when the version changed.")
def check_cached_weights(cached_class):
    """CachedWeights.get must return the newest weights and have the server copy them only
    when the version changed: the server counts the pulls it answers with weights."""
    import numpy as np

    server = _CountingServer.remote()
    try:
        ray.get(server.push.remote("net", {"w": np.zeros(3, np.float32)}))
        cache = cached_class()
        first, _ = cache.get(server, "net"), cache.get(server, "net")
        if first is None or not np.array_equal(first["w"], np.zeros(3)):
            raise _Failed("the first get did not return the pushed weights.",
                          "Start with version -1 so the first pull always copies.")
        _, copies = ray.get(server.counts.remote())
        if copies > 1:
            raise _Failed(f"two gets of one version made the server copy the weights {copies} "
                          "times: each get copied them again although nothing had changed.",
                          "Pull with the version you hold (known_version): the server then "
                          "sends None, and you return the weights you kept.")
        ray.get(server.push.remote("net", {"w": np.ones(3, np.float32)}))
        third = cache.get(server, "net")
        if third is None or not np.array_equal(third["w"], np.ones(3)):
            raise _Failed("after a new push, get still returned the old weights.",
                          "Remember the version from each pull and pass it as known_version.")
    finally:
        ray.kill(server)


@checker(3, "PrefetchedWeights", "a pull is always in flight; new versions arrive, old ones "
         "are not copied again.")
def check_prefetched_weights(prefetched_class):
    """Find the bug: PrefetchedWeights(ps, name).latest() must return the newest weights that
    have arrived without waiting, keep asking the server for newer ones, and have the server
    copy a version to it only once."""
    import numpy as np

    server, waited = _CountingServer.remote(), []
    try:
        ray.get(server.push.remote("policy", {"w": np.zeros(3, np.float32)}))
        with _watch_waits(waited):
            cache = prefetched_class(server, "policy")
            arrived = _poll(cache.latest, np.zeros(3))
        if not arrived:
            raise _Failed("latest() never returned the weights pushed before it started.",
                          "Take the pull's result once ray.wait says it is ready.")
        with _watch_waits(waited):
            _poll(cache.latest, polls=20)         # nothing new: every pull comes back empty
        _, copies = ray.get(server.counts.remote())
        if copies > 1:
            raise _Failed(f"the server copied the same version to it {copies} times.",
                          "Pull with the version you already hold: the server then sends None.")
        ray.get(server.push.remote("policy", {"w": np.ones(3, np.float32)}))
        with _watch_waits(waited):
            arrived = _poll(cache.latest, np.ones(3))
        if not arrived:
            pulls, _ = ray.get(server.counts.remote())
            raise _Failed(f"after the learner pushed version 2, latest() kept returning "
                          f"version 1's weights; the server was asked {pulls} time(s) in all.",
                          "Push twice, calling latest() in between, and count the pulls the "
                          "server answered: when does it stop being asked?",
                          "under `if ready:` the answer is read, but no new pull is sent; add "
                          "`self.pending = self.ps.pull.remote(self.name, self.version)` there.")
        if waited:
            raise _Failed("latest() waited for the server's answer (a ray.get of a pull still "
                          "in flight): an explorer would stop acting every time it asks.",
                          "Look with ray.wait([self.pending], timeout=0) and ray.get the pull "
                          "only when it is ready.")
    finally:
        ray.kill(server)


@checker(3, "worker_step", "pulls only when changed, computes one gradient on the newest "
         "weights, pushes it once.")
def check_worker_step(worker_step):
    """Assemble: worker_step(ps, cache, compute_gradients, lr) pulls the newest weights through
    `cache`, computes one gradient on them and pushes it with `push_gradients`; returns the
    version the push made."""
    import numpy as np

    from course_lib.param_server import CachedWeights, ParameterStoreActor

    class SeenCache(CachedWeights):
        gets = 0

        def get(self, ps, name):
            self.gets += 1
            return super().get(ps, name)

    ps = ParameterStoreActor.remote()
    seen = []

    def compute_gradients(weights):
        seen.append(np.array(weights["w"]))
        return {"w": np.ones(3, np.float32)}

    try:
        ray.get(ps.push.remote("model", {"w": np.zeros(3, np.float32)}))
        cache = SeenCache()
        for step, held in enumerate((0.0, -0.5), start=1):
            version = worker_step(ps, cache, compute_gradients, 0.5)
            if len(seen) != step or not np.allclose(seen[-1], held):
                raise _Failed(f"step {step} computed {len(seen)} gradient(s) in all, the last "
                              f"on {seen[-1] if seen else None}, expected one per step on "
                              f"w = {held}.", "weights = cache.get(ps, 'model'), then "
                              "compute_gradients(weights) once.")
            if version != step + 1 or ray.get(ps.version.remote("model")) != step + 1:
                raise _Failed(f"step {step} returned {version!r}; the server is at version "
                              f"{ray.get(ps.version.remote('model'))}, expected {step + 1}.",
                              "Push the gradient once with ps.push_gradients.remote('model', "
                              "grads, lr) and return ray.get of it.")
            if cache.gets != step:
                raise _Failed(f"in {step} step(s) it asked `cache` for the weights {cache.gets} "
                              "time(s): it fetched them around the cache, which copies them "
                              "only when the version changed.",
                              "weights = cache.get(ps, 'model'), once per step.")
    finally:
        ray.kill(ps)
