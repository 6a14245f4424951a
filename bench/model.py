"""The scaling model (`course_lib.sizing`) against the ladder, then on paper to 16 nodes.

    python -m bench.model [--quick] [--json bench/results/model.json]

**(a) Per-step costs**, each measured in a few seconds, bare (torch on one thread), then with
Ray in a private instance:

| cost            | what                                                                 |
| --------------- | -------------------------------------------------------------------- |
| act_ms          | c_x: an explorer's act + env step + n-step + initial priority, per   |
|                 | transition (`sizing.measure_costs`)                                  |
| update_ms       | c_u: one learner update, at the CLI default's batch and at 512       |
| replay_ms       | c_r: one prioritized sample and its priorities written back          |
| insert_ms       | one add of a `send_every` batch into the learner's buffer            |
| call_ms         | that batch sent to a replay actor and stored, calls pipelined: the   |
|                 | actor's time per add call (what bounds how many it takes per second) |
| take_ms         | a batch fetched from a `ShardStoreActor`, calls pipelined (call +    |
|                 | transfer back)                                                       |
| submit_ms       | what sending one call costs its caller (`.remote()` alone)           |
| pull_ms         | the Q network's weights through the object store (put + get)         |

Inside the system an explorer also pays its share of the calls (submit_ms / send_every and
pull_ms / pull_every per transition) and the learner its share of the add calls it handles
and stores and of the weights it publishes: the model adds those to c_x and c_r. It counts
no sharing of cores (eta = 1): where the learner measures slower than predicted, that is
what the reading names.

**(b) The committed ladder** (bench/results/scaling.json): at each latency, the count the model
picks (`sizing.choose_explorers`: from the costs measured here, and from the ladder's own
bare costs) against the ladder's fastest Ape-X (median time to 475); then Ape-X runs for a
window at the ladder's best count, and the learner's steady updates/s (`overhead`'s window)
is set against the model's u T(N). Targets: within one explorer; within 20%.

**(c) On paper: 256 explorers on 16 nodes**, in the workbook's regime (replay ratio 16, batch
64) and in the Ape-X paper's (replay ratio about 1, batch 512): the learner updates/s the
explorers' data asks for, how many one CPU learner is, the replay shards needed (each kept
under half a core), the weight and replay traffic per node (node-local shards: explorers'
adds never leave their node), and what bounds the run.

`--quick`: short measurements and one rung run: the script works, nothing more. Timings
taken on a busy machine are not figures: produce bench/results/model.json on a quiet one.
"""

from __future__ import annotations

import math
import os
import statistics
import time

import numpy as np
import ray

from bench.benchlib import Recording, parser, private_ray_tmp
from bench.overhead import learner_window, run_for
from bench.scaling_summary import explorers
from course_lib import init_ray
from course_lib.apex import ApexConfig, ApexTrainer
from course_lib.dqn import DuelingQNet
from course_lib.nets import get_weights
from course_lib.replay import PrioritizedReplayBuffer, ShardStoreActor, transition_spec
from course_lib.sizing import StepCosts, choose_explorers, measure_costs, throughput
from course_lib.teaching.bench_results import load

NODES, EXPLORERS = 16, 256                  # the paper cluster
REGIMES = {"workbook": {"replay_ratio": 16.0, "batch_size": 64},
           "Ape-X paper": {"replay_ratio": 1.0, "batch_size": 512}}
SHARD_BUSY = 0.5                            # a replay shard kept under half a core
PIPELINED = 10                              # calls in flight when a call's cost is timed
COUNT_TARGET, RATE_TARGET = 1, 0.2          # within one explorer; within 20%
FULL = {"cost_s": 2.0, "ray_s": 1.0, "window_s": 30.0}
QUICK = {"cost_s": 0.4, "ray_s": 0.3, "window_s": 10.0}


# ---------------------------------------------------------------------------------------------
# (a) The costs
# ---------------------------------------------------------------------------------------------

def median_ms(fn, seconds: float) -> float:
    """Median wall milliseconds of `fn()` over calls for about `seconds` (after a warm-up)."""
    fn()
    times, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 5:
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def submit_ms(actor, seconds: float) -> float:
    """Median milliseconds the caller spends sending one call (`PIPELINED` at a time, the
    answers waited for outside the clock)."""
    times, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 5:
        start = time.perf_counter()
        refs = [actor.totals.remote() for _ in range(PIPELINED)]
        times.append(time.perf_counter() - start)
        ray.get(refs)
    return 1000 * statistics.median(times) / PIPELINED


