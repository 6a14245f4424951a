"""Benchmark what Ray itself costs: task and actor calls, ray.put/get of weights, each beside
its plain-Python reference (a local function call, a method call, a pickle round trip).

    python -m bench.ray_overhead [--quick] [--json bench/results/ray_overhead.json]

| operation                     | Ray                                    | reference            |
| ----------------------------- | -------------------------------------- | -------------------- |
| task, sync                    | f.remote() then ray.get, one at a time | f() in this process  |
| task, async                   | n f.remote() submitted, one ray.get    | f() in this process  |
| actor call, sync / async      | a.incr.remote() (same two ways)        | obj.incr()           |
| weights put + get (~280 KB)   | ray.get(ray.put(weights))              | pickle dumps + loads |

Medians over rounds; "ray/reference" is the time ratio per operation (how many plain calls
one Ray call costs). No targets: these are the numbers that explain the batching choices of
notebooks 01, 04 and 05 (a Ray call costs ~1 ms, so send 50 transitions per call).
"""

from __future__ import annotations

import os
import pickle
import statistics
import time

import numpy as np
import ray

from bench.benchlib import Recording, parser, private_ray_tmp
from course_lib import init_ray


def noop(x):
    return x


class Counter:
    def __init__(self):
        self.n = 0

    def incr(self):
        self.n += 1
        return self.n


def weights(seed: int = 0) -> dict[str, np.ndarray]:
    """~280 KB of float32 arrays, the size of the Ape-X (128, 128) dueling Q network x 4."""
    rng = np.random.default_rng(seed)
    return {f"layer{i}": rng.standard_normal((128, 136), dtype=np.float32) for i in range(4)}


def per_call_us(fn, calls: int, rounds: int) -> float:
    """Median over rounds of the wall time of `fn(calls)` divided by `calls`, in microseconds."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn(calls)
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def measure(calls: int, rounds: int) -> list[dict]:
    # A task asks for a CPU: with num_cpus=0 Ray starts a worker process for every task in
    # flight (dozens, measured), and the task rows timed those workers' start-up on 2 cores.
    remote_noop = ray.remote(num_cpus=1)(noop)
    actor = ray.remote(num_cpus=0)(Counter).remote()
    local = Counter()
    ray.get([remote_noop.remote(0) for _ in range(10)] + [actor.incr.remote()])  # warm up
    w = weights()
    cases = {  # name -> (Ray, reference), each taking a number of calls
        "task, sync": (lambda n: [ray.get(remote_noop.remote(i)) for i in range(n)],
                       lambda n: [noop(i) for i in range(n)]),
        "task, async": (lambda n: ray.get([remote_noop.remote(i) for i in range(n)]),
                        lambda n: [noop(i) for i in range(n)]),
        "actor call, sync": (lambda n: [ray.get(actor.incr.remote()) for _ in range(n)],
                             lambda n: [local.incr() for _ in range(n)]),
        "actor call, async": (lambda n: ray.get([actor.incr.remote() for _ in range(n)]),
                              lambda n: [local.incr() for _ in range(n)]),
        "weights put + get": (lambda n: [ray.get(ray.put(w)) for _ in range(n)],
                              lambda n: [pickle.loads(pickle.dumps(w)) for _ in range(n)]),
    }
    rows = []
    for name, (with_ray, reference) in cases.items():
        n = calls // 4 if name.startswith("weights") else calls
        ray_us, ref_us = per_call_us(with_ray, n, rounds), per_call_us(reference, n, rounds)
        rows.append({"operation": name, "ray_us": round(ray_us, 2),
                     "reference_us": round(ref_us, 3),
                     "ray_per_s": round(1e6 / ray_us, 1),
                     "ray/reference": round(ray_us / ref_us, 1)})
    ray.kill(actor)
    return rows


def run(quick: bool = False) -> dict:
    """The whole benchmark in a private Ray instance; returns {"config", "rows", "targets"}."""
    calls, rounds = (200, 3) if quick else (2_000, 5)
    with private_ray_tmp():
        try:
            init_ray(num_cpus=os.cpu_count())
            rows = measure(calls, rounds)
        finally:
            ray.shutdown()
    return {"config": {"quick": quick, "calls": calls, "rounds": rounds,
                       "weights_kb": round(sum(a.nbytes for a in weights().values()) / 1024)},
            "rows": rows, "targets": {}}


def print_summary(result: dict) -> None:
    print(f"{'operation':<20}{'Ray us':>10}{'Ray calls/s':>13}{'plain us':>10}{'ratio':>8}")
    for row in result["rows"]:
        print(f"{row['operation']:<20}{row['ray_us']:>10.1f}{row['ray_per_s']:>13,.0f}"
              f"{row['reference_us']:>10.2f}{row['ray/reference']:>8.0f}")


def main() -> None:
    args = parser(__doc__, "ray_overhead", "fewer calls and rounds").parse_args()
    recording = Recording()
    result = run(quick=args.quick)
    print_summary(result)
    recording.write(result, args.json)


if __name__ == "__main__":
    main()
