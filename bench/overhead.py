"""The cost of going distributed: each role inside the running system against the same work
done bare, in one plain process, on the same machine in the same run.

    python -m bench.overhead [--quick] [--json bench/results/overhead.json]

| measured                | bare (no Ray)                  | distributed                       |
| ----------------------- | ------------------------------ | --------------------------------- |
| Ape-X learner updates/s | `DQNLearner.update` on one     | the learner actor of an Ape-X run |
|                         | batch, looped                  | (CLI default config, 4 explorers) |
| the same learner        | one process: prioritized       | the learner actor, as above       |
| (updates/s)             | sample, update, priorities back |                                   |
| explorer env steps/s,   | n plain processes: `num_envs`  | the n explorers of an Ape-X run   |
| n = 1, 2, 4             | envs, one batched forward      | whose learner has nothing to do   |
| SAC learner updates/s   | `SACLearner.update` on one     | the learner actor of a SAC run    |
|                         | batch, looped                  | (CLI default config, 2 workers)   |
| CPU ms per learner      | one process: the env steps,    | every process of an Ape-X run     |
| update                  | n-step windows, local PER and  | (CLI default config), read from   |
|                         | update (`single_process_...`)  | /proc over the learner's window   |

Same network, batch size and torch threads (1) on both sides; bare batches are random
CartPole/Pendulum-shaped transitions (an update's cost does not depend on the numbers). The bare
learner loops run before the systems and again after them: a learner's share is read against
the mean of the two, and `diagnostics.bare_learner_drift` keeps both, so a share above one, or a
change between two runs, can be set against how far this machine's speed moved meanwhile.

**What "distributed rate" means.** The run's own counters, read by the driver after every
iteration (`eval_every_s`): the learner's update count (the learner actor reports it with
each chunk of updates) or the workers' env steps. The rate is the counter's growth over a
steady-state window: from the second iteration after the counter first moved (so actor
start-up and `learning_starts` are outside it) to the end of the run. For a learner that is
only fair if it always had work: the driver owes it updates as data arrives, so a learner
that is faster than the data waits. `diagnostics` says which it was (`saturated`: the share
of iterations that ended with at least one chunk of updates owed and not done) and the rate
it was owed. The explorers are measured with a learner that never starts (`learning_starts`
beyond the run), so the learner's throttle never pauses them: their rate is what the
explorers, the replay actor that stores their batches, the driver and the evaluator leave
of 2 cores, against n bare loops sharing the same 2 cores.

`diagnostics` (beyond the schema other code reads) holds what explains the Ape-X vs SB3 race:
whether the learner was the bottleneck, the learner's rate with the explorers paused (the
cost of Ray alone, without the explorers' share of the cores), what one explorer step costs
piece by piece (env + action, n-step window, initial priorities), and what one evaluation
at the goal costs (10 and 10 + 20 CartPole episodes of 500 steps), and where the learner's
time goes (`bench/learner_profile.py`: the scheduler's and py-spy's split of its main thread
in a 4-explorer run, and the bare update loop while another process does an explorer's work).

Targets: each distributed learner at >= 80% of its bare loop's rate; the whole Ape-X system's
CPU per learner update at most 1.5x the one process's (the replay ratio is the same on both
sides: batch_size / replay_ratio env steps per update).
JSON: {"apex": {"learner": {bare_updates_s, distributed_updates_s, ratio},
"explorers": [{n, bare_steps_s, distributed_steps_s, ratio}, ...]}, "sac": {"learner": {...}},
"cpu_per_update": {single_process_ms, apex_system_ms, ratio, by_role_ms, not_counted_ms, ...},
"config": {"quick"}, "diagnostics", "targets"} (bench/benchlib.py moves "config" into "meta").
`--quick`: short windows.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from typing import Any

import numpy as np
import ray
import torch

from bench.benchlib import Recording, parser, private_ray_tmp
from bench.learner_profile import cores_by_role, cpu_seconds, profile_learner
from course_lib import init_ray
from course_lib.apex import ApexConfig, ApexTrainer
from course_lib.dqn import (
    DuelingQNet,
    epsilon_for_explorer,
    epsilon_greedy,
    make_learner,
    td_errors,
)
from course_lib.dqn.learner import epsilon_greedy_batch
from course_lib.envs import EnvBatch, evaluate_policy, make_env
from course_lib.replay import (
    NStepBuffer,
    PrioritizedReplayBuffer,
    stack_transitions,
    transition_spec,
)
from course_lib.sac import SACConfig, SACTrainer, make_learner as make_sac_learner

TARGET = 0.8                     # distributed learner / bare learner, at least
CPU_TARGET = 1.5                 # whole system's CPU per update / one process's, at most
EXPLORERS = (1, 2, 4)
FULL = {"bare_s": 5.0, "apex_s": 30.0, "explorers_s": 20.0, "sac_s": 30.0, "alone_s": 20.0,
        "profile_s": 20.0}
QUICK = {"bare_s": 1.5, "apex_s": 15.0, "explorers_s": 8.0, "sac_s": 15.0, "alone_s": 8.0,
         "profile_s": 6.0}


# ---------------------------------------------------------------------------------------------
# Bare loops: one plain process, no Ray
# ---------------------------------------------------------------------------------------------

def random_batch(rng: np.random.Generator, n: int, obs_dim: int, action_dim: int,
                 discrete: bool) -> dict[str, np.ndarray]:
    """n random transitions of the replay's layout (n-step DQN, or SAC's 1-step)."""
    obs = rng.standard_normal((n, obs_dim), dtype=np.float32)
    batch = {"obs": obs, "next_obs": obs + 0.01, "reward": rng.random(n, dtype=np.float32),
             "terminated": rng.random(n) < 0.05}
    if discrete:
        batch |= {"action": rng.integers(0, action_dim, n), "weights": np.ones(n, np.float32),
                  "discount": np.full(n, 0.99 ** 3, np.float32)}
    else:
        batch["action"] = rng.uniform(-1, 1, (n, action_dim)).astype(np.float32)
    return batch


def rate(fn, seconds: float) -> float:
    """Calls of `fn` per second, looping for `seconds` (after two warm-up calls)."""
    fn(), fn()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        fn()
        n += 1
    return n / (time.perf_counter() - start)


def bare_learner_rate(kind: str, seconds: float) -> float:
    """Updates/s of the CLI-default learner (`make_learner` of its config) on one batch."""
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    if kind == "apex":
        cfg = ApexConfig()
        learner, batch = make_learner(cfg, 4, 2, "cpu"), random_batch(rng, cfg.batch_size, 4, 2,
                                                                      True)
    else:
        cfg = SACConfig()
        learner = make_sac_learner(cfg, 3, 1, "cpu")
        batch = random_batch(rng, cfg.batch_size, 3, 1, False)
    return rate(lambda: learner.update(batch), seconds)


def bare_explorer(i: int, n: int, seconds: float, barrier, steps_out) -> None:
    """One plain process: explorer i's `num_envs` CartPole envs stepped as one batch
    (`envs.EnvBatch`) with its eps_i-greedy actions from the CLI-default network (one forward
    pass per batch), for `seconds` after every process has reached `barrier`; puts its env
    step count on `steps_out`."""
    torch.set_num_threads(1)
    cfg = ApexConfig()
    envs, rng = EnvBatch(cfg.env_id, cfg.num_envs, seed=100 * i), np.random.default_rng(i)
    net = DuelingQNet(4, 2, tuple(cfg.hidden))
    eps = epsilon_for_explorer(i, n, cfg.eps, cfg.eps_alpha)
    barrier.wait()
    steps, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        envs.step(epsilon_greedy_batch(net, envs.obs, eps, rng, 2))
        steps += cfg.num_envs
    steps_out.put(steps)


def bare_explorers_rate(n: int, seconds: float) -> float:
    """Env steps/s of n bare loops in n processes sharing the machine, started together."""
    ctx = multiprocessing.get_context("spawn")
    barrier, steps = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=bare_explorer, args=(i, n, seconds, barrier, steps))
             for i in range(n)]
    for p in procs:
        p.start()
    total = sum(steps.get() for _ in procs)
    for p in procs:
        p.join()
    return total / seconds


def bare_learner_with_replay_rate(seconds: float) -> float:
    """Updates/s of the CLI-default Ape-X learner in one plain process that does what the
    learner actor does: prioritized batches of fresh transitions from a local buffer (filled
    with random ones), `batches_per_draw` at a time, their updates, and their new priorities
    written back together."""
    torch.set_num_threads(1)
    cfg, rng = ApexConfig(), np.random.default_rng(0)
    learner = make_learner(cfg, 4, 2, "cpu")
    buffer = PrioritizedReplayBuffer(cfg.buffer_size, transition_spec((4,), n_step=True),
                                     alpha=cfg.priority_alpha, seed=0)
    for _ in range(cfg.buffer_size // 1_000):
        batch = random_batch(rng, 1_000, 4, 2, True)
        del batch["weights"]
        buffer.add(batch, rng.uniform(0.1, 2.0, 1_000))

    def updates() -> None:                    # one draw's batches, as `LearnerActor.train`
        batches = buffer.sample_many(cfg.batches_per_draw, cfg.batch_size, cfg.priority_beta)
        priorities = [learner.update(batch)["priorities"] for batch in batches]
        buffer.update_priorities(np.concatenate([batch["indices"] for batch in batches]),
                                 np.concatenate(priorities))

    return rate(updates, seconds) * cfg.batches_per_draw


def bare_learner_beside_explorer(seconds: float) -> float:
    """Updates/s of the bare Ape-X learner loop while another plain process plays as explorer 0
    (`bare_explorer`): the learner's rate with the other core busy, Ray or not."""
    ctx = multiprocessing.get_context("spawn")
    barrier, steps = ctx.Barrier(2), ctx.Queue()
    other = ctx.Process(target=bare_explorer, args=(0, 1, seconds + 2.0, barrier, steps))
    other.start()
    barrier.wait()                                # the explorer is up and playing from here
    try:
        return bare_learner_rate("apex", seconds)
    finally:
        steps.get()
        other.join()