def measure_all(cfg: ApexConfig, times: dict, log=print) -> dict:
    """Every cost of the module's table (a), in ms, and the sizes the traffic is made of."""
    costs = {}
    for regime in REGIMES.values():
        c = measure_costs(cfg.updated({"batch_size": regime["batch_size"]}), times["cost_s"])
        costs.setdefault("act_ms", c.act_ms)
        costs[f"update_ms_{regime['batch_size']}"] = c.update_ms
        costs[f"replay_ms_{regime['batch_size']}"] = c.replay_ms
    spec = transition_spec((4,), n_step=True)
    rng = np.random.default_rng(0)
    batch = {name: rng.random((cfg.send_every, *shape)).astype(dtype)
             for name, (shape, dtype) in spec.items()}
    buffer = PrioritizedReplayBuffer(cfg.buffer_size, spec, alpha=cfg.priority_alpha)
    costs["insert_ms"] = median_ms(lambda: buffer.add(batch, np.ones(cfg.send_every)),
                                   times["cost_s"] / 2)
    weights = get_weights(DuelingQNet(4, 2, tuple(cfg.hidden)))
    with private_ray_tmp():
        init_ray(num_cpus=os.cpu_count())
        try:
            shard = ShardStoreActor.remote(cfg.buffer_size, spec, alpha=cfg.priority_alpha)
            ones = np.ones(cfg.send_every)
            costs["call_ms"] = median_ms(lambda: ray.get(
                [shard.add.remote(batch, ones) for _ in range(PIPELINED)]),
                times["ray_s"]) / PIPELINED
            total = ray.get(shard.totals.remote())[0]
            for b in sorted({r["batch_size"] for r in REGIMES.values()}):
                targets = np.sort(rng.random(b)) * total
                costs[f"take_ms_{b}"] = median_ms(lambda t=targets: ray.get(
                    [shard.take.remote(t, total) for _ in range(PIPELINED)]),
                    times["ray_s"]) / PIPELINED
            costs["submit_ms"] = submit_ms(shard, times["ray_s"])
            costs["pull_ms"] = median_ms(lambda: ray.get(ray.put(weights)), times["ray_s"])
        finally:
            ray.shutdown()
    costs["transition_bytes"] = sum(np.dtype(d).itemsize * int(np.prod(s))
                                    for s, d in spec.values())
    costs["weights_bytes"] = sum(a.nbytes for a in weights.values())
    log("costs: " + ", ".join(f"{k} {v:.4g}" for k, v in costs.items()))
    return costs


def in_system(costs: dict, cfg: ApexConfig, batch_size: int, replay_ratio: float,
              latency_ms: float) -> StepCosts:
    """The model's `StepCosts` inside Ape-X: the bare costs plus each side's share of the Ray
    calls (an explorer's adds and pulls per transition; the learner's stored adds and
    publications per update)."""
    per_update = batch_size / replay_ratio              # transitions the learner stores each
    return StepCosts(
        act_ms=costs["act_ms"] + costs["submit_ms"] / cfg.send_every
        + costs["pull_ms"] / cfg.pull_every,
        update_ms=costs[f"update_ms_{batch_size}"],
        replay_ms=costs[f"replay_ms_{batch_size}"] + (costs["insert_ms"] + costs["call_ms"])
        * per_update / cfg.send_every + costs["pull_ms"] / cfg.publish_every,
        latency_ms=latency_ms)


# ---------------------------------------------------------------------------------------------
# (b) The ladder
# ---------------------------------------------------------------------------------------------

def ladder_best(scaling: dict) -> dict[float, dict]:
    """Per latency of a scaling result, its fastest Ape-X row (median seconds to the goal;
    only counts whose every seed reached it) and every Ape-X row, by count."""
    best = {}
    for latency in scaling["meta"]["config"]["latencies_ms"]:
        rows = {explorers(w["variant"]): w for w in scaling["summary"]
                if w["latency_ms"] == latency and explorers(w["variant"])   # not apex-auto
                and w["reached"] == w["seeds"]}
        if rows:
            n = min(rows, key=lambda k: rows[k]["median_seconds"])
            best[latency] = {"count": n, "rows": rows}
    return best


