"""Which files of course_lib one Ape-X iteration runs, and in how many processes.

    python scripts/iteration_files.py            # the CLI's Ape-X, one iteration traced

It starts an Ape-X run with the command line's settings (4 explorers), lets the iterations
before the learner's first update pass untraced (start-up imports what it needs), then traces
the next iteration in which the explorers played and the learner trained, everywhere it runs:
a profile hook in the driver and in every actor (through `__ray_call__`, on each of the
actor's threads: the learner's replay thread too), recording the course_lib file of every
Python function called.
It prints each process's files, then the union: what a reader follows from `env.step` to a
gradient step. Logging files (progress, runs, tensorboard) are counted apart: no run folder or
progress display is used here, so none should appear.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
from pathlib import Path

import ray

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = str(ROOT / "course_lib")
LOGGING = {"progress.py", "runs.py", "tensorboard_log.py", "viz"}


_DRIVER: dict = {}


def start_tracing(actor=None) -> int:
    """Record the course_lib files whose functions run on this thread from now on (in the
    actor's own dict: a function sent by value gets fresh globals at every call)."""
    seen = (actor.__dict__ if actor is not None else _DRIVER).setdefault("_traced", set())

    def hook(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(PACKAGE):
            seen.add(frame.f_code.co_filename)
    sys.setprofile(hook)
    threading.setprofile(hook)
    return os.getpid()


def stop_tracing(actor=None) -> tuple[int, list[str]]:
    sys.setprofile(None)
    threading.setprofile(None)
    return os.getpid(), sorted((actor.__dict__ if actor is not None else _DRIVER).get(
        "_traced", set()))


def relative(path: str) -> str:
    return str(Path(path).relative_to(ROOT / "course_lib"))


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from course_lib import init_ray
    from course_lib.apex import ApexConfig, ApexTrainer

    init_ray(num_cpus=2)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cfg = ApexConfig().updated({"max_time_s": None, "max_env_steps": None})
    trainer = ApexTrainer(cfg)
    learner = getattr(trainer, "learner_actor", None) or trainer.learner    # (older names)
    actors = {**{f"worker {i}": w for i, w in enumerate(trainer.workers)},
              "learner": learner, "evaluator": trainer.evaluator,
              "parameter server": trainer.params}
    try:
        while trainer.counters.learner_updates == 0:   # start-up and the first updates,
            trainer.step()                             # untraced
        calls = [a.__ray_call__.remote(start_tracing) for a in actors.values()]
        calls.append(learner.__ray_call__.options(concurrency_group="replay").remote(
            start_tracing))
        ray.get(calls)
        start_tracing()
        before = dataclasses.replace(trainer.counters)
        while (trainer.counters.env_steps == before.env_steps     # an iteration in which
               or trainer.counters.learner_updates == before.learner_updates):   # both ran
            trainer.step()
        driver = stop_tracing()
        results = ray.get([a.__ray_call__.remote(stop_tracing) for a in actors.values()])
        results.append(ray.get(learner.__ray_call__.options(
            concurrency_group="replay").remote(stop_tracing)))
    finally:
        trainer.close()
    per_process: dict[str, set[str]] = {"driver": set(driver[1])}
    for name, (_, files) in zip([*actors, "learner"], results, strict=True):
        per_process.setdefault(name, set()).update(files)
    union = set().union(*per_process.values())
    processes = [name for name, files in per_process.items() if files]
    for name, files in per_process.items():
        print(f"{name:17} {len(files):2} files: {', '.join(sorted(map(relative, files)))}")
    logging = sorted(f for f in map(relative, union) if f.split("/")[0] in LOGGING)
    print(f"one Ape-X iteration ran {len(union)} files of course_lib "
          f"({len(union) - len(logging)} on the data path, {len(logging)} for logging) in "
          f"{len(processes)} processes")


if __name__ == "__main__":
    main()
