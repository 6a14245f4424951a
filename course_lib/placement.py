"""Where a distributed run's actors go: logical CPUs, the learner's GPU, and pinning.

Ray's CPUs are logical: they decide where an actor may be placed, not which core it runs on.
On a 2-core laptop the operating system shares the real cores between the learner, every
worker, the evaluator and Ray's own processes; `pin_learner` (Linux) gives the learner a core
of its own (`roles.pin_this_process`).
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

import ray

if TYPE_CHECKING:
    from course_lib.distributed import DistributedConfig


def share_cpus(total_cpus: float, learner_cpus: float, num_workers: int,
               max_worker_cpus: float, evaluator_cpus: float = 0.1) -> tuple[float, float]:
    """(CPUs of the evaluator, CPUs of each worker) when the learner takes `learner_cpus`, the
    evaluator `evaluator_cpus` and the workers share the rest, at most `max_worker_cpus` each.
    ValueError if the learner and the evaluator do not fit.

    Logical CPUs only decide where actors may run (Ray would otherwise wait forever for an
    actor it cannot place); the operating system shares the real cores between all of them,
    so fractions are how a learner, an evaluator and several workers fit on a 2-core laptop.
    """
    free = total_cpus - learner_cpus - evaluator_cpus
    if free <= 0:
        raise ValueError(f"the Ray cluster has {total_cpus:g} CPUs: too few for the learner "
                         f"({learner_cpus:g}) and the evaluator")
    return evaluator_cpus, math.floor(min(max_worker_cpus, free / num_workers) * 1000) / 1000


def actor_resources(cfg: DistributedConfig, cluster: dict) -> dict[str, float]:
    """Logical CPUs per actor, and the learner's `learner_gpus`; the parameter server takes
    none (it mostly waits).

    The GPU is asked for explicitly, never only "when the cluster has one": on a cluster whose
    GPU node starts at zero (cluster/aws.yaml), the learner's pending request for a GPU is the
    one thing that makes the autoscaler launch that node."""
    evaluator, worker = share_cpus(cluster.get("CPU", 1), cfg.learner_cpus, cfg.num_workers,
                                   cfg.worker_cpus)
    return {"learner": cfg.learner_cpus, "learner_gpus": cfg.learner_gpus,
            "evaluator": evaluator, "worker": worker}


class NoGPUError(ValueError):
    """The learner asks for a GPU that this Ray instance does not have and cannot get."""


def check_gpus(cfg: DistributedConfig, cluster: dict, can_add_nodes: bool) -> None:
    """NoGPUError (one line) if the learner asks for more GPUs than the cluster has and nothing
    can add a node (a local Ray instance: no autoscaler), instead of waiting for it forever."""
    have = cluster.get("GPU", 0)
    if cfg.learner_gpus > have and not can_add_nodes:
        raise NoGPUError(f"learner_gpus={cfg.learner_gpus:g} but this local Ray instance has "
                         f"{have:g} GPUs and no autoscaler to add one: set learner_gpus 0 "
                         "(or run on a cluster with a GPU node type)")


def check_pinning(cfg: DistributedConfig, nodes: int) -> None:
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


def started_here() -> bool:
    """True when this process started its Ray instance (`init_ray` on a laptop): no autoscaler
    runs, so the resources it has now are all it will ever have."""
    return ray._private.worker.global_worker.node.is_head()
