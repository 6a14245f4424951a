"""Held under load: Ape-X with 8 explorers on 2 cores (oversubscribed) for 5 minutes.

    python -m bench.soak [--quick] [--minutes 5] [--json bench/results/soak.json]

The run has no goal: `target_return` None and a time budget, exactly what
`python -m course_lib train --algo apex --config '{"num_workers": 8}'
--stop '{"eval_return": null, "time_s": 300}'` runs (`trainer.run_training` stops it at the
first iteration past `max_time_s`). Every `SAMPLE_EVERY_S` seconds a sampler thread records
the driver's resident memory (RSS) and the learner actor's, which holds the replay buffer
(psutil on the process id the actor reports), the bytes in Ray's object store (cluster total minus
available `object_store_memory`), and the driver's counters: env steps, inserted
transitions, learner updates.

Verdict, two targets:
- **no deadlock**: in every window between two samples, env steps or learner updates grow
  (the explorers may wait a window while the learner catches up: that is the driver's
  throttle, `max_lag_updates`, and the verdict lists those windows apart). A sampler that sees
  neither grow for `STALL_S` interrupts the run and the verdict says where it stalled.
- **memory flat after the buffer fills**: for each memory series, the least-squares slope
  over the samples taken once the replay buffer is full (inserted >= buffer_size) is below
  `FLAT_MB_PER_MIN` (2 MB per minute: under 10 MB over the four-odd minutes after a fill;
  leaking one 50-transition batch per add would be that much in seconds). At least
  `MIN_SAMPLES` samples after the fill are needed, else the verdict is "not measured".

`--quick`: one minute with a 10K buffer (so that it fills); the verdict is not a target then.
"""

from __future__ import annotations

import _thread
import os
import threading
import time

import numpy as np
import psutil
import ray

from bench.benchlib import Recording, parser, private_ray_tmp
from course_lib import init_ray
from course_lib.apex import ApexConfig, ApexTrainer
from course_lib.trainer import run_training

SAMPLE_EVERY_S = 10.0
STALL_S = 90.0
FLAT_MB_PER_MIN = 2.0
MIN_SAMPLES = 5
MEMORY = ("driver_rss_mb", "learner_rss_mb", "object_store_mb")
MB = 2**20


def actor_pid(actor) -> int:
    """The process id of a running actor (it runs the lambda in its own process)."""
    return ray.get(actor.__ray_call__.remote(lambda self: os.getpid()))


class Sampler(threading.Thread):
    """Samples memory and counters every `every_s` seconds until stopped; interrupts the
    main thread when neither env steps nor learner updates grow for `stall_s` seconds."""

    def __init__(self, trainer: ApexTrainer, every_s: float, stall_s: float):
        super().__init__(daemon=True)
        self.trainer, self.every_s, self.stall_s = trainer, every_s, stall_s
        self.procs = {"driver_rss_mb": psutil.Process(),
                      "learner_rss_mb": psutil.Process(actor_pid(trainer.learner_actor))}
        self.samples: list[dict] = []
        self.stalled_at: float | None = None
        self.done = threading.Event()
        self.start_time = time.perf_counter()

    def sample(self) -> dict:
        c = self.trainer.counters
        store = ray.cluster_resources().get("object_store_memory", 0.0) - \
            ray.available_resources().get("object_store_memory", 0.0)
        row = {"t_s": round(time.perf_counter() - self.start_time, 1),
               "env_steps": c.env_steps, "inserted": c.inserted,
               "learner_updates": c.learner_updates,
               "object_store_mb": round(store / MB, 2)}
        for name, proc in self.procs.items():
            row[name] = round(proc.memory_info().rss / MB, 1)
        return row

    def run(self) -> None:
        while not self.done.wait(self.every_s):
            self.samples.append(self.sample())
            last = self.samples[-1]
            still = [s for s in self.samples if (s["env_steps"], s["learner_updates"])
                     == (last["env_steps"], last["learner_updates"])]
            if len(still) > 1 and still[-1]["t_s"] - still[0]["t_s"] >= self.stall_s:
                self.stalled_at = still[0]["t_s"]
                _thread.interrupt_main()          # the driver is stuck: end the run
                return


def slope_mb_per_min(samples: list[dict], key: str) -> float:
    """Least-squares slope of `key` against time, in MB per minute."""
    t = np.array([s["t_s"] for s in samples]) / 60.0
    return float(np.polyfit(t, [s[key] for s in samples], 1)[0])


