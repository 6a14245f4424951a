"""The latency ladder of notebooks 02 and 05 (`course_lib.teaching.ladder`): Amdahl's bound
by hand, and a tiny real run. Nothing here compares a time with a target: the one comparison
of rates is at 20 ms, where the waits, not the CPU, set the pace, so it holds on a busy machine
too."""

import math
from types import SimpleNamespace

import matplotlib
import matplotlib.pyplot as plt
import pytest
import torch

import course_lib.teaching.ladder as ladder_module
from course_lib.teaching.ladder import (
    VARIANTS,
    Ladder,
    LadderConfig,
    _measure,
    amdahl_bound,
    measure_ladder,
)

matplotlib.use("Agg")


@pytest.mark.parametrize(("variant", "latency_ms", "expected"), [
    ("one", 2.0, 400.0),          # 1000 / (0.5 + 2)
    ("one", 0.0, 2000.0),         # 1000 / 0.5
    ("batch", 2.0, 1000.0),       # 4 * 1000 / (4 * 0.5 + 2): one wait for four envs
    ("batch", 0.0, 2000.0),       # the CPU work does not overlap: as one env
    ("workers", 2.0, 1600.0),     # 4 * 1000 / (0.5 + 2): the waits limit, cores do not
    ("workers", 0.0, 4000.0),     # min(4 * 2000, 2 cores * 2000): the cores limit
])
def test_amdahl_bound_by_hand(variant, latency_ms, expected):
    assert amdahl_bound(variant, latency_ms, step_ms=0.5, n=4, cores=2) == pytest.approx(expected)


def test_the_bound_of_workers_with_several_envs_each_overlaps_their_waits():
    """4 explorers x 4 envs at 2 ms: each waits once per batch of 4, so 16 / (4 * 0.5 + 2) ms
    = 4,000 steps/s, which 2 cores (4,000 at 0.5 ms a step) allow; one env each: 1,600."""
    assert amdahl_bound("workers", 2.0, 0.5, n=4, cores=2, envs_per_worker=4) == 4000.0
    assert amdahl_bound("workers", 20.0, 0.5, n=4, cores=2, envs_per_worker=4) == \
        pytest.approx(16_000 / 22)


def test_amdahl_bound_names_an_unknown_variant():
    with pytest.raises(ValueError, match="unknown variant 'gpu'; known: one, batch, workers"):
        amdahl_bound("gpu", 0.0, 0.5, 4, 2)


def test_a_negative_latency_is_refused_in_one_line():
    with pytest.raises(ValueError, match="'latencies_ms' must be a non-empty list of values"):
        measure_ladder(LadderConfig().updated({"latencies_ms": [0.0, -1.0]}))


def test_the_quick_preset_is_smaller_than_the_full_one():
    quick, full = LadderConfig.preset(quick=True), LadderConfig.preset(quick=False)
    assert quick.seconds < full.seconds and len(quick.latencies_ms) <= len(full.latencies_ms)


@pytest.mark.parametrize("explorers", [False, True], ids=["actors", "apex-explorers"])
def test_a_tiny_ladder_measures_every_variant_and_slow_envs_pay_for_parallelism(
        ray_local, explorers):
    # 0.75 s a point: each run of the three actors at 20 ms then lasts ~0.25 s, against up to
    # ~0.1 s of Ray dispatch when CI's notebooks share the cores (0.2 s once measured 1.48x)
    cfg = LadderConfig().updated({"latencies_ms": [0.0, 20.0], "seconds": 0.75,
                                  "num_workers": 3, "explorers": explorers})
    torch.set_num_threads(2)
    ladder = measure_ladder(cfg)
    assert torch.get_num_threads() == 2, "the notebook's torch threads were left changed"
    assert set(ladder.measured) == set(ladder.bounds) == set(ladder.step_ms) == set(VARIANTS)
    for v in VARIANTS:
        assert len(ladder.measured[v]) == len(ladder.bounds[v]) == 2
        assert all(rate > 0 for rate in ladder.measured[v]) and ladder.step_ms[v] > 0
        k = ladder.envs_per_worker if v == "workers" else 1
        assert ladder.bounds[v] == [pytest.approx(amdahl_bound(v, L, ladder.step_ms[v], 3,
                                                               ladder.cores, k)) for L in (0, 20)]
    # the bound is a best case: one process at 0 ms never beats its own fastest run
    assert all(ladder.measured[v][0] <= ladder.bounds[v][0] * (1 + 1e-9) for v in ("one", "batch"))
    slow = {v: ladder.measured[v][1] for v in VARIANTS}
    # at 20 ms one env manages at most 50 steps/s; three waits that overlap beat it
    assert slow["workers"] > 1.5 * slow["one"] and slow["batch"] > 1.5 * slow["one"]
    assert ladder.labels["workers"] == ("3 Ape-X explorers x 4 envs" if explorers
                                        else "3 actors")
    # the bound is a best case for the explorers too, whose envs wait together per explorer
    assert ladder.measured["workers"][1] <= ladder.bounds["workers"][1] * 1.05
    assert ladder.table().count(" ms | ") == 2


