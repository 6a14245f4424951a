"""A distributed run's actors: where they go, how long they may take to start, which one failed,
and that none is left behind.

Placement. Ray's CPUs are logical: they decide where an actor may be placed, not which core it
runs on. On a 2-core laptop the operating system shares the real cores between the learner,
every worker, the evaluator and Ray's own processes, so fractions (`share_cpus`) are how they
all fit; `pin_learner` (Linux) gives the learner a core of its own. An actor Ray cannot place
waits forever, so a run sizes its actors from the CPUs that are free now, and on a Ray
instance that cannot grow (a laptop: no autoscaler) refuses at once, in one line, a run that
does not fit, naming what holds the CPUs.

Start-up. Every wait for an actor to start has a deadline inside the run's clock (`time_s`
counts start-up): `start_timeout_s` from this start, or `max_time_s` if sooner. A resumed
run's clock goes on from its checkpoint, so its actors still get `start_timeout_s` from the
moment it resumes. An actor that is not up by then ends the run with one line: what it needs,
what is free, and what holds the rest.

Faults. A distributed trainer is several actors that call one another, so an error seldom
reaches the driver from the actor at fault: when the learner dies, a worker's `add` to its
replay fails and the worker's task carries the learner's death to the driver. `RunActors`
knows every actor of a run by its Ray actor id and names the one that really failed:

| what reached the driver                                  | the message names            |
| -------------------------------------------------------- | ---------------------------- |
| a task failed because the actor running it died         | that actor                   |
| a task raised because an actor it called died           | the actor it called          |
| a task raised an error of its own                        | the actor that ran the task  |
| an actor's `__init__` raised, during start-up            | that actor, "could not start"|

If start-up fails (an exception, a deadline, or Ctrl-C), `kill_all` kills every actor created
so far, so that their CPUs are free for the next run in the same process. It kills the actors
that call others first and the ones they call (the parameter server) only once the callers
are dead: a push still in flight to a killed parameter server is a task Ray retries (that
actor has `max_task_retries=-1`) and reports as failed.
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter

import ray

from course_lib.errors import ActorFailedError, NoGPUError, OneLineError, StartError
from course_lib.ray_tools import actor_died, is_gone, live_actors, reason, started_here

#: the evaluator's logical CPUs: it plays a few episodes per iteration
EVALUATOR_CPUS = 0.1


# ---------------------------------------------------------------------------------------------
# Placement
# ---------------------------------------------------------------------------------------------

def share_cpus(free_cpus: float, learner_cpus: float, num_workers: int,
               max_worker_cpus: float, evaluator_cpus: float = EVALUATOR_CPUS) -> float:
    """The logical CPUs of each worker when the learner takes `learner_cpus`, the evaluator
    `evaluator_cpus` and the workers share the rest of `free_cpus`, at most `max_worker_cpus`
    each (0 when nothing is left: the caller refuses such a run)."""
    left = free_cpus - learner_cpus - evaluator_cpus
    return max(0.0, math.floor(min(max_worker_cpus, left / num_workers) * 1000) / 1000)


def actor_resources(cfg, free_cpus: float) -> dict[str, float]:
    """Logical CPUs per actor, and the learner's `learner_gpus`; the parameter server takes
    none (it mostly waits).

    The GPU is asked for explicitly, never only "when the cluster has one": on a cluster whose
    GPU node starts at zero (cluster/aws.yaml), the learner's pending request for a GPU is the
    one thing that makes the autoscaler launch that node."""
    return {"learner": cfg.learner_cpus, "learner_gpus": cfg.learner_gpus,
            "evaluator": EVALUATOR_CPUS,
            "worker": share_cpus(free_cpus, cfg.learner_cpus, cfg.num_workers, cfg.worker_cpus)}


def check_gpus(cfg, cluster: dict, can_add_nodes: bool) -> None:
    """NoGPUError (one line) if the learner asks for more GPUs than the cluster has and nothing
    can add a node (a local Ray instance: no autoscaler), instead of waiting for it forever."""
    have = cluster.get("GPU", 0)
    if cfg.learner_gpus > have and not can_add_nodes:
        raise NoGPUError(f"learner_gpus={cfg.learner_gpus:g} but this local Ray instance has "
                         f"{have:g} GPUs and no autoscaler to add one: set learner_gpus 0 "
                         "(or run on a cluster with a GPU node type)")


def check_pinning(cfg, nodes: int) -> None:
    """ValueError (one line) if `pin_learner` cannot work here: it needs Linux's
    `sched_setaffinity`, at least 2 cores, and one machine (the cores it sets apart are this
    machine's)."""
    if not cfg.pin_learner:
        return
    if not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2:
        raise ValueError("pin_learner needs Linux and at least 2 cores: set it to false")
    if nodes > 1:
        raise ValueError(f"pin_learner works on one machine, and this Ray cluster has {nodes} "
                         "nodes: set it to false")


def held_by(prefix: str = "") -> str:
    """Who holds CPUs or GPUs now, other than the actors named `prefix:...`, in words:
    "2 DataWorker actors (1 CPU each)", or "" when no actor does."""
    held = Counter((a["class"], a["cpus"], a["gpus"]) for a in live_actors()
                   if a["state"] == "ALIVE" and (a["cpus"] or a["gpus"])
                   and not (prefix and a["name"].startswith(f"{prefix}:")))
    parts = []
    for (cls, cpus, gpus), n in held.most_common():
        need = ", ".join(f"{v:g} {k}" for k, v in (("CPU", cpus), ("GPU", gpus)) if v)
        parts.append(f"{n} {cls} actor{'s' if n > 1 else ''} ({need}{' each' if n > 1 else ''})")
    return ", ".join(parts)


def room_report(prefix: str = "") -> str:
    """What is free and what holds the rest: "0 of 2 CPUs are free; 2 DataWorker actors (1 CPU
    each) hold them, left by an earlier run: restart the kernel (or ray.kill them)"."""
    total, free = ray.cluster_resources().get("CPU", 0), ray.available_resources().get("CPU", 0)
    holders = held_by(prefix)
    return (f"{free:g} of {total:g} CPUs are free; " + (
        f"{holders} hold the rest, left by an earlier run: restart the kernel (or ray.kill "
        "them)" if holders else "no actor holds the rest (Ray's own tasks, or a busy machine)"))


def settled_free_cpus(timeout_s: float = 10.0) -> float:
    """The CPUs free on this Ray instance once the actors being killed have let go of theirs
    (a killed actor frees its CPUs only when its process exits: a run started in the next
    notebook cell would otherwise see too few), waiting at most `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        total = ray.cluster_resources().get("CPU", 0.0)
        free = ray.available_resources().get("CPU", 0.0)
        held = sum(a["cpus"] for a in live_actors() if a["state"] == "ALIVE")
        if free + held >= total - 1e-6 or time.monotonic() > deadline:
            return free
        time.sleep(0.1)


def check_room(res: dict[str, float], num_workers: int, prefix: str) -> None:
    """StartError (one line) if the run's actors cannot all be placed on this Ray instance now
    and it cannot grow (started here: no autoscaler): Ray would wait for them forever."""
    if not started_here():
        return
    need = res["learner"] + res["evaluator"]
    if res["worker"] <= 0 or ray.available_resources().get("CPU", 0) + 1e-9 < need:
        raise StartError(f"the run cannot place its actors: the learner needs "
                         f"{res['learner']:g} CPU, the evaluator {res['evaluator']:g} and "
                         f"{num_workers} workers some; {room_report(prefix)}")


# ---------------------------------------------------------------------------------------------
# The actors of one run
# ---------------------------------------------------------------------------------------------

class RunActors:
    """Every actor of one run, by name ("parameter server", "learner", "explorer 0", ...).
    Each is created with the Ray name `prefix:name`, so a restarted worker finds the others
    and `held_by` can tell this run's actors from an earlier run's."""

    def __init__(self, prefix: str, deadline: float, timeout_s: float):
        self.prefix, self.deadline, self.timeout_s = prefix, deadline, timeout_s
        self.names: dict[str, str] = {}    # Ray actor id (hex) -> name
        self.needs: dict[str, str] = {}    # name -> what it asked Ray for, in words
        self.actors: list = []
        self.servers: list = []            # actors the others call: killed last

    def ray_name(self, name: str) -> str:
        return f"{self.prefix}:{name}"

    def add(self, name: str, actor, cpus: float = 0.0, gpus: float = 0.0, serves: bool = False):
        """Register `actor` under `name` with the resources it asked for; returns it. An actor
        that `serves` the others (calls reach it from other actors) is killed after them."""
        self.names[actor._actor_id.hex()] = name
        self.needs[name] = " and ".join(f"{v:g} {k}" for k, v in (("CPU", cpus), ("GPU", gpus))
                                        if v) or "no CPU"
        (self.servers if serves else self.actors).append(actor)
        return actor

    def table(self) -> dict[str, dict]:
        """This run's actors in Ray's actor table, by name ("evaluator", "explorer 2", ...):
        their state and restarts as Ray sees them, no call to the actors themselves."""
        prefix = f"{self.prefix}:"
        return {a["name"].removeprefix(prefix): a for a in live_actors()
                if a["name"].startswith(prefix)}

    def name_of(self, actor_id: str | None, default: str) -> str:
        return self.names.get(actor_id, default) if actor_id else default

    def started(self, name: str, ref: ray.ObjectRef):
        """The result of a call that shows `name` has started (its `ready`, say), within the
        start-up deadline; StartError naming it if not ("explorer 0 could not start: ...",
        "the evaluator did not start within 120 s: it needs 0.1 CPU; ...")."""
        ready, _ = ray.wait([ref], timeout=max(0.0, self.deadline - time.perf_counter()))
        if not ready:
            raise StartError(f"the {name} did not start within {self.timeout_s:g} s: it needs "
                             f"{self.needs.get(name, 'resources')}; {room_report(self.prefix)}")
        try:
            return ray.get(ref)
        except ray.exceptions.RayError as err:
            dead = actor_died(err)
            part = self.name_of(dead.actor_id, name) if dead is not None else name
            hint = ("; register the env in a module the workers import (an env registered "
                    "only in a notebook is unknown to the actors)"
                    if "gymnasium.error" in str(err) and "NotFound" in str(err) else "")
            raise StartError(f"{part} could not start: {reason(err)}{hint}") from None

    def failure(self, err: BaseException, part: str) -> ActorFailedError:
        """The error to raise when a task of `part` failed with `err` (see the table above)."""
        dead = actor_died(err)
        if dead is not None:
            return ActorFailedError(f"the {self.name_of(dead.actor_id, part)} died: "
                                    f"{reason(dead)}")
        if isinstance(getattr(err, "cause", None), OneLineError):
            return ActorFailedError(str(err.cause))     # its message names where it failed
        return ActorFailedError(f"{part} failed: {reason(err)}")

    def is_own_death(self, err: BaseException, part: str) -> bool:
        """Whether `err` says that `part` itself died (not an actor it called)."""
        dead = actor_died(err)
        return dead is not None and self.name_of(dead.actor_id, part) == part

    def kill_all(self, wait_s: float = 5.0) -> None:
        """Kill every actor registered, for good (no restarts): the callers, then (once they
        are dead, or after `wait_s`) the servers they call."""
        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        wait_dead(self.actors, wait_s)
        for actor in self.servers:
            ray.kill(actor, no_restart=True)


def wait_dead(actors: list, timeout_s: float) -> None:
    """Return once every actor in `actors` is dead, or after `timeout_s`. Dead means dead in
    Ray's actor table and, for an actor on this machine, its process gone: `ray.kill` marks
    the actor dead at once (a call to it fails from then on), but its process goes on running
    its threads, pushing to others, until the kill reaches it: 0.15-0.3 s at a load of 7 on 2
    cores. An actor on another machine counts as dead once the table says so."""
    deadline = time.perf_counter() + timeout_s
    alive = [actor._actor_id.hex() for actor in actors]
    while alive and time.perf_counter() < deadline:
        alive = [actor_id for actor_id in alive if not is_gone(actor_id)]
        if alive:
            time.sleep(0.01)