def verdict(samples: list[dict], buffer_size: int, flat_mb_per_min: float = FLAT_MB_PER_MIN,
            min_samples: int = MIN_SAMPLES) -> dict:
    """Progress in every window, and the memory slopes once the buffer is full (see the
    module docstring)."""
    windows = list(zip(samples, samples[1:], strict=False))
    stalled = [b["t_s"] for a, b in windows if b["env_steps"] <= a["env_steps"]
               and b["learner_updates"] <= a["learner_updates"]]
    waited = [b["t_s"] for a, b in windows if b["env_steps"] <= a["env_steps"]
              and b["learner_updates"] > a["learner_updates"]]
    full = [s for s in samples if s["inserted"] >= buffer_size]
    out = {"windows": len(windows), "windows_without_progress_end_s": stalled,
           "explorers_waited_end_s": waited,
           "no_deadlock": bool(windows) and not stalled,
           "filled_at_s": full[0]["t_s"] if full else None, "samples_after_fill": len(full),
           "flat_mb_per_min": flat_mb_per_min}
    if len(full) < min_samples:
        return out | {"flat": None, "slopes_mb_per_min": {}}
    slopes = {key: round(slope_mb_per_min(full, key), 3) for key in MEMORY}
    return out | {"flat": all(v < flat_mb_per_min for v in slopes.values()),
                  "slopes_mb_per_min": slopes}


def soak(minutes: float, quick: bool, workers: int = 8, log=print) -> dict:
    cfg = ApexConfig().updated({"num_workers": workers, "target_return": None,
                                "max_env_steps": None, "max_time_s": minutes * 60,
                                **({"buffer_size": 10_000} if quick else {})})
    with private_ray_tmp():
        try:
            init_ray(num_cpus=os.cpu_count())
            trainer = ApexTrainer(cfg)
            sampler = Sampler(trainer, SAMPLE_EVERY_S, STALL_S)
            sampler.samples.append(sampler.sample())
            sampler.start()
            # the budget counts from here: the trainer's clock started before its actors did
            started = time.perf_counter() - trainer.start
            try:                                  # (run_training closes the trainer)
                result = run_training(trainer, cfg.updated({"max_time_s": started + minutes * 60}))
                stopped_by = result.stopped_by
            except KeyboardInterrupt:
                if sampler.stalled_at is None:
                    raise
                stopped_by = f"stalled (no progress from {sampler.stalled_at:.0f} s on)"
            sampler.done.set()
            sampler.join()
            samples = sampler.samples
        finally:
            ray.shutdown()
    for s in samples:
        log(f"{s['t_s']:6.0f} s: {s['env_steps']:>9,} env steps, {s['learner_updates']:>8,} "
            f"updates; RSS driver {s['driver_rss_mb']:.0f} MB, learner (with the replay) "
            f"{s['learner_rss_mb']:.0f} MB; "
            f"object store {s['object_store_mb']:.1f} MB")
    judged = verdict(samples, cfg.buffer_size)
    targets = {} if quick else {
        "no deadlock (progress in every 10-s window)": {
            "value": f"{judged['windows'] - len(judged['windows_without_progress_end_s'])}/"
                     f"{judged['windows']} windows", "target": "all",
            "met": judged["no_deadlock"]},
        f"memory flat after the buffer fills (< {FLAT_MB_PER_MIN:g} MB/min)": {
            "value": max(judged["slopes_mb_per_min"].values(), default=None),
            "target": FLAT_MB_PER_MIN, "met": bool(judged["flat"]),
            "note": "" if judged["flat"] is not None else
            f"fewer than {MIN_SAMPLES} samples after the buffer filled"}}
    return {"config": {"quick": quick, "minutes": minutes, "num_workers": workers,
                       "buffer_size": cfg.buffer_size, "sample_every_s": SAMPLE_EVERY_S},
            "stopped_by": stopped_by, "samples": samples, "verdict": judged,
            "targets": targets}


def main() -> None:
    cli = parser(__doc__, "soak", "one minute, a 10K buffer")
    cli.add_argument("--minutes", type=float, default=None, help="default 5 (quick: 1)")
    args = cli.parse_args()
    recording = Recording()
    result = soak(args.minutes or (1.0 if args.quick else 5.0), args.quick)
    v = result["verdict"]
    print(f"stopped by {result['stopped_by']}; no deadlock: {v['no_deadlock']}; buffer full at "
          f"{v['filled_at_s']} s; memory flat: {v['flat']} (slopes MB/min after the fill: "
          f"{v['slopes_mb_per_min']})")
    recording.write(result, args.json)


if __name__ == "__main__":
    main()