def single_process_cpu_per_update(seconds: float) -> dict[str, float]:
    """CPU milliseconds per learner update of one plain process doing all of Ape-X's work at
    the CLI default's replay ratio: per update, batch_size / replay_ratio env steps with
    eps-greedy actions from the network and n-step windows, their transitions stored in a
    local prioritized buffer (50 at a time, initial priority the largest so far), then one
    prioritized sample, one `DQNLearner.update` and its priorities written back. What the
    whole distributed system spends per update is measured against this."""
    torch.set_num_threads(1)
    cfg = ApexConfig()
    env, rng = make_env(cfg.env_id), np.random.default_rng(0)
    learner = make_learner(cfg, 4, 2, "cpu")
    nstep = NStepBuffer(cfg.n_step, cfg.gamma)
    buffer = PrioritizedReplayBuffer(cfg.buffer_size, transition_spec((4,), n_step=True),
                                     alpha=cfg.priority_alpha, seed=0)
    eps = epsilon_for_explorer(cfg.num_workers - 1, cfg.num_workers, cfg.eps, cfg.eps_alpha)
    steps_per_update = round(cfg.batch_size / cfg.replay_ratio)
    obs, _ = env.reset(seed=0)
    outbox: list[dict] = []

    def play(steps: int) -> None:
        nonlocal obs, outbox
        for _ in range(steps):
            action = epsilon_greedy(learner.online, obs, eps, rng, 2)
            next_obs, reward, terminated, truncated, _ = env.step(action)
            outbox += nstep.add(obs, action, reward, next_obs, terminated, truncated)
            obs = env.reset()[0] if terminated or truncated else next_obs
            if len(outbox) >= cfg.send_every:
                buffer.add(stack_transitions(outbox))
                outbox = []

    play(cfg.learning_starts)
    updates, cpu0, wall0 = 0, time.process_time(), time.perf_counter()
    while time.perf_counter() - wall0 < seconds:
        play(steps_per_update)
        batch = buffer.sample(cfg.batch_size, cfg.priority_beta)
        info = learner.update(batch)
        buffer.update_priorities(batch["indices"], info["priorities"])
        updates += 1
    cpu = time.process_time() - cpu0
    return {"cpu_ms_per_update": 1000 * cpu / updates,
            "updates_s": updates / (time.perf_counter() - wall0),
            "env_steps_per_update": steps_per_update}


