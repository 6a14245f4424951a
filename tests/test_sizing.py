"""The scaling model (`course_lib.sizing`): the one Amdahl bound, the explorer count chosen
from the costs (by hand, and against the committed ladder's best counts), and the start-up
measurement of the costs. Nothing here compares a time with a target."""

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from course_lib.sizing import (
    StepCosts,
    amdahl_ms,
    choose_explorers,
    explorer_rate,
    learner_capacity,
    measure_costs,
    throughput,
)

ROOT = Path(__file__).resolve().parents[1]


def test_amdahl_by_hand():
    # one process: everything in turn; N envs batched: one wait for all of them
    assert amdahl_ms(0.2, 2.0, 0.3) == pytest.approx(2.5)
    assert amdahl_ms(0.2, 2.0, 0.3, envs=4) == pytest.approx(1.0)
    # 4 explorers of 4 envs: the waits overlap (0.7 / 4), the learner does not (0.3), the
    # cores share the CPU work (0.5 / 2): the learner binds
    assert amdahl_ms(0.2, 2.0, 0.3, envs=4, explorers=4, cores=2) == pytest.approx(0.3)
    assert amdahl_ms(0.2, 2.0, 0.3, envs=4, explorers=4, cores=2, efficiency=0.5) == \
        pytest.approx(0.6)
    assert amdahl_ms(0.2, 20.0, 0.0, envs=1, explorers=4, cores=2) == pytest.approx(5.05)
    assert amdahl_ms(0.2, 0.0, 0.3, envs=1, explorers=8, cores=1) == pytest.approx(0.5)


def test_the_model_by_hand():
    """c_x 0.1 ms, L 2 ms, 4 envs: r_e = 4 / 2.4 ms = 1,667/s. c_u 0.8 + c_r 0.2 ms: U =
    1,000/s, and at RR 16, B 64 (u = 1/4) the learner takes 4,000 transitions/s; 2 cores
    run 2 / (0.1 + 0.25) ms = 5,714/s. N* = 4,000 / 1,667 = 2.4: 3 explorers."""
    costs = StepCosts(act_ms=0.1, update_ms=0.8, replay_ms=0.2, latency_ms=2.0)
    assert explorer_rate(costs, 4) == pytest.approx(1000 * 4 / 2.4)
    assert learner_capacity(costs) == pytest.approx(1000.0)
    choice = choose_explorers(costs, replay_ratio=16, batch_size=64, cores=2, envs=4)
    assert (choice.count, choice.bound) == (3, "learner")
    assert choice.n_star == pytest.approx(2.4)
    assert choice.transitions_s == pytest.approx(4000.0) and choice.updates_s == \
        pytest.approx(1000.0)
    assert choice.reason.startswith("3 explorer(s): each explorer gives 1,667 transitions/s")
    assert "the learner takes 4,000/s (1,000 updates/s at replay ratio 16, batch 64)" in \
        choice.reason
    # throughput grows with the explorers until the learner is busy, then stays
    rates = [throughput(costs, n, 4, 0.25, 2) for n in (1, 2, 3, 8)]
    assert rates == pytest.approx([1000 * 4 / 2.4, 2000 * 4 / 2.4, 4000.0, 4000.0])
    # a learner half as efficient inside the system: half the explorers
    slow = choose_explorers(StepCosts(0.1, 0.8, 0.2, 2.0, efficiency=0.5), 16, 64, 2, 4)
    assert (slow.count, slow.bound) == (2, "learner")        # N* = 1.2, 1.14 within 5%: 2


def test_the_cores_or_the_limit_can_bind_instead():
    """c_x 1 ms, L 10 ms, one env: r_e = 1,000 / 11 = 90.9/s; the learner would take 4,000/s,
    but 2 cores run 2,000 / 1.25 = 1,600/s: 0.95 x 1,600 / 90.9 = 16.7, so 17 explorers."""
    costs = StepCosts(act_ms=1.0, update_ms=1.0, latency_ms=10.0)
    choice = choose_explorers(costs, 16, 64, cores=2, envs=1)
    assert (choice.count, choice.bound) == (17, "cores")
    assert "the 2 cores run 1,600/s at most" in choice.reason
    capped = choose_explorers(costs, 16, 64, cores=2, envs=1, max_explorers=4)
    assert (capped.count, capped.bound) == (4, "limit")
    assert capped.transitions_s == pytest.approx(4 * 1000 / 11)
    # the replay ratio decides: at RR 1 (u = 1/64) the learner takes 64,000/s, the cores far less
    assert choose_explorers(costs, 1, 64, cores=2).bound == "cores"


def test_a_count_within_slack_of_the_best_is_enough():
    """4 envs waiting 2.04 ms, no CPU: r_e = 4 / 2.04 ms = 1,961/s against the learner's
    4,000/s, N* = 2.04: two explorers give 98% of it, a third is not started."""
    costs = StepCosts(act_ms=0.0, update_ms=1.0, latency_ms=2.04)
    choice = choose_explorers(costs, 16, 64, cores=64, envs=4)
    assert choice.n_star == pytest.approx(2.04)
    assert choice.count == 2 and choice.transitions_s == pytest.approx(0.98 * 4000, rel=1e-3)


