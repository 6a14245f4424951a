"""Benchmark the replay buffers: ours (numpy) side by side with cpprb (C++), then the Ray actor.

    python -m bench.replay [--quick] [--json bench/results/replay.json] [--skip-ray]

Part 1, one process: `course_lib.teaching.cpprb_compare.bench_buffers` (notebook 04 runs it
small) at capacity 2**20: the Ape-X access pattern with CartPole transitions, add 50, sample
512, update 512 (ours: `PrioritizedReplayBuffer` with its defaults, so sample includes the
importance weights as the learner gets them; cpprb's sample always computes them), ours and
cpprb alternating call by call. Medians; "ours/cpprb" is the time ratio of each operation
(<= 1.0: we are as fast).

Part 2, Ray: a ReplayStoreActor and 2 explorer actors, each pushing the same 50-transition batch
as fast as it can with up to 8 adds in flight (ray.wait), for a few seconds; the ingest rate
is transitions stored per second of wall time.

Targets: add, sample and update each at ratio <= 1.0 against cpprb; Ray ingest >= 25K/s.
The ratios move with the machine's load (cpprb's C++ loops suffer less from it than our numpy
calls): compare runs on a quiet machine.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import ray

from bench.benchlib import Recording, parser, private_ray_tmp
from course_lib import init_ray
from course_lib.replay import ReplayStoreActor
from course_lib.teaching.cpprb_compare import (
    NO_CPPRB,
    SPEC,
    MissingCpprb,
    bench_buffers,
    cartpole_batch,
    cpprb,
    print_buffer_table,
)

RATIO_TARGETS = {"add": 1.0, "sample": 1.0, "update": 1.0}   # ours/cpprb, each operation
TARGETS = {**{f"{op} ours/cpprb": ratio for op, ratio in RATIO_TARGETS.items()},
           "ray ingest transitions/s": 25_000}


# ---------------------------------------------------------------------------------------------
# Part 2: the Ray replay actor fed by 2 explorers
# ---------------------------------------------------------------------------------------------


@ray.remote
class Explorer:
    """Pushes one fixed 50-transition batch to the replay actor as fast as it can."""

    def __init__(self, seed: int):
        rng = np.random.default_rng(seed)
        self.batch, self.priorities = cartpole_batch(rng, 50), rng.random(50)

    def push_for(self, replay, seconds: float, in_flight: int = 8) -> tuple[int, float, float]:
        """(transitions pushed, start, end); at most `in_flight` adds pending at once."""
        pending, pushed = [], 0
        start = time.time()
        while time.time() - start < seconds:
            if len(pending) >= in_flight:
                _, pending = ray.wait(pending, num_returns=1)
            pending.append(replay.add.remote(self.batch, self.priorities))
            pushed += len(self.priorities)
        ray.get(pending)
        return pushed, start, time.time()


def bench_ray_ingest(capacity: int, seconds: float, rounds: int) -> dict:
    replay = ReplayStoreActor.remote(capacity, SPEC)
    explorers = [Explorer.remote(seed) for seed in (1, 2)]
    ray.get([e.push_for.remote(replay, 0.5) for e in explorers])  # warm up
    rates = []
    for _ in range(rounds):
        before = ray.get(replay.stats.remote())["inserted"]
        results = ray.get([e.push_for.remote(replay, seconds) for e in explorers])
        after = ray.get(replay.stats.remote())["inserted"]
        pushed = sum(r[0] for r in results)
        if after - before != pushed:
            raise RuntimeError(f"the replay actor stored {after - before} of {pushed} transitions")
        wall = max(r[2] for r in results) - min(r[1] for r in results)
        rates.append(pushed / wall)
    return {"explorers": len(explorers), "batch": 50, "seconds_per_round": seconds,
            "rounds": rounds, "transitions_per_s": float(np.median(rates)),
            "calls_per_s": float(np.median(rates)) / 50}


# ---------------------------------------------------------------------------------------------
# The run and its verdict
# ---------------------------------------------------------------------------------------------


def run_ray_part(config: dict) -> dict:
    """The ingest measurement in a private Ray instance; {"error": ...} if Ray fails."""
    with private_ray_tmp():
        try:
            init_ray(num_cpus=2)
            return bench_ray_ingest(config["capacity"], config["ray_seconds"],
                                    config["ray_rounds"])
        except Exception as err:  # report it beside the part that did run
            return {"error": f"{type(err).__name__}: {err}"}
        finally:
            ray.shutdown()


def check_targets(buffers: list[dict], ingest: dict | None) -> dict:
    """{target name: {value, target, met}}: each operation's ratio, and the Ray ingest rate."""
    by_name = {row["operation"].split(" ")[0]: row for row in buffers}
    values = {f"{op} ours/cpprb": (by_name[op]["ours/cpprb"], "<=") for op in RATIO_TARGETS}
    if ingest and "error" not in ingest:
        values["ray ingest transitions/s"] = (ingest["transitions_per_s"], ">=")
    return {name: {"value": float(value), "target": TARGETS[name],
                   "met": bool(value <= TARGETS[name] if sense == "<=" else value >= TARGETS[name])}
            for name, (value, sense) in values.items()}


def main() -> None:
    cli = parser(__doc__, "replay", "small capacity, few repetitions")
    cli.add_argument("--skip-ray", action="store_true", help="only the in-process part")
    args = cli.parse_args()
    if isinstance(cpprb, MissingCpprb):
        sys.exit(f"error: {NO_CPPRB}")
    config = (dict(capacity=2**14, add_reps=200, sample_reps=100, ray_seconds=1.0, ray_rounds=1)
              if args.quick else
              dict(capacity=2**20, add_reps=3000, sample_reps=1000, ray_seconds=3.0, ray_rounds=3))
    recording = Recording(packages=("cpprb",))

    buffers = bench_buffers(config["capacity"], config["add_reps"], config["sample_reps"])
    print_buffer_table(buffers, config)

    ingest = None if args.skip_ray else run_ray_part(config)
    if ingest and "error" in ingest:
        print(f"Ray part failed: {ingest['error']}")
    elif ingest:
        print(f"Ray replay actor, {ingest['explorers']} explorers x 50-transition batches: "
              f"{ingest['transitions_per_s']:,.0f} transitions/s "
              f"({ingest['calls_per_s']:,.0f} adds/s)")

    targets = check_targets(buffers, ingest)
    for name in TARGETS:
        check = targets.get(name)
        verdict = ("not measured" if check is None else
                   f"{check['value']:,.2f} vs {check['target']:,}: "
                   + ("met" if check["met"] else "MISSED"))
        print(f"target {name}: {verdict}")
    recording.write({"config": {**config, "quick": args.quick}, "buffers": buffers,
                     "ray_ingest": ingest, "targets": targets}, args.json)


if __name__ == "__main__":
    main()