def explorer_step_costs(steps: int) -> dict[str, float]:
    """µs per env step of each piece of an explorer's work, in this process, greedy (a
    forward pass every step, as the low-eps explorers nearly always do): env step + action,
    the n-step window, and the initial priorities (|TD error| of 50-transition batches)."""
    torch.set_num_threads(1)
    cfg = ApexConfig()
    env, rng = make_env(cfg.env_id), np.random.default_rng(0)
    net, nstep = DuelingQNet(4, 2, tuple(cfg.hidden)), NStepBuffer(cfg.n_step, cfg.gamma)
    obs, _ = env.reset(seed=0)
    played = []
    t0 = time.perf_counter()
    for _ in range(steps):
        action = epsilon_greedy(net, obs, 0.0, rng, 2)
        next_obs, reward, terminated, truncated, _ = env.step(action)
        played.append((obs, action, reward, next_obs, terminated, truncated))
        obs = env.reset()[0] if terminated or truncated else next_obs
    t1 = time.perf_counter()
    transitions = [t for step in played for t in nstep.add(*step)]
    t2 = time.perf_counter()
    send = cfg.send_every
    batches = [stack_transitions(transitions[i:i + send])
               for i in range(0, len(transitions) - send + 1, send)]
    t3 = time.perf_counter()
    for batch in batches:
        td_errors(batch, net)
    t4 = time.perf_counter()
    return {"env_and_action_us": (t1 - t0) / steps * 1e6, "nstep_us": (t2 - t1) / steps * 1e6,
            "stack_us": (t3 - t2) / steps * 1e6,
            "priorities_us": (t4 - t3) / (send * len(batches)) * 1e6}