def count_reading(model: int, best: int, rows: dict) -> str:
    """Why the model's count and the ladder's best agree or not."""
    if model == best:
        return "the same count"
    if model in rows and rows[model]["min_seconds"] <= rows[best]["max_seconds"]:
        return (f"the ladder's seeds at {model} and {best} explorers overlap: its medians "
                "cannot tell these counts apart")
    if model not in rows:
        return (f"the ladder has no apex-{model} row (a fixed count of {model}) that reached "
                "475 on every seed")
    return ("the ladder's time to 475 also counts env steps, which the explorers' eps "
            "spread changes with their number; the model counts throughput only")


def rate_reading(predicted: float, window: dict, cores: int, n: int) -> str:
    """Why the learner's measured updates/s and the model's agree or not."""
    measured, ratio = window["updates_s"], window["updates_s"] / predicted
    if math.isnan(measured):
        return "not measured: the window was too short for a steady rate"
    if abs(ratio - 1) <= RATE_TARGET:
        return f"within {RATE_TARGET:.0%}"
    if window["saturated"] < 0.5:
        return ("the learner waited for data: the explorers gave less than the model's r_e "
                "(the driver's throttle, Ray's calls beyond the measured ones)")
    if measured < predicted:
        return (f"the learner was busy but ran at {ratio:.2f} of its costs' rate: it shares "
                f"{cores} cores with {n} explorer(s), the evaluator and Ray's processes, "
                f"which the model does not count (eta = 1); eta here = {ratio:.2f}")
    return ("faster than its costs say: those were measured on a busier machine than the "
            "run (compare the loads)")


def check_ladder(costs: dict, scaling: dict, cfg: ApexConfig, latencies, window_s: float,
                 log=print) -> list[dict]:
    """(b): per ladder latency, the counts and (for `latencies`) the learner's rates."""
    rows, c = [], scaling["costs"]
    cores_then, cores = scaling["meta"]["config"]["cores"], os.cpu_count()
    theirs = StepCosts(act_ms=c["act_ms"], update_ms=c["update_ms"])
    u = cfg.replay_ratio / cfg.batch_size
    for latency, best in ladder_best(scaling).items():
        here = in_system(costs, cfg, cfg.batch_size, cfg.replay_ratio, latency)
        pick = choose_explorers(here, cfg.replay_ratio, cfg.batch_size, cores_then,
                                cfg.num_envs)
        from_ladder = choose_explorers(theirs.at(latency), cfg.replay_ratio, cfg.batch_size,
                                       cores_then, cfg.num_envs).count
        n = best["count"]
        row = {"latency_ms": latency, "ladder_best": n, "model_count": pick.count,
               "model_count_ladder_costs": from_ladder, "n_star": round(pick.n_star, 2),
               "count_ok": abs(pick.count - n) <= COUNT_TARGET,
               "count_reading": count_reading(pick.count, n, best["rows"]),
               "predicted_updates_s": round(u * throughput(here, n, cfg.num_envs, u, cores), 1)}
        if latency in latencies:
            run = cfg.updated({"num_workers": n, "env_latency_ms": latency,
                               "target_return": None, "max_env_steps": None,
                               "max_time_s": None})
            window = learner_window(run_for(ApexTrainer, run, window_s), cfg.learner_chunk)
            row |= {"measured_updates_s": round(window["updates_s"], 1),
                    "saturated": round(window["saturated"], 2),
                    "rate_ok": abs(window["updates_s"] / row["predicted_updates_s"] - 1)
                    <= RATE_TARGET,
                    "rate_reading": rate_reading(row["predicted_updates_s"], window, cores, n)}
        rows.append(row)
        log(f"{latency:g} ms: ladder {n}, model {pick.count} (N* {pick.n_star:.2f}; from the "
            f"ladder's costs {from_ladder}): {row['count_reading']}; learner predicted "
            f"{row['predicted_updates_s']:,.0f}/s, measured "
            + (f"{row['measured_updates_s']:,.0f}/s: {row['rate_reading']}"
               if "measured_updates_s" in row else "(not run)"), flush=True)
    return rows