@pytest.mark.parametrize("bad", [{"act_ms": -1.0}, {"efficiency": 0.0}, {"efficiency": 1.5},
                                 {"latency_ms": float("nan")}])
def test_bad_costs_are_refused_in_one_line(bad):
    with pytest.raises(ValueError, match="must be"):
        StepCosts(**{"act_ms": 0.1, "update_ms": 1.0, **bad})
    with pytest.raises(ValueError, match="replay_ratio > 0"):
        choose_explorers(StepCosts(0.1, 1.0), replay_ratio=0, batch_size=64, cores=2)


def test_the_model_gives_the_counts_bench_model_recorded_from_the_ladders_costs():
    """From the committed ladder's own bare costs (act + env step, update), its replay ratio
    and batch (the CLI default's), its 4 envs per explorer and its 2 cores, the library's
    choice is the "model, ladder's costs" column bench/model.py recorded. How those counts
    compare with the ladder's fastest is a reading of measured results, checked by the claim
    `results-model-count-holds-rate-bound` (bench/RESULTS.md's model section), not here."""
    from course_lib.apex import ApexConfig

    r = json.loads((ROOT / "bench" / "results" / "scaling.json").read_text())
    model = json.loads((ROOT / "bench" / "results" / "model.json").read_text())
    c, cfg = r["costs"], ApexConfig()
    costs = StepCosts(act_ms=c["act_ms"], update_ms=c["update_ms"])
    assert c["updates_per_transition"] == cfg.replay_ratio / cfg.batch_size
    recorded = {row["latency_ms"]: row["model_count_ladder_costs"] for row in model["ladder"]}
    chosen = {latency: choose_explorers(costs.at(latency), cfg.replay_ratio, cfg.batch_size,
                                        r["meta"]["config"]["cores"],
                                        c["envs_per_explorer"]).count for latency in recorded}
    assert chosen == recorded and len(recorded) == len(r["meta"]["config"]["latencies_ms"])
    assert list(chosen.values()) == sorted(chosen.values())   # a slower env, more explorers


def test_the_start_up_measurement_reads_each_cost_and_the_latency_the_envs_wait():
    from course_lib.apex import ApexConfig

    torch.set_num_threads(2)
    cfg = ApexConfig().updated({"buffer_size": 5_000, "env_latency_ms": 20.0})
    costs = measure_costs(cfg, seconds=0.3)
    assert torch.get_num_threads() == 2, "the caller's torch threads were left changed"
    assert costs.act_ms > 0 and costs.update_ms > 0 and costs.replay_ms > 0
    assert costs.latency_ms >= 19.9             # a sleep of 20 ms per step of the 4 envs
    fast = measure_costs(cfg.updated({"env_latency_ms": 0.0}), seconds=0.3)
    assert fast.latency_ms < costs.latency_ms / 4
    choice = choose_explorers(costs, cfg.replay_ratio, cfg.batch_size, 2, cfg.num_envs)
    assert choice.count >= 1 and choice.reason.startswith(f"{choice.count} explorer(s)")


#: costs where the learner binds: r_e = 4 / (2 + 4 x 0.05) ms = 1,818/s, U = 1 / 1.2 ms = 833/s,
#: u = 16 / 64, so the learner takes 3,333/s and N* = 1.83: 2 explorers (on 1 core or more)
LEARNER_BOUND = StepCosts(act_ms=0.05, update_ms=1.0, replay_ms=0.2, latency_ms=2.0)


def test_auto_sets_the_models_count_from_the_costs_it_measures(monkeypatch):
    from course_lib import sizing
    from course_lib.apex import ApexConfig

    measured = []
    monkeypatch.setattr(sizing, "measure_costs",
                        lambda cfg, seconds: measured.append(cfg) or LEARNER_BOUND)
    cfg = ApexConfig().updated({"env_latency_ms": 2.0, "num_workers": 7})
    auto, choice = sizing.auto_explorers(cfg, cores=2)
    assert measured == [cfg]                     # measured as configured: its envs and latency
    assert choice.count == auto.num_workers == 2 and choice.bound == "learner"
    assert auto.updated({"num_workers": 7}) == cfg   # nothing else changed
    assert sizing.auto_explorers(cfg.updated({"replay_ratio": 4.0}), cores=2)[0].num_workers == 7


def test_the_reason_prints_a_tiny_wait_as_a_number_a_reader_takes_in():
    costs = dataclasses.replace(LEARNER_BOUND, latency_ms=9.99993e-05)
    assert "0.0001 ms wait per step of 4 envs" in choose_explorers(costs, 16, 64, 2, 4).reason
