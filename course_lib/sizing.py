"""How many explorers, and what bounds a run: the scaling model of Ape-X, from per-step costs.

Symbols (times in ms, rates per second; `StepCosts` holds the measured ones):

| symbol | what                                                               | field        |
| ------ | ------------------------------------------------------------------ | ------------ |
| c_x    | an explorer's CPU per transition: act, env step, n-step window,    | `act_ms`     |
|        | initial priority                                                   |              |
| L      | the wait of one env step (a remote simulator; no CPU): the E envs  | `latency_ms` |
|        | of an explorer wait it together, once per batch step               |              |
| c_u    | one learner update (a bare `DQNLearner.update`)                    | `update_ms`  |
| c_r    | the learner's replay work per update on its training thread:       | `replay_ms`  |
|        | sample a batch, write its priorities back                          |              |
| eta    | what else slows the learner inside the system (cores shared with   | `efficiency` |
|        | the explorers and Ray's processes): its rate there / its bare rate |              |
| E      | envs per explorer; B batch size; RR replay ratio (samples per      | arguments    |
|        | inserted transition), so u = RR / B learner updates per transition |              |

    explorer rate        r_e  = E / (L + E c_x)                  transitions/s of one explorer
    learner capacity     U    = eta / (c_u + c_r)                updates/s
    best explorer count  N*   = U B / (RR r_e) = U / (u r_e)    the explorers that keep it busy
    throughput           T(N) = min(N r_e, U / u, cores / (c_x + u (c_u + c_r)))

T(N) is Amdahl's best case (`amdahl_ms`, ms per transition, its inverse): the waits overlap
across explorers, the learner's work does not, and all the CPU work shares the cores. It is
the one bound the workbook draws: `bench/scaling.py` beside the time to 475, and
`teaching.ladder` beside acting throughput (no learner: c_u = 0). A cheap env (L = 0) leaves
nothing to win; an env whose cost is paid elsewhere is where N explorers pay, until the
learner or the cores are busy.

`choose_explorers` turns the model into a count, `measure_costs` measures c_x, L, c_u and c_r
in about a second in this process, and `auto_explorers` does both for a config: what the
command line's `--num-workers auto` runs before it starts the trainer. The replay ratio
decides everything: at the workbook's RR = 16 one CPU learner keeps only a few explorers busy;
changing RR is an algorithmic variant, not a tuning.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from dataclasses import dataclass

import numpy as np
import torch

from course_lib.dqn.learner import DuelingQNet, epsilon_greedy_batch, make_learner, td_errors
from course_lib.envs import EnvBatch, env_dims
from course_lib.replay.nstep import NStepBuffer, stack_transitions
from course_lib.replay.prioritized import PrioritizedReplayBuffer
from course_lib.replay.uniform import transition_spec

#: `choose_explorers` stops at the first count within this share of the best throughput: one
#: explorer more for under 5% more transitions costs more in cores than it gives
SLACK = 0.05


@dataclass(frozen=True)
class StepCosts:
    """Per-step costs in milliseconds (see the module's table)."""

    act_ms: float                  # c_x: an explorer's CPU per transition
    update_ms: float               # c_u: one bare learner update
    replay_ms: float = 0.0         # c_r: sampling and priorities, per update, on its thread
    latency_ms: float = 0.0        # L: the wait of one (batched) env step
    efficiency: float = 1.0        # eta: the learner's rate inside the system / bare

    def __post_init__(self):
        for name in ("act_ms", "update_ms", "replay_ms", "latency_ms"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0 ms, got {getattr(self, name)!r}")
        if not 0 < self.efficiency <= 1:
            raise ValueError(f"efficiency must be in (0, 1], got {self.efficiency!r}")

    def at(self, latency_ms: float) -> StepCosts:
        """The same costs with env steps that wait `latency_ms`."""
        return dataclasses.replace(self, latency_ms=latency_ms)


# ---------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------

def amdahl_ms(act_ms: float, latency_ms: float, update_ms: float = 0.0, envs: int = 1,
              explorers: int | None = None, cores: int = 1, efficiency: float = 1.0) -> float:
    """Amdahl's best case: milliseconds per transition (GUIDE §7).

    `update_ms` is the learner's work per transition (u x the cost of one update). One
    process (`explorers=None`) steps `envs` envs as a batch and pays everything in turn:
    act + L / envs + update. N explorers of `envs` envs each overlap their waits, the
    learner's work does not overlap itself, and all the CPU work shares the cores:
    max((act + L / envs) / N, update / efficiency, (act + update) / cores).
    """
    if explorers is None:
        return act_ms + latency_ms / envs + update_ms
    return max((act_ms + latency_ms / envs) / explorers, update_ms / efficiency,
               (act_ms + update_ms) / cores)


def updates_per_transition(replay_ratio: float, batch_size: int) -> float:
    """u = RR / B: learner updates owed per inserted transition."""
    return replay_ratio / batch_size


def explorer_rate(costs: StepCosts, envs: int) -> float:
    """r_e = E / (L + E c_x): transitions/s of one explorer stepping `envs` envs as a batch."""
    return 1000 * envs / (costs.latency_ms + envs * costs.act_ms)


def learner_capacity(costs: StepCosts) -> float:
    """U = eta / (c_u + c_r): the learner's updates/s when it always has work."""
    return 1000 * costs.efficiency / (costs.update_ms + costs.replay_ms)


def throughput(costs: StepCosts, explorers: int, envs: int, u: float, cores: int) -> float:
    """T(N): transitions/s of `explorers` explorers and one learner owed `u` updates each
    (1 / `amdahl_ms` with the learner's work per transition, u (c_u + c_r))."""
    return 1000 / amdahl_ms(costs.act_ms, costs.latency_ms,
                            u * (costs.update_ms + costs.replay_ms), envs, explorers, cores,
                            costs.efficiency)


@dataclass(frozen=True)
class ExplorerChoice:
    """What `choose_explorers` decided, and why."""

    count: int                     # explorers to start
    n_star: float                  # N* = U / (u r_e), the count that just feeds the learner
    bound: str                     # what stops more explorers paying: learner, cores, limit
    transitions_s: float           # T(count), predicted
    updates_s: float               # u T(count), predicted
    reason: str                    # one line a log or the CLI can print


def choose_explorers(costs: StepCosts, replay_ratio: float, batch_size: int, cores: int,
                     envs: int = 1, max_explorers: int = 64) -> ExplorerChoice:
    """The fewest explorers whose predicted throughput is within `SLACK` of the most any count
    reaches (the learner's U / u, or the cores' limit, whichever is lower), and why."""
    if cores < 1 or envs < 1 or max_explorers < 1 or not replay_ratio > 0 or batch_size < 1:
        raise ValueError("choose_explorers needs cores, envs, max_explorers and batch_size "
                         f">= 1 and replay_ratio > 0; got cores={cores}, envs={envs}, "
                         f"max_explorers={max_explorers}, batch_size={batch_size}, "
                         f"replay_ratio={replay_ratio}")
    u = updates_per_transition(replay_ratio, batch_size)
    r_e, capacity = explorer_rate(costs, envs), learner_capacity(costs)
    learner_s = capacity / u                                 # transitions/s the learner takes
    cpu_s = 1000 * cores / (costs.act_ms + u * (costs.update_ms + costs.replay_ms))
    best = min(learner_s, cpu_s)
    count = min(max(1, math.ceil((1 - SLACK) * best / r_e - 1e-9)), max_explorers)
    bound = ("limit" if count * r_e < (1 - SLACK) * best else
             "learner" if learner_s <= cpu_s else "cores")
    t = throughput(costs, count, envs, u, cores)
    each = (f"each explorer gives {r_e:,.0f} transitions/s ({costs.act_ms:.3f} ms of CPU, "
            f"{costs.latency_ms:.3g} ms wait per step of {envs} envs)")
    takes = (f"the learner takes {learner_s:,.0f}/s ({capacity:,.0f} updates/s at replay "
             f"ratio {replay_ratio:g}, batch {batch_size})")
    reason = {"learner": f"{count} explorer(s): {each}; {takes}, N* = {capacity / u / r_e:.2f}",
              "cores": f"{count} explorer(s): {each}; the {cores} cores run {cpu_s:,.0f}/s at "
                       f"most, fewer than {takes}",
              "limit": f"{count} explorer(s), the most allowed: {each}; {takes}"}[bound]
    return ExplorerChoice(count, capacity / u / r_e, bound, t, u * t, reason)


# ---------------------------------------------------------------------------------------------
# Measuring the costs at start-up
# ---------------------------------------------------------------------------------------------

def measure_costs(cfg, seconds: float = 1.0) -> StepCosts:
    """c_x, L, c_u and c_r of an Ape-X config (`apex.ApexConfig`, or any config with its
    fields), measured in this process in about `seconds`, torch on one thread (as in the
    explorers and the learner), CPU time read per thread (what Ray's threads in this process
    spend is not counted). Half the time plays as an explorer does: `num_envs` envs as one
    batch waiting `env_latency_ms`, one forward pass, n-step windows, initial priorities per
    `send_every` transitions. The other half trains as the learner does, on those
    transitions tiled into a full buffer of `buffer_size`: sample, update, priorities back.
    `efficiency` is left at 1: what the cores' sharing costs is not seen alone."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        act_ms, latency_ms, played, dims = _explorer_costs(cfg, seconds / 2)
        update_ms, replay_ms = _learner_costs(cfg, seconds / 2, played, dims)
    finally:
        torch.set_num_threads(threads)
    return StepCosts(act_ms, update_ms, replay_ms, latency_ms)


def _explorer_costs(cfg, seconds: float) -> tuple[float, float, dict, tuple[int, int]]:
    """(c_x, L, the transitions played, (obs_dim, n_actions)) of an explorer's loop."""
    envs = EnvBatch(cfg.env_id, cfg.num_envs, cfg.env_latency_ms, seed=cfg.seed)
    dims = env_dims(envs.envs[0])
    net = DuelingQNet(*dims, tuple(cfg.hidden))
    nsteps = [NStepBuffer(cfg.n_step, cfg.gamma) for _ in range(cfg.num_envs)]
    rng = np.random.default_rng(cfg.seed)
    outbox, played, waits = [], [], []
    cpu, steps, end = 0.0, 0, time.perf_counter() + seconds
    while time.perf_counter() < end or steps < (cfg.n_step + 2) * cfg.num_envs:
        start = time.thread_time()
        obs = envs.obs
        actions = epsilon_greedy_batch(net, obs, 0.0, rng, dims[1])
        wall, own = time.perf_counter(), time.thread_time()
        next_obs, rewards, terminated, truncated = envs.step(actions)
        waits.append(time.perf_counter() - wall - (time.thread_time() - own))
        for i in range(cfg.num_envs):
            outbox += nsteps[i].add(obs[i], actions[i], rewards[i], next_obs[i], terminated[i],
                                    truncated[i])
        if len(outbox) >= cfg.send_every:
            batch = stack_transitions(outbox)
            td_errors(batch, net)
            played.append(batch)
            outbox = []
        cpu += time.thread_time() - start
        steps += cfg.num_envs
    envs.close()
    if outbox:
        played.append(stack_transitions(outbox))
    transitions = {k: np.concatenate([b[k] for b in played]) for k in played[0]}
    return 1000 * cpu / steps, 1000 * float(np.median(waits)), transitions, dims


def _learner_costs(cfg, seconds: float, played: dict, dims: tuple[int, int]) -> tuple[float,
                                                                                     float]:
    """(c_u, c_r): medians over updates of one update, and of its sample plus priorities
    written back, on a full buffer of `buffer_size` (the played transitions tiled)."""
    spec = transition_spec((dims[0],), n_step=True)
    buffer = PrioritizedReplayBuffer(cfg.buffer_size, spec, alpha=cfg.priority_alpha,
                                     seed=cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    buffer.add({k: np.resize(v, (cfg.buffer_size, *v.shape[1:])) for k, v in played.items()},
               rng.uniform(0.1, 2.0, cfg.buffer_size))
    learner = make_learner(cfg, *dims, "cpu")
    updates, replays, end = [], [], time.perf_counter() + seconds
    while time.perf_counter() < end or len(updates) < 5:
        t0 = time.thread_time()
        batch = buffer.sample(cfg.batch_size, cfg.priority_beta)
        t1 = time.thread_time()
        info = learner.update(batch)
        t2 = time.thread_time()
        buffer.update_priorities(batch["indices"], info["priorities"])
        t3 = time.thread_time()
        updates.append(t2 - t1)
        replays.append(t1 - t0 + t3 - t2)
    return 1000 * float(np.median(updates[2:])), 1000 * float(np.median(replays[2:]))


def auto_explorers(cfg, seconds: float = 1.0, cores: int | None = None):
    """(`cfg` with `num_workers` set to the model's count, the `ExplorerChoice` that says why),
    from costs measured now on this machine (`measure_costs`, about `seconds`): its env at
    `env_latency_ms`, its `num_envs`, `replay_ratio` and `batch_size`, and `cores` (default:
    this machine's, which is what a local run shares; on a cluster, explorers on other nodes
    would add cores the model does not count, so give a number there)."""
    costs = measure_costs(cfg, seconds)
    choice = choose_explorers(costs, cfg.replay_ratio, cfg.batch_size, cores or os.cpu_count()
                              or 1, cfg.num_envs)
    return cfg.updated({"num_workers": choice.count}), choice