# ---------------------------------------------------------------------------------------------
# (c) On paper
# ---------------------------------------------------------------------------------------------

def take_cost(costs: dict) -> tuple[float, float]:
    """(ms per take call, ms per row taken): the line through the two batch sizes' takes."""
    (b1, t1), (b2, t2) = sorted((int(k.rsplit("_", 1)[1]), v) for k, v in costs.items()
                                if k.startswith("take_ms_"))
    per_row = max(0.0, (t2 - t1) / (b2 - b1))
    return max(0.0, t1 - per_row * b1), per_row


def shard_plan(costs: dict, cfg: ApexConfig, transitions_s: float, updates_s: float,
               batch_size: int) -> tuple[int | None, int]:
    """(shards, batches per take call): the fewest shards each kept under `SHARD_BUSY` of a
    core, asked for the fewest batches per call that keep the takes' calls within half of
    that (more batches per call: older priorities). A shard stores its share of the adds
    (each call handled) and answers one take call per `per_call` updates, with its share of
    their rows; (None, 32) when even 32 batches per call are too many calls."""
    call, per_row = take_cost(costs)
    adds = transitions_s / cfg.send_every * (costs["insert_ms"] + costs["call_ms"])
    for per_call in (1, 2, 4, 8, 16, 32):
        calls = updates_s * call / per_call                        # on every shard
        if calls <= 1000 * SHARD_BUSY / 2:
            room = 1000 * SHARD_BUSY - calls
            return math.ceil((adds + updates_s * per_row * batch_size) / room), per_call
    return None, 32


def on_paper(costs: dict, cfg: ApexConfig, latencies) -> list[dict]:
    """(c): per regime and latency, what 256 explorers on 16 nodes would ask for. The learner
    holds no buffer there: its replay work is sending its take calls to the shards (answered
    while it trains: prefetch), so one learner updates at 1 / (c_u + sending its calls +
    publishing)."""
    rows = []
    for regime, r in REGIMES.items():
        rr, b = r["replay_ratio"], r["batch_size"]
        for latency in latencies:
            act = in_system(costs, cfg, b, rr, latency).act_ms
            r_e = 1000 * cfg.num_envs / (latency + cfg.num_envs * act)
            supply = EXPLORERS * r_e
            needed = supply * rr / b                             # updates/s
            shards, per_call = shard_plan(costs, cfg, supply, needed, b)
            one = 1000 / (costs[f"update_ms_{b}"] + (shards or NODES) * costs["submit_ms"]
                          / per_call + costs["pull_ms"] / cfg.publish_every)
            versions = needed / cfg.publish_every
            pulls = EXPLORERS / NODES * r_e / cfg.pull_every
            rows.append({
                "regime": regime, "replay_ratio": rr, "batch_size": b, "latency_ms": latency,
                "explorer_transitions_s": round(supply), "updates_s_needed": round(needed),
                "one_learner_updates_s": round(one), "learners": round(needed / one, 1),
                "shards": shards, "batches_per_take": per_call,
                "weights_mb_s_per_node": round(min(versions, pulls) * costs["weights_bytes"]
                                               / 1e6, 2),
                "replay_mb_s_per_node": round(needed * b * (costs["transition_bytes"] + 16)
                                              / NODES / 1e6, 2),
                "learner_in_mb_s": round(needed * b * (costs["transition_bytes"] + 16) / 1e6,
                                         1),
                "bound": bound(needed, one, shards)})
    return rows


def bound(needed: float, one: float, shards: int | None) -> str:
    """What stops the paper cluster first, in words."""
    what = (f"the learner: {needed / one:.1f}x what one CPU learner updates" if needed > one
            else f"the explorers: the learner is busy {needed / one:.0%} of the time")
    if shards is None:
        return f"{what}; and no shard keeps up with the take calls, even 32 batches per call"
    return what + (f"; and {shards} shards > {NODES} nodes" if shards > NODES else "")


# ---------------------------------------------------------------------------------------------
# The run, its report
# ---------------------------------------------------------------------------------------------