def evaluation_cost(repeats: int) -> dict[str, float]:
    """Seconds of one evaluation at the goal: CartPole episodes of 500 steps, the CLI-default
    network's forward pass for every batch of observations (a hand-written balancing rule
    picks the action, so that every episode lasts 500 steps)."""
    torch.set_num_threads(1)
    net = DuelingQNet(4, 2, tuple(ApexConfig().hidden))

    @torch.no_grad()
    def act(obs: np.ndarray) -> np.ndarray:
        net(torch.as_tensor(obs))
        return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)

    out = {}
    for episodes in (10, 30):
        times = []
        for r in range(repeats):
            start = time.perf_counter()
            returns = evaluate_policy(act, "CartPole-v1", episodes, seed=r)
            times.append(time.perf_counter() - start)
        out[f"{episodes}_episodes_s"] = float(np.median(times))
        out["mean_return"] = float(returns.mean())
    return out


# ---------------------------------------------------------------------------------------------
# Inside the distributed system
# ---------------------------------------------------------------------------------------------

def run_for(trainer_class, cfg, seconds: float) -> list[dict]:
    """Run a trainer for `seconds` after its start-up; its counters after every iteration,
    with every process's CPU seconds so far (`learner_profile.cpu_seconds`)."""
    trainer = trainer_class(cfg)
    samples, start = [], time.perf_counter()
    try:
        while time.perf_counter() - start < seconds:
            trainer.step()
            c = trainer.counters
            samples.append({"t": time.perf_counter() - start, "env_steps": c.env_steps,
                            "updates": c.learner_updates,
                            "owed": trainer.updates_due() - c.learner_updates,
                            "cpu": cpu_seconds()})
    finally:
        trainer.close()
    return samples


def steady_rate(samples: list[dict], key: str, skip: int = 1) -> float:
    """Growth per second of counter `key` (0 at the start) over the steady window: from the
    `skip`-th sample after the first one where it is above 0, to the last sample; NaN when
    the run is too short for such a window."""
    moved = next((i for i, s in enumerate(samples) if s[key] > 0), None)
    if moved is None or moved + skip >= len(samples) - 1:
        return float("nan")
    first, last = samples[moved + skip], samples[-1]
    return (last[key] - first[key]) / (last["t"] - first["t"])


def learner_window(samples: list[dict], chunk: int) -> dict[str, float]:
    """The learner's steady rate, the rate it was owed updates, and the share of the
    window's iterations that ended with at least one chunk owed (saturated: 1.0)."""
    window = [s for s in samples if s["updates"] > 0][1:]
    owed = [{"t": s["t"], "due": s["updates"] + s["owed"]} for s in samples]
    return {"updates_s": steady_rate(samples, "updates"),
            "owed_updates_s": steady_rate(owed, "due"),
            "saturated": float(np.mean([s["owed"] >= chunk for s in window]))
            if window else float("nan")}