def test_a_fixed_wait_per_run_does_not_pass_for_cpu_time_per_step():
    """An explorer's run ends with a Ray round trip (its last batch stored): here 50 ms a run,
    on top of 0.05 ms of CPU per step. Sized from a 20-step warm-up (as once), every run at
    0 ms was ~100 steps and the step came out at 0.56 ms, which put the bound at 20 ms below
    what the explorers did (CI: 565 steps/s against a bound of 484); sized from the fastest
    run so far, the runs grow until the wait is a small part of them. As for the explorers,
    only the runs of one copy (`alone`) time a step."""
    wait_s, step_s, calls = 0.05, 50e-6, []

    def alone(latency_ms, steps):
        calls.append(steps)
        return steps, wait_s + steps * (step_s + latency_ms / 1000)

    def together(latency_ms, steps):                  # 3 workers, their waits overlapping
        played, seconds = alone(latency_ms, math.ceil(steps / 3))
        return 3 * played, seconds

    cfg = LadderConfig().updated({"latencies_ms": [0.0, 20.0], "seconds": 0.75, "num_workers": 3})
    ladder = Ladder(cfg, 2, {}, {}, {})
    _measure(ladder, "workers", alone, together)
    assert ladder.step_ms["workers"] <= 1.5 * step_s * 1000
    assert calls[1] < calls[2] < calls[3]            # each run sized from the fastest so far
    assert ladder.measured["workers"][1] <= ladder.bounds["workers"][1]


def test_the_plot_draws_a_point_line_and_a_bound_per_variant():
    ladder = Ladder(LadderConfig().updated({"latencies_ms": [0.0, 5.0]}), 2,
                    {v: 0.1 for v in VARIANTS}, {v: [1000.0, 100.0] for v in VARIANTS},
                    {v: [2000.0, 200.0] for v in VARIANTS})
    ax = ladder.plot()
    lines = ax.get_lines()
    assert [line.get_label() for line in lines[:6:2]] == [ladder.labels[v] for v in VARIANTS]
    assert [list(line.get_ydata()) for line in lines[:6]] == [[1000.0, 100.0], [2000.0, 200.0]] * 3
    assert [line.get_color() for line in lines[:2]] == [lines[0].get_color()] * 2   # a pair
    assert lines[1].get_linestyle() == "--"


def _try(n, seconds, reached, quick=False):
    return {"try": n, "num_workers": 2, "num_envs": 4, "send_every": 200, "replay_ratio": 8.0,
            "latency_ms": 2.0, "quick": quick, "predicted_s": 9.5, "reached": reached,
            "seconds": seconds, "env_steps": 30_000}


def test_the_leaderboard_ranks_reached_tries_first_and_marks_a_capped_median(monkeypatch):
    """The capstone's table: tries that reached 475 first, fastest first; beside them the
    committed ladder, where a median whose runs stopped at the cap is a lower bound (≥)."""
    rung = {"dqn": {"median_seconds": 104.0, "median_seconds_exact": False},
            "apex-2": {"median_seconds": 19.6, "median_seconds_exact": True}}
    monkeypatch.setattr(ladder_module, "committed_rung", lambda latency_ms: rung)
    text = ladder_module.leaderboard([_try(1, 30.0, False), _try(2, 25.0, True),
                                      _try(3, 12.0, False, quick=True), _try(4, 21.0, True)])
    rows = [line.split()[0] for line in text.splitlines()[1:5]]
    assert rows == ["4", "2", "3", "1"]
    assert text.splitlines()[3].endswith("quick run") and text.splitlines()[4].endswith("no")
    assert "apex-2 20 s, dqn ≥104 s" in text
    labels = [line.get_label() for line in plt.gca().get_lines()]
    assert "ladder dqn ≥" in labels and "ladder apex-2" in labels


def test_a_try_is_kept_with_its_choices_and_how_it_ended(tmp_path):
    cfg = SimpleNamespace(num_workers=3, num_envs=4, send_every=200, replay_ratio=8.0,
                          env_latency_ms=2.0, target_return=475.0)
    result = SimpleNamespace(last={"time_s": 18.5, "env_steps": 41_000}, reached=True)
    path = tmp_path / "results" / "tries.json"
    ladder_module.record_try(cfg, result, {"predicted_s": 9.0}, path)
    tries = ladder_module.record_try(cfg, result, {"predicted_s": 9.0}, path)
    assert [t["try"] for t in tries] == [1, 2]
    assert tries[0] == {"num_workers": 3, "num_envs": 4, "send_every": 200, "replay_ratio": 8.0,
                        "try": 1, "latency_ms": 2.0, "quick": False, "predicted_s": 9.0,
                        "reached": True, "seconds": 18.5, "env_steps": 41_000}
