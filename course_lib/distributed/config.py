"""The settings of a distributed run: the numbers (`DistributedConfig`) and the parts that can
be swapped for your own (`Slots`).

Slots are how the workbook runs an attendee's piece inside the real trainer, the way
Stable-Baselines3 takes `replay_buffer_class=` or a callback: the core leaves a slot, with its
own part as the default, and whoever calls `train(cfg, slots=...)` may fill it. Each slot is a
callable, None for course_lib's own part:

| slot             | called in      | as                                    | gives            |
| ---------------- | -------------- | ------------------------------------- | ---------------- |
| `outbox`         | each worker,   | `outbox(replay_actor, send_every,     | `.add(transitions)`,|
|                  | once           | priorities)`                          | `.flush()`: stored |
| `follower`       | each worker,   | `follower(params, name, net,          | `.step(ended)`, each|
|                  | once           | pull_every, at_episode_end)`          | step of its envs |
| `updates_due`    | the driver     | `updates_due(transitions, cfg)`       | updates owed for |
|                  |                |                                       | them             |
| `learner_chunks` | the driver     | `learner_chunks(due, submitted,       | the learner calls|
|                  |                | in_flight, chunk)`                    | to send now      |
| `round`          | the driver,    | `round(driver)`                       | `.run(wait_s)`:  |
|                  | once           |                                       | one round        |

An algorithm adds its own slots (`apex.ApexSlots`, `sac.SACSlots`), and a trainer refuses
slots of another algorithm's class before anything starts. A slot that lives in an actor is a
factory called in that actor's process: Ray pickles it there (a class or function defined in
a notebook travels by value), and what it builds may hold threads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import ClassVar

from course_lib.trainer import TrainerConfig


@dataclasses.dataclass
class DistributedConfig(TrainerConfig):
    """The settings of every distributed trainer (workers, learner, driver, resources)."""

    LIMITS: ClassVar[dict[str, str]] = {
        "num_workers": ">= 1", "num_envs": ">= 1", "send_every": ">= 1",
        "pull_every": ">= 1", "publish_every": ">= 1", "worker_chunk": ">= 1",
        "learner_chunk": ">= 1", "batches_per_draw": ">= 1", "max_lag_updates": ">= 0",
        "eval_every_s": ">= 0", "learner_cpus": ">= 0", "learner_gpus": ">= 0",
        "worker_cpus": ">= 0", "max_worker_restarts": ">= 0", "start_timeout_s": "> 0"}

    num_workers: int = 2              # worker actors (Ape-X: explorers)
    num_envs: int = 1                 # envs each worker steps as one batch (one forward pass)
    send_every: int = 50              # transitions per batch a worker sends to the learner
    pull_every: int = 400             # worker env steps between weight pulls
    publish_every: int = 25           # learner updates between weight publications
    worker_chunk: int = 200           # env steps per worker task
    learner_chunk: int = 50           # updates per learner task
    batches_per_draw: int = 4         # batches the learner draws from its buffer at once (Ape-X:
                                      # their new priorities land after the last of them)
    max_lag_updates: int = 100        # workers pause while the learner is this far behind
    eval_every_s: float = 3.0         # seconds per iteration: one evaluation, one row
    learner_cpus: float = 0.5         # logical CPUs of the learner actor
    learner_gpus: float = 0.0         # GPUs of the learner actor (> 0: a cluster adds a GPU node)
    worker_cpus: float = 0.25         # logical CPUs of each worker, at most
    max_worker_restarts: int = 5      # a worker that died more often than this ends the run
    pin_learner: bool = False         # Linux, one machine: the learner alone on the last core
    sample_ahead: bool = False        # the learner draws its next batches on a thread while
                                      # its updates run (priorities a group later still;
                                      # bench/learner_feed.py measures it)
    start_timeout_s: float = 120.0    # actors not started by then end the run (max_time_s too)


@dataclasses.dataclass(frozen=True)
class Slots:
    """The parts of a distributed run that can be your own (see the table above); None:
    course_lib's. `filled()` lists the slots given."""

    outbox: Callable | None = None
    follower: Callable | None = None
    updates_due: Callable | None = None
    learner_chunks: Callable | None = None
    round: Callable | None = None

    def filled(self) -> list[str]:
        return [f.name for f in dataclasses.fields(self) if getattr(self, f.name) is not None]


def check_slots(slots: Slots | None, takes: type[Slots], trainer: str) -> Slots:
    """`slots` as a `takes` (an empty one for None); ValueError (one line) naming any slot
    filled that `takes` does not have: a part of another algorithm, which this trainer would
    never call."""
    if slots is None:
        return takes()
    known = {f.name for f in dataclasses.fields(takes)}
    extra = [name for name in slots.filled() if name not in known]
    if extra:
        raise ValueError(f"slots: {trainer} never calls {', '.join(extra)} (a part of "
                         f"{type(slots).__name__}); its slots are {', '.join(sorted(known))}")
    return takes(**{name: getattr(slots, name) for name in slots.filled()})