def system_cpu_per_update(samples: list[dict]) -> dict[str, Any]:
    """CPU milliseconds per learner update over the steady window (as `steady_rate`'s), of
    the whole system: every Ray process (learner, workers, evaluator, parameter server,
    raylet, GCS, ...) and the driver, read from the OS. Processes that are none of these
    (`everything else`: a shell, an editor) are reported apart and not counted."""
    moved = next((i for i, s in enumerate(samples) if s["updates"] > 0), None)
    if moved is None or moved + 1 >= len(samples) - 1:
        return {"cpu_ms_per_update": float("nan")}
    first, last = samples[moved + 1], samples[-1]
    updates, wall = last["updates"] - first["updates"], last["t"] - first["t"]
    by_role = {role: cores * wall * 1000 / updates
               for role, cores in cores_by_role(first["cpu"], last["cpu"], wall).items()}
    apart = {k: by_role.pop(k) for k in ("everything else", "py-spy (this profile)")
             if k in by_role}
    return {"cpu_ms_per_update": sum(by_role.values()),
            "by_role_ms": {k: round(v, 3) for k, v in by_role.items()},
            "not_counted_ms": {k: round(v, 3) for k, v in apart.items()}}


def ratio_row(bare: float, distributed: float, unit: str) -> dict[str, float]:
    return {f"bare_{unit}_s": round(bare, 1), f"distributed_{unit}_s": round(distributed, 1),
            "ratio": round(distributed / bare, 3)}


