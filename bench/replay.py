"""Benchmark the replay buffers: ours (numpy) side by side with cpprb (C++), then the Ray actor.

    python -m bench.replay [--quick] [--json bench/results/replay.json] [--skip-ray]

Part 1, one process, the Ape-X access pattern at capacity 2**20 with CartPole transitions
(obs/next_obs 4 float32, action int64, reward float32, terminated bool), both buffers filled
first: add a 50-transition batch with priorities, sample 512 (with importance weights),
update 512 priorities (ours: `PrioritizedReplayBuffer` with its defaults, so sample includes
the importance weights as the learner gets them; cpprb's sample always computes them). Ours
and cpprb alternate call by call so that load from other processes hits both alike. Medians;
"ours/cpprb" is the time ratio of each operation (<= 1.0: we are as fast).

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
from course_lib.replay import PrioritizedReplayBuffer, ReplayStoreActor, transition_spec

NO_CPPRB = (f"cpprb is not installed (it has no wheels for Python {sys.version_info[0]}."
            f"{sys.version_info[1]}): run this benchmark on Python 3.11 or 3.12")


class MissingCpprb:
    """Stands where the cpprb module would be: any use raises one clear error."""

    def __getattr__(self, name):
        raise ModuleNotFoundError(NO_CPPRB)


try:
    import cpprb
except ModuleNotFoundError:   # cpprb 11.0.0 has no wheels for Python 3.13 (see pyproject.toml)
    cpprb = MissingCpprb()

SPEC = transition_spec(obs_shape=(4,))
CPPRB_ENV = {"obs": {"shape": 4, "dtype": np.float32}, "action": {"dtype": np.int64},
             "reward": {"dtype": np.float32}, "next_obs": {"shape": 4, "dtype": np.float32},
             "terminated": {"dtype": np.bool_}}
RATIO_TARGETS = {"add": 1.0, "sample": 1.0, "update": 1.0}   # ours/cpprb, each operation
TARGETS = {**{f"{op} ours/cpprb": ratio for op, ratio in RATIO_TARGETS.items()},
           "ray ingest transitions/s": 25_000}


def cartpole_batch(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """n random transitions shaped like CartPole's."""
    obs = rng.standard_normal((n, 4), dtype=np.float32)
    return {"obs": obs, "action": rng.integers(0, 2, n), "reward": np.ones(n, np.float32),
            "next_obs": obs + 0.01, "terminated": rng.random(n) < 0.05}


# ---------------------------------------------------------------------------------------------
# Part 1: ours against cpprb, call by call
# ---------------------------------------------------------------------------------------------


def bench_buffers(capacity: int, add_reps: int, sample_reps: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    ours = PrioritizedReplayBuffer(capacity, SPEC, alpha=0.6, seed=seed)
    theirs = cpprb.PrioritizedReplayBuffer(capacity, CPPRB_ENV, alpha=0.6)
    fill = cartpole_batch(rng, capacity)
    fill_priorities = rng.random(capacity)
    ours.add(fill, fill_priorities)
    theirs.add(**fill, priorities=fill_priorities)

    clock = time.perf_counter
    pairs = {"add": [], "sample": [], "update": [], "sample+update": []}  # (ours, cpprb) each
    batch, priorities = cartpole_batch(rng, 50), rng.random(50)
    for _ in range(add_reps):
        t0 = clock()
        ours.add(batch, priorities)
        t1 = clock()
        theirs.add(**batch, priorities=priorities)
        t2 = clock()
        pairs["add"].append((t1 - t0, t2 - t1))
    for _ in range(sample_reps):
        new_priorities = rng.random(512)
        t0 = clock()
        sample = ours.sample(512, beta=0.4)
        t1 = clock()
        ours.update_priorities(sample["indices"], new_priorities)
        t2 = clock()
        sample = theirs.sample(512, beta=0.4)
        t3 = clock()
        theirs.update_priorities(sample["indexes"], new_priorities)
        t4 = clock()
        pairs["sample"].append((t1 - t0, t3 - t2))
        pairs["update"].append((t2 - t1, t4 - t3))
        pairs["sample+update"].append((t2 - t0, t4 - t2))

    rows = []
    for name, values in pairs.items():
        ours_s, theirs_s = (float(t) for t in np.median(np.array(values), axis=0))
        rows.append({"operation": f"{name} ({50 if name == 'add' else 512})",
                     "ours_us": ours_s * 1e6, "cpprb_us": theirs_s * 1e6,
                     "ours/cpprb": ours_s / theirs_s,
                     "ours_transitions_per_s": 50 / ours_s if name == "add" else None,
                     "cpprb_transitions_per_s": 50 / theirs_s if name == "add" else None})
    return rows


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
# Report
# ---------------------------------------------------------------------------------------------


def print_buffer_table(buffers: list[dict], config: dict) -> None:
    print(f"capacity {config['capacity']:,}; medians of {config['add_reps']} adds and "
          f"{config['sample_reps']} samples/updates, ours and cpprb alternating")
    print(f"{'operation':<22}{'ours (us)':>12}{'cpprb (us)':>12}{'ours/cpprb':>12}")
    for row in buffers:
        print(f"{row['operation']:<22}{row['ours_us']:>12.1f}{row['cpprb_us']:>12.1f}"
              f"{row['ours/cpprb']:>12.2f}")
    add = buffers[0]
    print(f"add throughput: ours {add['ours_transitions_per_s']:,.0f} transitions/s, "
          f"cpprb {add['cpprb_transitions_per_s']:,.0f} transitions/s")


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