def bench_model(quick: bool, log=print) -> dict:
    times, cfg = (QUICK if quick else FULL), ApexConfig()
    scaling = load("scaling")
    costs = measure_all(cfg, times, log)
    latencies = scaling["meta"]["config"]["latencies_ms"]
    run_at = [2.0] if quick else latencies
    with private_ray_tmp():
        init_ray(num_cpus=os.cpu_count())
        try:
            ladder = check_ladder(costs, scaling, cfg, run_at, times["window_s"], log)
        finally:
            ray.shutdown()
    paper = on_paper(costs, cfg, latencies)
    for row in paper:
        log(f"{row['regime']}, {row['latency_ms']:g} ms: {row['updates_s_needed']:,} updates/s "
            f"needed ({row['learners']}x one learner), {row['shards'] or 'no number of'} "
            f"shards ({row['batches_per_take']} batches per take); bound: {row['bound']}")
    ran = [r for r in ladder if "rate_ok" in r]
    targets = {} if quick else {
        "best count within one explorer, every rung": {
            "value": sum(r["count_ok"] for r in ladder), "target": f"{len(ladder)} rungs",
            "met": all(r["count_ok"] for r in ladder)},
        "learner updates/s within 20%, every rung": {
            "value": sum(r["rate_ok"] for r in ran), "target": f"{len(ran)} rungs",
            "met": bool(ran) and all(r["rate_ok"] for r in ran)}}
    return {"config": {"quick": quick, "times": times, "nodes": NODES, "explorers": EXPLORERS,
                       "cores": os.cpu_count(), "ladder_cpu": scaling["meta"]["machine"]["cpu"],
                       "ladder_commit": scaling["meta"].get("commit")},
            "costs": costs, "ladder": ladder, "paper": paper, "targets": targets}


def section(r: dict) -> str:
    """The RESULTS.md tables: the costs, the ladder against the model, the paper cluster."""
    c = r["costs"]
    costs = ", ".join(f"{k.replace('_ms', '')} {v:.3f} ms" for k, v in c.items()
                      if k.endswith("_ms") or "_ms_" in k)
    lines = [f"Costs measured in the run: {costs}; a transition {c['transition_bytes']} bytes, "
             f"the weights {c['weights_bytes'] / 1e3:,.0f} KB.", "",
             "| latency ms | ladder's best | model | model, ladder's costs | N* | predicted "
             "updates/s | measured | saturated | reading |",
             "|---|---|---|---|---|---|---|---|---|"]
    for w in r["ladder"]:
        measured = f"{w['measured_updates_s']:,.0f}" if "measured_updates_s" in w else "–"
        saturated = f"{w['saturated']:.0%}" if "saturated" in w else "–"
        lines.append(f"| {w['latency_ms']:g} | {w['ladder_best']} | {w['model_count']} | "
                     f"{w['model_count_ladder_costs']} | {w['n_star']:.2f} | "
                     f"{w['predicted_updates_s']:,.0f} | {measured} | {saturated} | "
                     f"{w['count_reading']}; {w.get('rate_reading', 'not run')} |")
    cfg = r["meta"]["config"]
    lines += ["", f"On paper, {cfg['explorers']} explorers on {cfg['nodes']} nodes (4 envs "
              "each; shards under half a core each, asked for several batches per take call "
              "when one leaves no room; MB/s per node):", "",
              "| regime | latency ms | transitions/s | updates/s needed | one learner | x "
              "learners | shards | batches per take | weights | replay | learner in | bound |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {p['regime']} (RR {p['replay_ratio']:g}, B {p['batch_size']}) | "
              f"{p['latency_ms']:g} | {p['explorer_transitions_s']:,} | "
              f"{p['updates_s_needed']:,} | {p['one_learner_updates_s']:,} | {p['learners']} | "
              f"{p['shards'] or '–'} | {p['batches_per_take'] if p['shards'] else '–'} | "
              f"{p['weights_mb_s_per_node']} | "
              f"{p['replay_mb_s_per_node']} | "
              f"{p['learner_in_mb_s']} | {p['bound']} |" for p in r["paper"]]
    return "\n".join(lines)


def main() -> None:
    args = parser(__doc__, "model", "short measurements, one rung run").parse_args()
    recording = Recording()
    result = bench_model(args.quick)
    for name, t in result["targets"].items():
        print(f"target {name}: {t['value']} of {t['target']}: " + ("met" if t["met"] else
                                                                    "MISSED"))
    print(section(recording.write(result, args.json)))


if __name__ == "__main__":
    main()