def bench_overhead(quick: bool = False, log=print) -> dict:
    times = QUICK if quick else FULL
    # -- bare loops first, before Ray starts any process ------------------------------------
    bare = {"apex": bare_learner_rate("apex", times["bare_s"]),
            "sac": bare_learner_rate("sac", times["bare_s"])}
    with_replay = bare_learner_with_replay_rate(times["bare_s"])
    log(f"bare Ape-X learner sampling a local prioritized buffer: {with_replay:,.0f} updates/s")
    log(f"bare learners: Ape-X {bare['apex']:,.0f} updates/s, SAC {bare['sac']:,.0f} updates/s")
    bare_explorers = {n: bare_explorers_rate(n, times["bare_s"]) for n in EXPLORERS}
    log("bare explorers: " + ", ".join(f"{n}: {r:,.0f} env steps/s"
                                       for n, r in bare_explorers.items()))
    beside = bare_learner_beside_explorer(times["bare_s"])
    log(f"bare Ape-X learner, an explorer's work in another process: {beside:,.0f} updates/s")
    single = single_process_cpu_per_update(times["bare_s"] * 2)
    log(f"one process, Ape-X's work: {single['cpu_ms_per_update']:.2f} CPU ms per update")
    diagnostics = {"explorer_step_costs": explorer_step_costs(1_000 if quick else 5_000),
                   "evaluation_at_goal": evaluation_cost(1 if quick else 3),
                   "bare_learner_beside_explorer_updates_s": round(beside, 1),
                   "bare_learner_with_replay_updates_s": round(with_replay, 1)}
    # -- the same work inside the running systems ------------------------------------------
    apex_cfg = ApexConfig().updated({"target_return": None, "max_env_steps": None,
                                     "max_time_s": None})
    sac_cfg = SACConfig().updated({"target_return": None, "max_env_steps": None,
                                   "max_time_s": None})
    with private_ray_tmp():
        try:
            init_ray(num_cpus=os.cpu_count())
            apex_samples = run_for(ApexTrainer, apex_cfg, times["apex_s"])
            apex = learner_window(apex_samples, apex_cfg.learner_chunk)
            system = system_cpu_per_update(apex_samples)
            log(f"Ape-X system: {system['cpu_ms_per_update']:.2f} CPU ms per update "
                f"{system.get('by_role_ms')}")
            log(f"Ape-X learner, {apex_cfg.num_workers} explorers: {apex['updates_s']:,.0f} "
                f"updates/s (owed {apex['owed_updates_s']:,.0f}/s, saturated "
                f"{apex['saturated']:.0%} of iterations)")
            alone_cfg = apex_cfg.updated({"replay_ratio": 1e6})   # explorers pause for good
            alone = learner_window(run_for(ApexTrainer, alone_cfg, times["alone_s"]),
                                   apex_cfg.learner_chunk)
            log(f"Ape-X learner, explorers paused: {alone['updates_s']:,.0f} updates/s")
            explorers = {}
            for n in EXPLORERS:
                cfg = apex_cfg.updated({"num_workers": n, "learning_starts": 10**12})
                explorers[n] = steady_rate(run_for(ApexTrainer, cfg, times["explorers_s"]),
                                           "env_steps")
                log(f"{n} explorer(s), learner idle: {explorers[n]:,.0f} env steps/s")
            profile = profile_learner(apex_cfg, warmup_s=10.0, seconds=times["profile_s"])
            log(f"Ape-X learner profiled: {profile}")
            sac = learner_window(run_for(SACTrainer, sac_cfg, times["sac_s"]),
                                 sac_cfg.learner_chunk)
            log(f"SAC learner, {sac_cfg.num_workers} workers: {sac['updates_s']:,.0f} "
                f"updates/s (owed {sac['owed_updates_s']:,.0f}/s, saturated "
                f"{sac['saturated']:.0%} of iterations)")
        finally:
            ray.shutdown()
    # -- the bare loops again, after the systems: this machine's speed drifts over minutes,
    # so a share is read against the mean of the two, and their spread bounds the drift -------
    after = {kind: bare_learner_rate(kind, times["bare_s"]) for kind in bare}
    log(f"bare learners again: Ape-X {after['apex']:,.0f} updates/s, SAC "
        f"{after['sac']:,.0f} updates/s")
    diagnostics["bare_learner_drift"] = {
        kind: {"before_updates_s": round(bare[kind], 1), "after_updates_s": round(after[kind], 1),
               "after_over_before": round(after[kind] / bare[kind], 3)} for kind in bare}
    bare = {kind: (bare[kind] + after[kind]) / 2 for kind in bare}
    diagnostics |= {"apex_learner": {**apex, "explorers": apex_cfg.num_workers},
                    "apex_learner_explorers_paused": alone, "apex_learner_profile": profile,
                    "sac_learner": {**sac, "workers": sac_cfg.num_workers},
                    "windows_s": times}
    result = {
        "apex": {"learner": ratio_row(bare["apex"], apex["updates_s"], "updates"),
                 "learner_vs_local_replay": ratio_row(with_replay, apex["updates_s"], "updates"),
                 "explorers": [{"n": n, **ratio_row(bare_explorers[n], explorers[n], "steps")}
                               for n in EXPLORERS]},
        "sac": {"learner": ratio_row(bare["sac"], sac["updates_s"], "updates")},
        "cpu_per_update": {
            "single_process_ms": round(single["cpu_ms_per_update"], 3),
            "apex_system_ms": round(system["cpu_ms_per_update"], 3),
            "ratio": round(system["cpu_ms_per_update"] / single["cpu_ms_per_update"], 3),
            "by_role_ms": system.get("by_role_ms", {}),
            "not_counted_ms": system.get("not_counted_ms", {}),
            "single_process": single, "explorers": apex_cfg.num_workers},
        "config": {"quick": quick}, "diagnostics": diagnostics}
    result["targets"] = {} if quick else {
        f"{algo} learner distributed/bare": {
            "value": result[algo]["learner"]["ratio"], "target": TARGET,
            "met": bool(result[algo]["learner"]["ratio"] >= TARGET),
            "note": "" if diagnostics[f"{algo}_learner"]["saturated"] >= 0.5 else
            "the learner waited for data most of the window: its rate is what it was owed"}
        for algo in ("apex", "sac")}
    if not quick:
        value = result["cpu_per_update"]["ratio"]
        result["targets"]["system CPU per update / one process"] = {
            "value": value, "target": CPU_TARGET, "met": bool(value <= CPU_TARGET),
            "note": "at most"}
    return result


def main() -> None:
    args = parser(__doc__, "overhead", "short windows (smoke run)").parse_args()
    recording = Recording()
    result = bench_overhead(args.quick)
    for algo in ("apex", "sac"):
        row = result[algo]["learner"]
        print(f"{algo} learner: bare {row['bare_updates_s']:,.0f} updates/s, distributed "
              f"{row['distributed_updates_s']:,.0f} updates/s, ratio {row['ratio']:.2f}")
    for row in result["apex"]["explorers"]:
        print(f"{row['n']} explorer(s): bare {row['bare_steps_s']:,.0f} env steps/s, "
              f"distributed {row['distributed_steps_s']:,.0f}, ratio {row['ratio']:.2f}")
    cpu = result["cpu_per_update"]
    print(f"CPU per learner update: one process {cpu['single_process_ms']:.2f} ms, the Ape-X "
          f"system {cpu['apex_system_ms']:.2f} ms, ratio {cpu['ratio']:.2f}")
    recording.write(result, args.json)


if __name__ == "__main__":
    main()
