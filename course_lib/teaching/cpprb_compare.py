"""Our prioritized replay against cpprb's (C++/Cython), call by call: notebook 04's comparison.

`bench_buffers` runs the Ape-X access pattern on both buffers with CartPole transitions
(obs/next_obs 4 float32, action int64, reward float32, terminated bool), both filled first: add
a 50-transition batch with priorities, sample 512 (with importance weights), update 512
priorities. Ours and cpprb alternate call by call, so that load from other processes hits both
alike; each operation's median and the ratio ours/cpprb (<= 1.0: we are as fast).

Notebook 04 runs it small; `bench/replay.py` runs it at capacity 2**20 (and the Ray replay actor
beside it) and writes `bench/results/replay.json`, which the notebook prints with
`print_buffer_table`. cpprb 11.0.0 has no wheels for Python 3.13: without it, any use of
`cpprb` raises one clear error.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from course_lib.replay import PrioritizedReplayBuffer, transition_spec

NO_CPPRB = (f"cpprb is not installed (it has no wheels for Python {sys.version_info[0]}."
            f"{sys.version_info[1]}): run this comparison on Python 3.11 or 3.12")


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


def cartpole_batch(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """n random transitions shaped like CartPole's."""
    obs = rng.standard_normal((n, 4), dtype=np.float32)
    return {"obs": obs, "action": rng.integers(0, 2, n), "reward": np.ones(n, np.float32),
            "next_obs": obs + 0.01, "terminated": rng.random(n) < 0.05}


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
