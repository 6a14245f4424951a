"""The bench scripts without long runs or Ray: RESULTS.md and figures from canned JSON, the RLlib
race's contenders, and the SAC settings loop on a few Pendulum steps."""

import dataclasses
import importlib
import math
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bench_module(name: str):
    """bench/<name>.py, imported as a notebook imports it."""
    return importlib.import_module(f"bench.{name}")


run_all = _bench_module("run_all")
benchreport = _bench_module("benchreport")


def _meta(config=None, load=(0.3, 1.2), **more) -> dict:
    """A result's meta, as bench/benchlib.py records it."""
    return {"commit": "0123456789" + "a" * 30, "uncommitted": [], "config": config or {},
            "versions": {"python": "3.11.7", "ray": "2.60.0"},
            "machine": {"cores": 2, "cpu": "Test CPU", "memory_gb": 24.0, "os": "Linux"},
            "load_before": [load[0]], "load_after": [load[1]],
            "started": "2026-01-01 12:00:00 UTC", "finished": "2026-01-01 12:01:00 UTC",
            "command": "python -m bench.x", **more}


LOAD = _meta()
RESULTS = {
    "replay": {"meta": LOAD, "buffers": [{"operation": "sample+update (512)", "ours_us": 460.0,
                                            "cpprb_us": 820.0, "ours/cpprb": 0.56}],
               "ray_ingest": {"explorers": 2, "batch": 50, "transitions_per_s": 68_000.0},
               "targets": {"sample+update ours/cpprb": {"value": 0.56, "target": 1.0,
                                                        "met": True}}},
    "apex": {"missing": "bench/apex.py is not in this checkout"},
    "sac": {"error": "exit code 1: boom"},
    "ray_overhead": {"meta": LOAD, "targets": {},
                     "rows": [{"operation": "task, sync", "ray_us": 2_600.0, "ray_per_s": 385.0,
                               "reference_us": 0.1, "ray/reference": 26_000.0}]},
    "rllib": {"meta": LOAD, "runs": [
        {"task": "CartPole-v1", "side": side, "name": name, "seed": 0, "reached": side == "ours",
         "curve": [[10.0, 1_000, 20.0], [50.0, 9_000, float("nan")], [90.0, 20_000, 480.0]]}
        for side, name in (("ours", "course_lib Ape-X"), ("rllib", "RLlib DQN"))],
        "summary": [{"task": "CartPole-v1", "goal": 475.0, "ours_name": "course_lib Ape-X",
                     "ours_reached": "1/1", "ours_median_s": 90.0, "ours_median_env_steps": 2e4,
                     "rllib_name": "RLlib DQN", "rllib_reached": "0/1", "rllib_median_s": 900.0,
                     "rllib_median_env_steps": 8e4, "time_ratio": 0.1,
                     "ratio_is_upper_bound": True,
                     "ratio_text": "≤ 0.1 (RLlib missed the goal)"}],
        "targets": {"CartPole-v1 time ours/RLlib": {"value": 0.1, "target": 0.5, "met": True,
                                                    "note": "RLlib did not reach the goal"}}},
}


def test_report_has_every_section_targets_and_figures(tmp_path):
    out = tmp_path / "RESULTS.md"
    text = run_all.write_report(RESULTS, quick=False, out=out)
    assert out.read_text() == text
    assert "2 cores (Test CPU)" in text and "started 2026-01-01" in text and "ray 2.60.0" in text
    assert "commit 0123456789;" in text
    assert "replay: sample+update ours/cpprb | 0.56 | 1.00 | met" in text
    assert "Not run: bench/apex.py is not in this checkout." in text
    assert "exit code 1: boom" in text
    assert "≤ 0.1 (RLlib missed the goal)" in text
    assert "load average before/after: 0.3 / 1.2" in text
    assert (tmp_path / "figures" / "rllib_cartpole.png").stat().st_size > 1_000
    assert (tmp_path / "figures" / "ray_overhead.png").exists()
    assert "![rllib_cartpole](figures/rllib_cartpole.png)" in text
    # the figure sits in its benchmark's block
    rllib = text.split(benchreport.BEGIN.format("rllib"))[1]
    assert "![rllib_cartpole]" in rllib.split(benchreport.END.format("rllib"))[0]


def test_a_rewrite_keeps_the_reading_around_the_generated_blocks(tmp_path):
    """The report rewrites its blocks only: a person's reading between them stays, and a
    block new to the file is added under its title."""
    out = tmp_path / "RESULTS.md"
    run_all.write_report({"replay": RESULTS["replay"]}, quick=False, out=out)
    end = benchreport.END.format("replay")
    out.write_text(out.read_text().replace(end, end + "\n\n**Reading.** Ours samples faster."))
    changed = {**RESULTS["replay"], "buffers": [{**RESULTS["replay"]["buffers"][0],
                                                 "ours_us": 123.0}]}
    text = run_all.write_report({"replay": changed, "ray_overhead": RESULTS["ray_overhead"]},
                                quick=False, out=out)
    assert text.count("**Reading.** Ours samples faster.") == 1
    assert "| 123 |" in text and "| 460 |" not in text
    assert text.index(end) < text.index("**Reading.**") < text.index(
        "## What Ray costs") < text.index(benchreport.BEGIN.format("ray_overhead"))
    assert text.count(benchreport.BEGIN.format("replay")) == 1


def test_quick_report_says_so(tmp_path):
    text = run_all.write_report({"apex": RESULTS["apex"], "replay": RESULTS["replay"]}, quick=True,
                                out=tmp_path / "R.md")
    assert text.count("QUICK SMOKE RUN") == 1 and "No targets checked" in text


def test_each_side_of_the_rllib_benchmark_runs_its_own_implementation():
    """Both sides of Pendulum-v1 are "sac": the side, not the name, picks whose code runs."""
    from course_lib.apex import ApexConfig, ApexTrainer
    from course_lib.sac import SACConfig, SACTrainer
    from course_lib.teaching.rllib_compare import RLlibConfig, train_rllib

    bench = _bench_module("rllib")
    seen = {}
    for task, spec in bench.TASKS.items():
        ours_kind, theirs_kind = spec["ours"][1], spec["rllib"]
        ours, train_ours = bench.contender_config("ours", ours_kind, task, 3, quick=False)
        theirs, train_theirs = bench.contender_config("rllib", theirs_kind, task, 3, quick=False)
        assert isinstance(theirs, RLlibConfig) and train_theirs is train_rllib
        assert theirs.algo == theirs_kind and theirs.env_id == task
        assert (ours.env_id, ours.seed, theirs.seed) == (task, 3, 3)
        assert ours.target_return == theirs.target_return == spec["goal"]
        assert ours.max_env_steps == theirs.max_env_steps == spec["max_env_steps"]
        seen[task] = (type(ours), train_ours)
    assert seen == {"CartPole-v1": (ApexConfig, ApexTrainer.train),
                    "Pendulum-v1": (SACConfig, SACTrainer.train)}


def test_sac_settings_counts_one_update_per_env_step_after_learning_starts():
    from course_lib.sac import SACConfig

    bench = _bench_module("sac_settings")
    starts = SACConfig().learning_starts
    run = bench.updates_to_goal(bench.SETTINGS["workbook"], seed=0, goal=None,
                                max_env_steps=starts + 60, eval_every=30)
    assert run == {"seed": 0, "reached": False, "updates": 61, "env_steps": starts + 60,
                   "eval_return": run["eval_return"]}
    assert -2_000 < run["eval_return"] < 0           # tested: ten real Pendulum episodes
    reached = bench.updates_to_goal(bench.SETTINGS["workbook"], seed=0, goal=-1e9,
                                    max_env_steps=starts + 60, eval_every=30)
    assert reached["reached"] and reached["updates"] == 30 and reached["env_steps"] == starts + 29


def test_replay_bench_checks_each_operations_ratio_against_cpprb():
    bench = _bench_module("replay")
    rows = [{"operation": op, "ours/cpprb": ratio, "ours_transitions_per_s": None}
            for op, ratio in (("add (50)", 0.9), ("sample (512)", 0.5), ("update (512)", 1.2),
                              ("sample+update (512)", 0.8))]
    targets = bench.check_targets(rows, {"transitions_per_s": 30_000.0})
    assert {name: (t["value"], t["met"]) for name, t in targets.items()} == {
        "add ours/cpprb": (0.9, True), "sample ours/cpprb": (0.5, True),
        "update ours/cpprb": (1.2, False), "ray ingest transitions/s": (30_000.0, True)}


def test_is_weights_bench_trains_with_each_variants_buffer_and_counts_steps_to_the_goal():
    from course_lib import dqn
    from course_lib.dqn import trainer as dqn_trainer
    from course_lib.replay import PrioritizedReplayBuffer

    bench = _bench_module("is_weights")
    history = [{"env_steps": steps, "eval_return": ret}
               for steps, ret in ((1_000, 20.0), (2_000, 480.0), (3_000, 300.0))]
    assert bench.steps_to_goal(history, 475.0) == 2_000
    assert bench.steps_to_goal(history, 500.0) == 3_000           # never reached: the budget
    tiny = dqn.DQNConfig(max_env_steps=300, target_return=None, learning_starts=100,
                         steps_per_iteration=150, eval_episodes=1, batch_size=32)
    runs = [bench.run_variant(name, 0, tiny) for name in ("buffer-min eps=1e-6",
                                                           "batch-max eps=1e-6")]
    assert dqn_trainer.PrioritizedReplayBuffer is PrioritizedReplayBuffer   # the swap is undone
    assert [run["env_steps"] for run in runs] == [300, 300]
    # the same seed and data: only the normalisation differs, and dividing by the batch's own
    # largest weight gives larger weights than dividing by the buffer's
    assert 0 < runs[0]["mean_weight"] < runs[1]["mean_weight"] <= 1
    rows = bench.summarise(runs)
    assert [(row["variant"], row["seeds"], row["median_env_steps"]) for row in rows] == [
        ("buffer-min eps=1e-6", 1, 300.0), ("batch-max eps=1e-6", 1, 300.0)]


def test_is_weights_buffer_variant_divides_by_the_largest_weight_in_the_buffer():
    """The variant the library no longer keeps: w_i = (N P(i))^-beta over the largest such
    weight among every stored transition, by hand."""
    from course_lib.replay import transition_spec

    bench = _bench_module("is_weights")
    p, alpha, beta, eps = np.array([1.0, 2.0, 3.0, 4.0, 0.0]), 0.6, 0.4, 1e-6
    buffer = bench.buffer_class(eps, "buffer")(5, transition_spec(obs_shape=(4,)), alpha=alpha,
                                               seed=0)
    buffer.add({"obs": np.zeros((5, 4), np.float32), "action": np.zeros(5, np.int64),
                "reward": np.zeros(5, np.float32), "next_obs": np.zeros((5, 4), np.float32),
                "terminated": np.zeros(5, bool)}, p)
    q = (p + eps) ** alpha
    w = (5 * q / q.sum()) ** -beta
    w /= w.max()
    for _ in range(5):
        batch = buffer.sample(2, beta=beta)          # rarely holds the smallest priority
        np.testing.assert_allclose(batch["weights"], w[batch["indices"]], rtol=1e-6)
    assert buffer.weight_count == 10


# ---------------------------------------------------------------------------------------------
# SB3 against ours, the cost of going distributed, the soak (issue 17)
# ---------------------------------------------------------------------------------------------

def _soak_samples(minutes: int, mb_per_min: float, stall_at: int | None = None) -> list[dict]:
    rng = np.random.default_rng(0)
    samples = []
    for k in range(minutes * 6 + 1):
        t = 10.0 * k
        steps = 1_000 * min(k, stall_at if stall_at is not None else k)
        samples.append({"t_s": t, "env_steps": steps, "inserted": steps,
                        "learner_updates": 250 * min(k, stall_at or k),
                        **{key: 300 + mb_per_min * t / 60 + rng.normal(0, 0.5)
                           for key in ("driver_rss_mb", "learner_rss_mb", "object_store_mb")}})
    return samples


def test_soak_verdict_flat_leaking_stalled_and_too_short():
    soak = _bench_module("soak")
    flat = soak.verdict(_soak_samples(10, 0.0), buffer_size=30_000)
    assert flat["no_deadlock"] and flat["flat"] and flat["filled_at_s"] == 300.0
    assert flat["windows"] == 60 and flat["samples_after_fill"] == 31
    leaking = soak.verdict(_soak_samples(10, 5.0), buffer_size=30_000)
    assert leaking["flat"] is False
    assert all(4.5 < v < 5.5 for v in leaking["slopes_mb_per_min"].values())
    stalled = soak.verdict(_soak_samples(10, 0.0, stall_at=30), buffer_size=20_000)
    assert not stalled["no_deadlock"]
    assert stalled["windows_without_progress_end_s"][0] == 310.0
    waiting = _soak_samples(10, 0.0)
    waiting[12]["env_steps"] = waiting[11]["env_steps"]         # the explorers waited a window
    waited = soak.verdict(waiting, buffer_size=30_000)
    assert waited["no_deadlock"] and waited["explorers_waited_end_s"] == [120.0]
    short = soak.verdict(_soak_samples(1, 0.0), buffer_size=5_000)
    assert short["flat"] is None and short["samples_after_fill"] == 2


def test_sb3_evaluation_follows_our_protocol_and_stop_rule(monkeypatch):
    from types import SimpleNamespace

    from course_lib.trainer import derive_seed

    sb3 = _bench_module("sb3")
    cfg = sb3.run_config("CartPole-v1", seed=4, quick=False)
    assert (cfg.eval_episodes, cfg.confirm_episodes, cfg.target_return) == (10, 20, 475.0)

    def balancing(obs, deterministic):       # scores 500 on every CartPole episode
        assert deterministic
        return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64), None

    clock = sb3.OurEvaluation(cfg, every_steps=1_000, start=time.perf_counter())
    clock.model = SimpleNamespace(predict=balancing, num_timesteps=31_000, _n_updates=3_000)
    assert clock.evaluate_snapshot() is False                  # goal met and confirmed: stop
    row = clock.rows[-1]
    # scored on the confirming episodes alone, 20 and 20 more as all 20 scored 500
    # (trainer.evaluation_request), their bound reaching the goal (scoring.evaluation_columns)
    assert (clock.stopped_by, row["eval_episodes"], row["eval_return"]) == ("eval_return", 40,
                                                                            500.0)
    assert (row["eval_lower"], row["goal_tests"], clock.goal_tests) == (500.0, 1, 1)
    assert clock.evaluations == 3 and row["env_steps"] == 31_000 and row["wall_s"] > 0

    pushes_left = SimpleNamespace(predict=lambda obs, deterministic: (np.zeros(len(obs), int),
                                                                      None),
                                  num_timesteps=1_000, _n_updates=0)
    clock = sb3.OurEvaluation(cfg, every_steps=1_000, start=time.perf_counter())
    clock.model = pushes_left
    assert clock.evaluate_snapshot() is True                   # 10 episodes, far below: go on
    assert clock.rows[-1]["eval_episodes"] == 10 and clock.stopped_by is None
    # fresh seeds each evaluation, from our one seed formula
    seen = []
    monkeypatch.setattr(sb3, "evaluate_policy", lambda act, env_id, episodes, seed:
                        seen.append(seed) or np.zeros(episodes))
    clock.evaluate_snapshot()
    assert seen == [derive_seed(4, "evaluation", 2)]


def test_sb3_evaluates_at_fixed_env_steps_so_a_seeds_run_repeats():
    """Evaluations fall on multiples of the task's cadence, not on the clock, and SB3's
    training does not depend on when it is evaluated: the same seed run twice gives the same
    evaluations at the same env steps (2,000 env steps, learning from 500, with fewer gradient
    steps and a smaller net than the zoo's: the same code path, a fraction of the time; no
    time budget, which is the one thing that would make them differ)."""
    sb3 = _bench_module("sb3")
    every = sb3.TASKS["CartPole-v1"]["eval_every_steps"]
    budget = {"max_env_steps": 2 * every, "max_time_s": None}
    smaller = {"learning_starts": 500, "gradient_steps": 8, "policy_kwargs": {"net_arch": [64, 64]}}
    runs = [sb3.run_once("CartPole-v1", seed=1, quick=True, budget=budget, zoo_changes=smaller)
            for _ in range(2)]
    curves = [[(steps, ret) for _, steps, ret in r["curve"]] for r in runs]
    assert [steps for steps, _ in curves[0]] == [every, 2 * every]
    assert curves[0] == curves[1] and runs[0]["learner_updates"] == runs[1]["learner_updates"] > 0
    assert runs[0]["stopped_by"] == "env_steps"


def test_overhead_steady_rate_skips_start_up_and_learning_starts():
    overhead = _bench_module("overhead")
    samples = [{"t": 3.0 * k, "updates": max(0, 300 * (k - 2)), "env_steps": 1_000 * k,
                "owed": 100} for k in range(1, 12)]
    # updates first move at k=3; the window starts one sample later: 300 updates per 3 s
    assert overhead.steady_rate(samples, "updates") == 100.0
    assert overhead.steady_rate(samples, "env_steps") == 1_000 / 3
    assert math.isnan(overhead.steady_rate(samples[:3], "updates"))   # no window yet
    window = overhead.learner_window(samples, chunk=50)
    assert window["saturated"] == 1.0 and window["owed_updates_s"] == 100.0


SB3_RESULTS = {
    "apex": {"meta": LOAD, "summary": [
        {"variant": "dqn", "seeds": 3, "reached": 3, "median_env_steps": 5e4,
         "median_seconds": 50.0, "seconds_vs_dqn": 1.0},
        {"variant": "apex-2", "seeds": 3, "reached": 3, "median_env_steps": 2e4,
         "median_seconds": 20.0, "seconds_vs_dqn": 0.4},
        {"variant": "apex-4", "seeds": 3, "reached": 3, "median_env_steps": 4e4,
         "median_seconds": 40.0, "seconds_vs_dqn": 0.8}]},
    "sac": {"meta": _meta(),
            "pendulum": {"runs": [{"reached": True, "time_s": t, "env_steps": 2_000}
                                  for t in (10.0, 12.0, 30.0)]}},
    "sb3": {"meta": _meta({"rl_zoo3": "2.9.2"}, versions={"stable-baselines3": "2.9.2"}),
            "targets": {},
            "summary": [{"task": "CartPole-v1", "algo": "DQN", "goal": 475.0, "seeds": 3,
                         "reached": 3, "median_env_steps": 31_000, "median_time_s": 100.0,
                         "median_eval_s": 4.0},
                        {"task": "Pendulum-v1", "algo": "SAC", "goal": -200.0, "seeds": 3,
                         "reached": 2, "median_env_steps": 2_800, "median_time_s": 120.0,
                         "median_eval_s": 9.0}]},
    "overhead": {"apex": {"learner": {"bare_updates_s": 300.0, "distributed_updates_s": 210.0,
                                      "ratio": 0.7},
                          "explorers": [{"n": n, "bare_steps_s": 3_000.0 * min(n, 2),
                                         "distributed_steps_s": 2_000.0 * min(n, 2),
                                         "ratio": 0.667} for n in (1, 2, 4)]},
                 "sac": {"learner": {"bare_updates_s": 100.0, "distributed_updates_s": 90.0,
                                     "ratio": 0.9}},
                 "meta": _meta({"quick": False}, load=(0.2, 1.5)),
                 "targets": {"apex learner distributed/bare": {"value": 0.7, "target": 0.8,
                                                               "met": False}}},
    "soak": {"meta": _meta({"quick": False, "minutes": 10, "num_workers": 8,
                            "buffer_size": 100_000, "sample_every_s": 10.0}, load=(0.1, 2.0)),
             "stopped_by": "time_s", "samples": _soak_samples(10, 0.0),
             "verdict": {"windows": 60, "windows_without_progress_end_s": [],
                         "no_deadlock": True, "filled_at_s": 1_000.0, "samples_after_fill": 51,
                         "flat_mb_per_min": 2.0, "flat": True,
                         "slopes_mb_per_min": {"driver_rss_mb": 0.1}},
             "targets": {}},
}


def test_report_compares_ours_with_sb3_and_draws_the_overhead_and_soak(tmp_path):
    text = run_all.write_report(SB3_RESULTS, quick=False, out=tmp_path / "R.md")
    # CartPole: Ape-X 4 explorers (the CLI default) is the target, 2 explorers is shown too
    assert ("sb3: CartPole-v1 time ours/SB3 (Ape-X, 4 explorers (CLI default)) | 0.40 | 0.50 "
            "| met" in text)
    assert "| Ape-X, 2 explorers | 3/3 | 20.00 |" in text
    # Pendulum: SAC's median 12 s against 120 s, but SB3 missed a seed: not counted as met
    assert "sb3: Pendulum-v1 time ours/SB3 (SAC, 2 workers (CLI default)) | 0.10 | 0.50 | " \
           "MISSED | a seed missed the goal on one side" in text
    assert "overhead: apex learner distributed/bare | 0.70 | 0.80 | MISSED" in text
    assert "| 4 explorer(s) (env steps/s) | 6,000 | 4,000 | 0.67 |" in text
    assert "| 10-s windows with progress | 60 of 60 |" in text
    assert "load average before/after: 0.2 / 1.5" in text
    for figure in ("overhead", "soak"):
        assert (tmp_path / "figures" / f"{figure}.png").stat().st_size > 1_000
        assert f"![{figure}](figures/{figure}.png)" in text


DIAGNOSTICS = {
    "apex_learner": {"updates_s": 210.0, "owed_updates_s": 215.0, "saturated": 1.0,
                     "explorers": 4},
    "apex_learner_explorers_paused": {"updates_s": 150.0, "owed_updates_s": 0.0,
                                      "saturated": 1.0},
    "explorer_step_costs": {"env_and_action_us": 90.0, "priorities_us": 10.0},
    "evaluation_at_goal": {"10_episodes_s": 0.1, "30_episodes_s": 0.25, "mean_return": 500.0}}


def test_overhead_diagnostics_are_tabled_not_read_out(tmp_path):
    """The figures behind the learner's rate are a table; the report writes no reading."""
    results = {"overhead": {**SB3_RESULTS["overhead"], "diagnostics": DIAGNOSTICS}}
    text = run_all.write_report(results, quick=False, out=tmp_path / "R.md")
    # 150 of 300 bare updates/s with the explorers paused
    assert "| learner rate with the explorers paused / bare loop | 50% |" in text
    assert "| iterations that ended with work waiting" in text and "| 100% |" in text
    assert "| initial priorities / explorer step | 10% |" in text
    assert "| evaluation at the goal, 10 + 20 episodes, s | 0.25 |" in text
    assert "Reading" not in text and "bottleneck (it had work" not in text


def test_overhead_gives_the_bare_loops_before_and_after_the_systems(tmp_path):
    """The bare learner loops run again after the systems; the report gives both and says the
    table's bare column is their mean (a learner's share is read against it)."""
    drift = {"apex": {"before_updates_s": 400.0, "after_updates_s": 440.0,
                      "after_over_before": 1.1},
             "sac": {"before_updates_s": 100.0, "after_updates_s": 90.0, "after_over_before": 0.9}}
    results = {"overhead": {**SB3_RESULTS["overhead"],
                            "diagnostics": {**DIAGNOSTICS, "bare_learner_drift": drift}}}
    text = run_all.write_report(results, quick=False, out=tmp_path / "R.md")
    assert ("their rows above are the mean of the two: apex 400 before, 440 after (after / "
            "before 1.10); sac 100 before, 90 after (after / before 0.90).") in text
    plain = run_all.write_report(SB3_RESULTS, quick=False, out=tmp_path / "P.md")
    assert "before the systems and again after" not in plain      # a result measured before


def test_overhead_diagnostics_split_the_learner_time_when_profiled(tmp_path):
    diagnostics = {**DIAGNOSTICS, "bare_learner_beside_explorer_updates_s": 200.0,
                   "apex_learner_profile": {
                       "explorers": 4, "updates_s": 120.0,
                       "one_update_ms": {"wall": 6.5, "cpu": 5.0},
                       "scheduler": {"on_a_core": 0.75, "waiting_for_a_core": 0.2,
                                     "sleeping": 0.05},
                       "py_spy": {"update (torch)": 0.8, "sampling its replay buffer": 0.1,
                                  "publishing weights": 0.05, "priorities written back": 0.05}}}
    results = {"overhead": {**SB3_RESULTS["overhead"], "diagnostics": diagnostics}}
    text = run_all.write_report(results, quick=False, out=tmp_path / "R.md")
    rows = {"training thread on a core": "75%", "training thread waiting for a core": "20%",
            "its samples sampling the buffer and publishing weights": "15%",
            # bare: 300 updates/s (3.33 ms), beside an explorer 200 (5.00 ms)
            "one update in the bare loop, ms": "3.33",
            "one update in the bare loop beside an explorer's work, ms": "5.00",
            # 0.75 x 0.80 / 5.00 ms = 120 updates/s
            "on a core x in the update / CPU per update, updates/s": "120"}
    missing = [what for what, value in rows.items() if f"| {what} | {value} |" not in text]
    assert not missing, missing
    # without py-spy's split, no profile rows
    diagnostics["apex_learner_profile"]["py_spy"] = "not measured: py-spy is not installed"
    text = run_all.write_report(results, quick=False, out=tmp_path / "R2.md")
    assert "training thread on a core" not in text


def test_report_only_rewrites_from_the_json_with_each_runs_provenance(tmp_path, monkeypatch):
    """--report-only rewrites RESULTS.md from the JSON: each section says the commit, start
    time, load and wall time its own run recorded, not those of the moment of the rewrite."""
    import json
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "replay.json").write_text(json.dumps(
        {**RESULTS["replay"], "meta": _meta(load=(1.25, 2.5), wall_s=31.0,
                                            started="2026-02-03 04:05:00 UTC")}))
    monkeypatch.setattr(run_all, "BENCH", tmp_path)
    monkeypatch.setattr(run_all, "ROOT", tmp_path)
    assert run_all.main(["--report-only", "--out", str(tmp_path / "R.md")]) == 0
    text = (tmp_path / "R.md").read_text()
    assert "started 2026-02-03 04:05:00 UTC" in text
    assert "1-minute load average before/after: 1.2 / 2.5; wall time 31 s" in text
    assert "results of an earlier run" not in text
    # a benchmark re-run on its own since: the others are marked as earlier results
    (tmp_path / "results" / "goal_holds.json").write_text(json.dumps(
        {"meta": _meta({"quick": False}), "runs": [], "targets": {}}))
    assert run_all.main(["--report-only", "--fresh", "goal_holds",
                         "--out", str(tmp_path / "R.md")]) == 0
    replay, goal_holds = (tmp_path / "R.md").read_text().split("## The checkpoint holds")
    assert "results of an earlier run" in replay and "results of an earlier run" not in goal_holds


def test_learner_profile_splits_the_train_thread_and_the_cores():
    profile = _bench_module("learner_profile")
    main = "thread (0x1);Thread.run (threading.py:1);_ThreadPool.run (ray/worker.py:9);"
    adds = "thread (0x2);Thread.run (threading.py:1);_ThreadPool.run (ray/worker.py:9);"
    raw = "\n".join([
        main + "LearnerActor.train (roles.py:205);DQNLearner.update (dqn/learner.py:241) 80",
        main + "LearnerActor.train (distributed/learner.py:203);LearnerActor.draw_batches "
               "(distributed/learner.py:111);ReplayStore.sample_many (replay/server.py:42) 10",
        main + "LearnerActor.train (roles.py:208);LearnerActor.publish (roles.py:226);"
               "ActorMethod.remote (ray/actor.py:12) 5",
        main + "_ThreadPool.run (ray/worker.py:99) 5",              # between two tasks
        adds + "LearnerActor.add (roles.py:219);ReplayStore.add (replay/server.py:30) 60",
        "thread (0x3);Thread.run (threading.py:1);Event.wait (threading.py:2) 100",  # Ray's
    ])
    assert profile.train_thread_split(raw) == {
        "update (torch)": 0.8, "sampling its replay buffer": 0.1, "publishing weights": 0.05,
        "between tasks (idle)": 0.05}
    assert profile.train_thread_split("") == {}
    before = {1: ("ray::ApexLearnerActor.train", 10.0), 2: ("ray::Explorer", 4.0),
              3: ("raylet", 1.0)}
    after = {1: ("ray::ApexLearnerActor.train", 18.0), 2: ("ray::Explorer", 8.0),
             3: ("raylet", 1.5), 4: ("ray::Explorer", 2.0)}       # 4: started in the window
    assert profile.cores_by_role(before, after, wall=10.0) == {
        "learner": 0.8, "explorers": 0.6, "Ray: raylet, GCS, dashboard, agents": 0.05}


def test_rllib_profile_counts_components_inclusively_inside_train_only(tmp_path):
    """A sample counts for every component a frame of its stack matches, "of it" parts inside
    their parent too; metrics logging under Learner.update apart from metrics anywhere; samples
    outside `algo.train()` are left out. The flame graph draws the same samples."""
    from bench.pyspy import read_stacks

    profile = _bench_module("rllib_profile")
    train = "main (x.py:1);Trainable.train (ray/tune/trainable.py:3);"
    update = train + "Learner.update (ray/rllib/core/learner/learner.py:9);"
    raw = "\n".join([
        update + "RLModule.forward_train (ray/rllib/core/rl_module.py:5) 6",
        update + "MetricsLogger.log (ray/rllib/utils/metrics/logger.py:2) 2",
        train + "MetricsLogger.log (ray/rllib/utils/metrics/logger.py:2) 1",
        train + "SingleAgentEnvRunner.sample (ray/rllib/env/runner.py:2);"
                "step (gymnasium/envs/classic_control/pendulum.py:4) 1",
        "main (x.py:1);MetricsLogger.log (ray/rllib/utils/metrics/logger.py:2) 90",  # outside
    ])
    summary = profile.summarise(read_stacks(raw))
    parts = summary["components"]
    assert summary["samples_in_train"] == 10
    assert parts["learner update (Learner.update)"] == 0.8
    assert parts["  of it: forward passes (RLModule.forward_train)"] == 0.6
    assert parts["  of it: metrics logging"] == 0.2
    assert parts["metrics logging anywhere (MetricsLogger, stats)"] == 0.3
    assert parts["  of it: Pendulum env.step"] == 0.1 and parts["replay buffer (add, sample)"] == 0
    assert summary["top_self"][0] == ["RLModule.forward_train (core/rl_module.py)", 0.6]
    profile.flamegraph(read_stacks(raw), tmp_path / "p.svg")
    assert "10 py-spy samples inside algo.train()" in (tmp_path / "p.svg").read_text()


def test_the_scaling_ladder_reads_its_runs_against_the_bound_and_the_targets():
    """Canned runs: medians and ranges per (latency, variant), Amdahl's bound (a slow env:
    N explorers divide its wait; a fast one: the learner's updates set the floor), the
    ratios to single-process DQN and SB3, and the targets only from variants that reached."""
    summary = _bench_module("scaling_summary")
    costs = {"act_ms": 0.2, "update_ms": 1.2, "updates_per_transition": 0.25}
    assert summary.bound_s("dqn", 2.0, 10_000, costs, 2) == (0.2 + 2.0 + 0.3) * 10
    assert summary.bound_s("apex-4", 2.0, 10_000, costs, 2) == 2.2 / 4 * 10   # the env's wait
    assert summary.bound_s("apex-8", 0.0, 10_000, costs, 2) == 0.3 * 10       # the learner
    assert summary.bound_s("vec-8", 2.0, 10_000, costs, 2) == (0.2 + 0.25 + 0.3) * 10

    def run(latency, variant, seed, seconds, reached=True):
        return {"latency_ms": latency, "variant": variant, "seed": seed, "reached": reached,
                "seconds": seconds, "env_steps": 30_000, "cpu_s": seconds}

    runs = [run(2.0, "dqn", s, t) for s, t in enumerate((100.0, 120.0, 90.0))]
    runs += [run(2.0, "sb3", s, t) for s, t in enumerate((150.0, 160.0, 170.0))]
    runs += [run(2.0, "apex-4", s, t) for s, t in enumerate((30.0, 35.0, 40.0))]
    runs += [run(2.0, "apex-8", s, 20.0, reached=s > 0) for s in range(3)]   # one missed
    rows = summary.summarise(runs, costs, 2)
    apex4 = next(r for r in rows if r["variant"] == "apex-4")
    assert (apex4["median_seconds"], apex4["min_seconds"], apex4["max_seconds"]) == (35, 30, 40)
    assert apex4["seconds_vs_dqn"] == 0.35 and apex4["seconds_vs_sb3"] == 0.22
    assert apex4["seconds_vs_dqn_is"] == "=" and apex4["median_seconds_exact"]
    targets = summary.check_targets(rows)
    assert targets["2 ms: best Ape-X time / dqn"]["variant"] == "apex-4"   # not the one that missed
    assert targets["2 ms: best Ape-X time / dqn"]["met"]
    assert "0 ms: best Ape-X time / dqn" not in targets                   # not run


def test_a_capped_or_floored_run_makes_its_statistics_and_ratios_bounds():
    """A run that did not reach the goal (stopped at the cap, or not run: its floor) has a
    lower bound for seconds; a median, min or max it sits at or under is one too, a ratio
    against such a reference is an upper bound, and a target it misses is left undecided."""
    summary = _bench_module("scaling_summary")
    costs = {"act_ms": 0.2, "update_ms": 1.2, "updates_per_transition": 0.25}

    def run(variant, seed, seconds, reached=True, **more):
        return {"latency_ms": 2.0, "variant": variant, "seed": seed, "reached": reached,
                "seconds": seconds, "env_steps": 30_000, "cpu_s": seconds, **more}

    runs = [run("dqn", 0, 45.0, reached=False), run("dqn", 1, 40.0),          # capped at 45
            run("dqn", 2, 104.0, reached=False, floor=True, cpu_s=None)]      # not run
    runs += [run("sb3", s, t) for s, t in enumerate((50.0, 60.0, 70.0))]
    runs += [run("apex-2", s, t) for s, t in enumerate((20.0, 22.0, 30.0))]
    rows = {r["variant"]: r for r in summary.summarise(runs, costs, 2)}
    dqn = rows["dqn"]
    assert (dqn["median_seconds"], dqn["min_seconds"], dqn["max_seconds"]) == (45.0, 40.0, 104.0)
    assert (dqn["median_seconds_exact"], dqn["min_seconds_exact"], dqn["max_seconds_exact"]) \
        == (False, True, False)
    assert (dqn["reached"], dqn["not_run"], dqn["median_cpu_s"]) == (1, 1, 42.5)
    assert summary.seconds_text(dqn, "median") == "≥45.0" and summary.cpu_text(dqn) == "42.5"
    assert rows["apex-2"]["seconds_vs_dqn"] == 0.49 and rows["apex-2"]["seconds_vs_dqn_is"] == "<="
    assert dqn["seconds_vs_sb3_is"] == ">="
    targets = summary.check_targets(list(rows.values()))
    assert targets["2 ms: best Ape-X time / dqn"] == {
        "value": 0.49, "variant": "apex-2", "target": "<= 0.35", "met": False,
        "note": "undecided: dqn's median is a lower bound"}
    assert targets["2 ms: best Ape-X time / sb3"]["met"] is False             # measured: missed
    assert "note" not in targets["2 ms: best Ape-X time / sb3"]
    text = summary.section({"costs": {**costs, "updates_per_transition": 0.25}, "summary":
                            list(rows.values()), "meta": _meta({"cap_s": 45.0})})
    assert "| 2 | dqn | 1/3 | 1 | ≥45.0 [40.0-≥104.0] |" in text
    assert "| 2 | apex-2 | 3/3 | 0 | 22.0 [20.0-30.0] |" in text and "| <=0.49 | 0.37 |" in text


def test_the_ladder_floors_a_repeatable_reference_from_the_env_steps_it_took():
    """dqn, sb3 and vec-8 learn the same at every latency: a run must wait at least its env
    steps to the goal times the latency (vec-8: 8 envs per wait); Ape-X has no floor. At the
    first latency a repeatable reference runs to the goal, every other run stops at the cap;
    a new variant is one entry of VARIANTS."""
    scaling = _bench_module("scaling")
    runs = [{"variant": "dqn", "seed": 0, "env_steps": 40_000, "reached": True},
            {"variant": "dqn", "seed": 0, "env_steps": 20_000, "reached": False},
            {"variant": "dqn", "seed": 0, "env_steps": 90_000, "floor": True},
            {"variant": "vec-8", "seed": 1, "env_steps": 48_000, "reached": True}]
    assert scaling.steps_known(runs, "dqn", 0) == 40_000                  # floors do not count
    assert scaling.steps_known(runs, "dqn", 1) is None
    assert scaling.floor_s("dqn", 2.0, 40_000) == 80.0
    assert scaling.floor_s("vec-8", 2.0, scaling.steps_known(runs, "vec-8", 1)) == 12.0
    assert scaling.floor_s("apex-2", 2.0, 40_000) is None
    assert scaling.floor_s("dqn", 2.0, None) is None
    latencies = (0.0, 2.0)
    assert scaling.budget_for("dqn", 0.0, latencies, 45.0, quick=False) == scaling.FULL
    assert scaling.budget_for("dqn", 2.0, latencies, 45.0, quick=False)["max_time_s"] == 45.0
    assert scaling.budget_for("apex-2", 0.0, latencies, 45.0, quick=False)["max_time_s"] == 45.0
    assert scaling.budget_for("sb3", 0.0, latencies, 45.0, quick=True) == scaling.QUICK
    assert list(scaling.VARIANTS) == ["dqn", "sb3", "vec-8", "apex-1", "apex-2", "apex-4",
                                      "apex-auto"]


def test_a_repeatable_reference_is_not_run_where_its_floor_and_compute_pass_the_cap():
    """A later run of dqn does the compute of its first run again (the same env steps and
    updates) besides waiting its floor: when the floor plus 0.9 of that compute passes the
    cap, the run would stop at the cap and is not made; it is reported at the larger of its
    floor and the cap, a lower bound. Ape-X is always run."""
    scaling = _bench_module("scaling")
    first = [{"variant": "dqn", "seed": 0, "latency_ms": 0.0, "env_steps": 60_000,
              "seconds": 20.0, "reached": True},
             {"variant": "vec-8", "seed": 0, "latency_ms": 0.5, "env_steps": 40_000,
              "seconds": 12.5, "reached": True},
             {"variant": "apex-2", "seed": 0, "latency_ms": 0.0, "env_steps": 60_000,
              "seconds": 20.0, "reached": True}]
    assert scaling.compute_s(first, "dqn", 0) == 20.0
    assert scaling.compute_s(first, "vec-8", 0) == 10.0        # 12.5 less 40,000 / 8 x 0.5 ms
    assert scaling.compute_s(first, "dqn", 1) == 0.0
    # 0.5 ms: floor 30 s + 18 s of compute = 48 s passes a 45-s cap; the floor alone does not
    skipped = scaling.not_run("dqn", 0.5, 0, first, cap=45.0)
    assert skipped["floor"] is True and skipped["seconds"] == 45.0
    assert (skipped["floor_s"], skipped["expected_s"], skipped["env_steps"]) == (30.0, 48.0,
                                                                                 60_000)
    assert scaling.not_run("dqn", 0.5, 0, first, cap=50.0) is None          # 48 s fits: run
    assert scaling.not_run("dqn", 2.0, 0, first, cap=45.0)["seconds"] == 120.0   # the floor
    assert scaling.not_run("dqn", 0.5, 1, first, cap=45.0) is None      # nothing known: run
    assert scaling.not_run("apex-2", 5.0, 0, first, cap=45.0) is None    # Ape-X: always run


def test_a_variant_whose_explorer_count_is_chosen_at_start_up_is_one_line(monkeypatch):
    """`apex-auto`, say: its config changes come from a function of the latency; each run
    records the explorers it had, and the bound reads them (as apex-N)."""
    from types import SimpleNamespace

    from course_lib.apex import ApexConfig

    scaling = _bench_module("scaling")
    summary = _bench_module("scaling_summary")
    seen = []

    class Chosen:
        config_class = ApexConfig

        @staticmethod
        def train(cfg, progress=None):
            seen.append(cfg)
            row = {"env_steps": 20_000, "wall_s": 12.3, "eval_return": 480.0}
            progress(row)
            return SimpleNamespace(last=row, stopped_by="eval_return")

    def chosen_in_a_while(latency_ms):
        time.sleep(0.3)                        # measuring costs takes time: the run's time
        return {"num_workers": 4 if latency_ms >= 2 else 1}

    monkeypatch.setitem(scaling.VARIANTS, "apex-auto", scaling.Variant(Chosen, chosen_in_a_while))
    r = scaling.run_one("apex-auto", 5.0, 0, {**scaling.FULL, "max_time_s": 45.0})
    assert seen[0].num_workers == 4 and seen[0].env_latency_ms == 5.0
    assert (r["reached"], r["env_steps"], r["explorers"]) == (True, 20_000, 4)
    assert 12.6 <= r["seconds"] < 14.0
    # the ladder's own apex-auto: the command line's `--num-workers auto` (sizing.auto_explorers)
    from course_lib import sizing
    from tests.test_sizing import LEARNER_BOUND

    monkeypatch.setattr(sizing, "measure_costs", lambda cfg, seconds: dataclasses.replace(
        LEARNER_BOUND, latency_ms=cfg.env_latency_ms))
    assert scaling.auto_count(2.0) == {"num_workers": 2}      # the learner binds at 2
    assert scaling.auto_count(20.0)["num_workers"] > 2        # a slower env: more explorers
    costs = {"act_ms": 0.2, "update_ms": 1.2, "updates_per_transition": 0.25,
             "envs_per_explorer": 4}
    [row] = summary.summarise([{"latency_ms": 5.0, "variant": "apex-auto", "seed": 0, **r}],
                              costs, 2)
    assert row["bound_s"] == round(summary.bound_s("apex-4", 5.0, 20_000, costs, 2), 1)
    assert row["explorers"] == [4]                          # the RESULTS.md row says which
    assert "| 5 | apex-auto (4 explorers) | 1/1 |" in summary.section(
        {"costs": costs, "summary": [row], "meta": _meta({})})


def test_a_ladder_run_capped_before_its_first_evaluation_is_a_lower_bound(monkeypatch):
    """Ape-X under load may not get one snapshot scored within the cap (`OutOfTime`): the
    run counts as not reached in the cap's seconds, with no env steps and so no bound."""
    from course_lib.apex import ApexConfig
    from course_lib.errors import OutOfTime

    scaling = _bench_module("scaling")
    summary = _bench_module("scaling_summary")

    class Late:
        config_class = ApexConfig

        @staticmethod
        def train(cfg, progress=None):
            raise OutOfTime("the time budget ran out before the first evaluation")

    monkeypatch.setitem(scaling.VARIANTS, "apex-9", scaling.Variant(Late, {"num_workers": 9}))
    r = scaling.run_one("apex-9", 2.0, 0, {**scaling.FULL, "max_time_s": 45.0})
    assert (r["reached"], r["env_steps"], r["seconds"], r["eval_return"]) == (
        False, None, 45.0, None)
    [row] = summary.summarise([{"latency_ms": 2.0, "variant": "apex-9", "seed": 0, **r}],
                              {"act_ms": 0.1, "update_ms": 1.0, "updates_per_transition": 0.25},
                              2)
    assert row["bound_s"] is None and summary.steps_text(row) == "-"
    assert summary.seconds_text(row, "median") == "≥45.0"


def test_overhead_section_tables_the_cpu_per_update_by_role(tmp_path):
    overhead = _bench_module("overhead")
    cpu = lambda s: {1: ("ray::ApexLearnerActor", 10.0 + s), 2: ("ray::Explorer", 5.0 + s / 2),   # noqa: E731
                     3: ("raylet", 1.0 + s / 10), 4: ("vim notes.md", 0.5 + s)}
    samples = [{"t": 3.0 * k, "updates": max(0, 600 * (k - 2)), "cpu": cpu(2.4 * max(0, k - 2))}
               for k in range(1, 8)]
    # the window: k=4 to k=7, 1,800 updates in 9 s; the learner used 7.2 CPU s, 4 ms/update
    system = overhead.system_cpu_per_update(samples)
    assert system["by_role_ms"] == {"learner": 4.0, "explorers": 2.0,
                                    "Ray: raylet, GCS, dashboard, agents": 0.4}
    assert system["cpu_ms_per_update"] == pytest.approx(6.4)
    assert system["not_counted_ms"] == {"everything else": 4.0}
    results = {"overhead": {**SB3_RESULTS["overhead"], "cpu_per_update": {
        "single_process_ms": 3.2, "apex_system_ms": 6.4, "ratio": 2.0, "explorers": 4,
        "by_role_ms": system["by_role_ms"], "not_counted_ms": system["not_counted_ms"]}}}
    text = run_all.write_report(results, quick=False, out=tmp_path / "R.md")
    assert "| **the whole system** | 6.4" in text
    assert "Whole system / one process: **2.00** (target <= 1.5)" in text


def test_matched_networks_section_gives_the_ratio_per_network_size():
    matched = _bench_module("matched")
    runs = [{"side": side, "net": net, "seed": seed, "reached": True, "env_steps": 2_000 + seed,
             "time_s": {"ours": 10.0, "sb3": 40.0}[side] * (4 if net == "256x256" else 1) + seed}
            for side in ("ours", "sb3") for net in ("64x64", "256x256") for seed in (0, 1, 2)]
    rows = matched.summarise(runs)
    assert [(r["net"], r["time_ratio"]) for r in rows] == [
        ("64x64", 11 / 41), ("256x256", 41 / 161)]
    text = matched.section({"summary": rows, "meta": _meta(
        {"seeds": [0, 1, 2], "task": "Pendulum-v1", "workers": 2})})
    assert "| 256x256 | 3/3 | 41.0 | 2,001 | 3/3 | 161.0 | 2,001 | 0.25 |" in text


def test_learner_feed_gives_each_settings_medians_and_the_default_against_the_target(tmp_path):
    feed = _bench_module("learner_feed")
    rates = {"default": (390, 410, 500), "as before": (300, 310, 320),
             "pin_learner": (420, 380, 400), "sample_ahead": (450, 430, 440)}
    runs = [{"setting": name, "repeat": k, "updates_s": rate, "ratio": rate / 500,
             "saturated": 1.0, "owed_updates_s": 600.0, "cpu_ms_per_update": 3.0 + k}
            for name, three in rates.items() for k, rate in enumerate(three)]
    rows = feed.summarise(runs, single_ms=2.0)
    assert [(r["setting"], r["updates_s"], r["ratio"]) for r in rows] == [
        ("default", 410, 0.82), ("as before", 310, 0.62), ("pin_learner", 400, 0.8),
        ("sample_ahead", 440, 0.88)]
    older = feed.summarise([r for r in runs if r["setting"] != "sample_ahead"], single_ms=2.0)
    assert [r["setting"] for r in older] == ["default", "as before", "pin_learner"]
    assert rows[0]["cpu_vs_one_process"] == 2.0           # median 4.0 ms against 2.0 ms
    result = {"bare_updates_s": 500.0, "single_process_ms": 2.0, "summary": rows,
              "targets": feed.targets(rows),
              "meta": _meta({"repeats": 3, "window_s": 45.0, "explorers": 4})}
    target = result["targets"]["apex learner distributed/bare, the CLI's default"]
    assert target["met"] is True and target["value"] == 0.82
    slower = feed.targets([{**rows[0], "ratio": 0.79}, *rows[1:]])
    assert slower["apex learner distributed/bare, the CLI's default"]["met"] is False
    text = feed.section(result)
    assert "| default | 3 | 410 | 0.82 | 100% | 4.00 | 2.00 |" in text
    assert "| pin_learner | 3 | 400 | 0.80 | 100% | 4.00 | 2.00 |" in text
    report = run_all.write_report({"learner_feed": result}, quick=False, out=tmp_path / "R.md")
    assert "## Feeding the Ape-X learner" in report and "| as before | 3 | 310 |" in report
    assert "learner_feed: apex learner distributed/bare, the CLI's default | 0.82 | >= 0.8 | " \
        "met" in report


def test_a_ladder_run_one_rung_at_a_time_merges_into_one_result():
    scaling = _bench_module("scaling")
    costs = {"act_ms": 0.1, "update_ms": 1.0, "updates_per_transition": 0.25}

    def result(latency, variants, seconds):
        runs = [{"latency_ms": latency, "variant": v, "seed": s, "reached": True,
                 "seconds": seconds[v] + s, "env_steps": 10_000, "cpu_s": 5.0}
                for v in variants for s in (0, 1, 2)]
        return {"config": {"quick": False, "cores": 2}, "costs": costs, "runs": runs,
                "summary": [], "targets": {}}

    def written(r, load):
        """`r` as Recording.write stores it: its config in meta, with the run's load, commit
        and start time (one per run: `load` tells them apart)."""
        return {"meta": _meta(r["config"], load=(load, load), commit=f"{load}".ljust(40, "0"),
                              started=f"2026-01-01 {load}"),
                **{k: v for k, v in r.items() if k != "config"}}

    two = result(2.0, ["dqn", "sb3", "apex-4"], {"dqn": 100, "sb3": 60, "apex-4": 20})
    zero = result(0.0, ["dqn", "apex-4"], {"dqn": 30, "apex-4": 35})
    again = result(2.0, ["apex-4"], {"apex-4": 19})    # one variant re-run
    summary = _bench_module("scaling_summary")
    both = scaling.merged(written(scaling.merged(written(two, 0.5), zero), 0.7), again)
    assert both["config"]["latencies_ms"] == [0.0, 2.0] and len(both["runs"]) == 15
    assert [r["seconds"] for r in both["runs"] if r["variant"] == "apex-4"
            and r["latency_ms"] == 2.0] == [19, 20, 21]             # replaced, not doubled
    assert both["targets"]["2 ms: best Ape-X time / dqn"]["value"] == 0.2
    assert both["targets"]["0 ms: best Ape-X time / dqn"] == {
        "value": 1.16, "variant": "apex-4", "target": "<= 1.0", "met": False}
    # each rung's run keeps its own meta: the section gives each one's load
    text = summary.section(written(both, 0.9))
    assert "load average before/after each: 0.5/0.5, 0.7/0.7, 0.9/0.9." in text
    # and each row its own commit: the earlier runs carry theirs, the newest take the meta's
    where = {(r["latency_ms"], r["variant"], w["commit"][:3])
             for r, w in zip(both["runs"], summary.run_provenance(written(both, 0.9)),
                             strict=True)}
    assert where == {(2.0, "dqn", "0.5"), (2.0, "sb3", "0.5"), (0.0, "dqn", "0.7"),
                     (0.0, "apex-4", "0.7"), (2.0, "apex-4", "0.9")}
    assert all({"commit", "started", "cpu"} <= r.keys() for r in both["runs"]
               if (r["latency_ms"], r["variant"]) != (2.0, "apex-4"))
    assert "- started 2026-01-01 0.5, commit 0.50000000, Test CPU: 2 ms dqn, sb3\n" in text
    assert "- started 2026-01-01 0.9, commit 0.90000000, Test CPU: 2 ms apex-4" in text


def test_runs_measured_now_carry_the_commit_and_start_of_their_run():
    scaling = _bench_module("scaling")
    runs = [{"latency_ms": 0.0, "variant": "dqn", "seed": 0}]
    meta = _meta(commit="f" * 40, started="2026-02-02 10:00:00 UTC")
    assert scaling.stamped(runs, meta) == [{**runs[0], "commit": "f" * 40,
                                            "started": "2026-02-02 10:00:00 UTC"}]


def test_a_rung_merged_from_another_machine_is_dropped_not_compared():
    """Times from two CPUs do not compare: merging keeps only the earlier runs measured on the
    new run's CPU (read from each run, or for runs recorded before they carried one, from the
    command line of the recorded run that measured them)."""
    scaling = _bench_module("scaling")
    costs = {"act_ms": 0.1, "update_ms": 1.0, "updates_per_transition": 0.25}
    runs = [{"latency_ms": lat, "variant": v, "seed": s, "reached": True, "seconds": 10.0,
             "env_steps": 10_000, "cpu_s": 5.0} for lat, v in ((2.0, "dqn"), (0.0, "dqn"),
                                                                (2.0, "apex-2")) for s in (0, 1)]
    earlier = {"meta": {**_meta({"latencies_ms": [0.0, 2.0], "variants": ["dqn", "apex-2"]}),
                        "machine": {"cpu": "Xeon"},
                        "command": "python -m bench.scaling --latencies 2 --variants apex "
                                   "--explorers 2 --add-to"},
               "earlier_meta": [{**_meta({"latencies_ms": [0.0, 2.0], "variants": ["dqn"]}),
                                 "machine": {"cpu": "EPYC"}, "command": None}],
               "costs": costs, "runs": runs}
    summary = _bench_module("scaling_summary")
    assert [w["cpu"] for w in summary.run_provenance(earlier)] == ["EPYC"] * 4 + ["Xeon"] * 2
    new = {"config": {"quick": False, "cores": 2}, "costs": costs,
           "runs": [{**runs[0], "seed": 5, "cpu": "Xeon"}]}
    said = []
    both = scaling.merged(earlier, new, log=said.append)
    assert sorted((r["latency_ms"], r["variant"], r["seed"]) for r in both["runs"]) == [
        (2.0, "apex-2", 0), (2.0, "apex-2", 1), (2.0, "dqn", 5)]
    assert len(said) == 4 and said[0].startswith("dropped: 2 ms dqn seed 0, measured on EPYC")


def test_the_model_bench_reads_the_ladder_plans_the_paper_cluster_and_renders_its_section(
        tmp_path):
    """bench/model.py from canned JSON: the ladder's best counts, the readings of agreement,
    the shard plan by hand, and its RESULTS.md section."""
    model = _bench_module("model")
    summary = _bench_module("scaling_summary")

    def rung(n, seconds, low, high, reached=3):
        return {"latency_ms": 2.0, "variant": f"apex-{n}", "reached": reached, "seeds": 3,
                "median_seconds": seconds, "min_seconds": low, "max_seconds": high}

    scaling = {"meta": {"config": {"latencies_ms": [2.0]}},
               "summary": [rung(1, 30.0, 25.0, 40.0), rung(2, 20.0, 18.0, 26.0),
                           rung(4, 10.0, 9.0, 11.0, reached=2),     # a seed missed: left out
                           rung("auto", 15.0, 14.0, 16.0),          # a count chosen per run
                           {"latency_ms": 2.0, "variant": "dqn", "reached": 3, "seeds": 3,
                            "median_seconds": 5.0}]}
    best = model.ladder_best(scaling)[2.0]
    assert best["count"] == 2 and sorted(best["rows"]) == [1, 2]
    targets = summary.check_targets(scaling["summary"])
    assert targets["2 ms: apex-auto time / best apex-N"] == {
        "value": 0.75, "variant": "apex-2", "target": "<= 1.25", "met": True}
    assert model.count_reading(2, 2, best["rows"]) == "the same count"
    assert "overlap" in model.count_reading(1, 2, best["rows"])            # 25 <= 26
    assert "no apex-4 row (a fixed count of 4)" in model.count_reading(4, 2, best["rows"])
    assert model.rate_reading(100.0, {"updates_s": 90.0, "saturated": 1.0}, 2, 2) == \
        "within 20%"
    assert "eta here = 0.50" in model.rate_reading(100.0, {"updates_s": 50.0, "saturated": 1.0},
                                                   2, 2)
    assert "waited for data" in model.rate_reading(100.0, {"updates_s": 50.0, "saturated": 0.2},
                                                   2, 2)
    assert "not measured" in model.rate_reading(100.0, {"updates_s": math.nan,
                                                        "saturated": math.nan}, 2, 2)
    # takes cost 0.25 ms a call + 0.35 / 448 ms a row; adds 100K/s in calls of 50 at 0.5 ms:
    # 1,000 ms/s, plus 500 x 512 rows x 0.00078 = 200 ms/s, over 500 - 500 x 0.25 ms per shard
    costs = {"act_ms": 0.1, "update_ms_64": 1.4, "replay_ms_64": 0.4, "update_ms_512": 6.0,
             "replay_ms_512": 1.0, "insert_ms": 0.1, "call_ms": 0.4, "take_ms_64": 0.3,
             "take_ms_512": 0.65, "submit_ms": 0.05, "pull_ms": 1.2, "transition_bytes": 49,
             "weights_bytes": 70_000}
    from course_lib.apex import ApexConfig

    assert model.take_cost(costs) == pytest.approx((0.25, 0.35 / 448))
    adds_of_50 = ApexConfig().updated({"send_every": 50})
    assert model.shard_plan(costs, adds_of_50, 100_000, 500, 512) == (4, 1)
    assert model.shard_plan(costs, adds_of_50, 100_000, 4_000, 512) == (11, 4)  # 4 per call
    paper = model.on_paper(costs, ApexConfig(), [2.0])
    workbook, apex = paper
    assert (workbook["replay_ratio"], apex["batch_size"]) == (16.0, 512)
    assert workbook["updates_s_needed"] == round(workbook["explorer_transitions_s"] / 4)
    assert workbook["bound"].startswith("the learner:") and workbook["learners"] > 10
    result = {"meta": _meta({"explorers": 256, "nodes": 16}), "costs": costs, "paper": paper,
              "targets": {}, "ladder": [
                  {"latency_ms": 2.0, "ladder_best": 2, "model_count": 1,
                   "model_count_ladder_costs": 2, "n_star": 0.83, "count_ok": True,
                   "count_reading": "overlap", "predicted_updates_s": 268.0,
                   "measured_updates_s": 250.0, "saturated": 1.0, "rate_ok": True,
                   "rate_reading": "within 20%"},
                  {"latency_ms": 5.0, "ladder_best": 4, "model_count": 4,
                   "model_count_ladder_costs": 4, "n_star": 3.6, "count_ok": True,
                   "count_reading": "the same count", "predicted_updates_s": 268.0}]}
    text = model.section(result)
    assert "| 2 | 2 | 1 | 2 | 0.83 | 268 | 250 | 100% | overlap; within 20% |" in text
    assert "| 5 | 4 | 4 | 4 | 3.60 | 268 | – | – | the same count; not run |" in text
    assert "| workbook (RR 16, B 64) | 2 |" in text and "| Ape-X paper (RR 1, B 512) | 2 |" in text
    report = run_all.write_report({"model": result}, quick=False, out=tmp_path / "R.md")
    assert "## The scaling model, against the ladder and on paper" in report
    assert "`python -m bench.model`" in report and "| 2 | 2 | 1 | 2 |" in report


def test_stop_rule_section_tables_both_rules_and_checks_the_targets(tmp_path):
    """A few real simulated runs per scenario, through the report: one row per scenario with
    both rules' shares, and a target on the new rule only where the scenario sets one."""
    stop_rule = _bench_module("stop_rule")
    rows = [stop_rule.scenario(name, runs=5, quick=True)
            for name in ("CartPole 2% under (465.5)", "CartPole learning 300 -> 520 (40 looks)")]
    targets = stop_rule.check_targets(rows)
    assert list(targets) == ["CartPole 2% under (465.5), 50 looks: new rule reached"]
    assert targets[next(iter(targets))]["target"] == "<= 5%"
    result = {"meta": _meta({"quick": False, "runs": 5, "eval_episodes": 10,
                             "confirm_episodes": 20}), "scenarios": rows, "targets": targets}
    text = run_all.write_report({"stop_rule": result}, quick=False, out=tmp_path / "R.md")
    block = text.split(benchreport.BEGIN.format("stop_rule"))[1]
    assert "| CartPole 2% under (465.5) | 465.5 | " in block
    assert "| CartPole learning 300 -> 520 (40 looks) | 300 → " in block
    assert "stop_rule: CartPole 2% under (465.5), 50 looks: new rule reached" in text


def test_the_chaos_bench_sets_each_chaos_run_against_its_unkilled_seed_and_renders(tmp_path):
    chaos = _bench_module("chaos")
    kills = [{"actor": a, "at_s": t, "back_s": 1.5, "restarts": 0}
             for a, t in (("parameter server", 2.0), ("evaluator", 4.0), ("explorer 2", 6.0))]
    runs = [{"task": "apex:CartPole-v1", "seed": 0, "chaos": c, "reached": True,
             "seconds": 40.0 if c else 32.0, "gap": 70 if c else 20, "kills": kills if c else [],
             **({"checkpoint_score": 500.0, "holds": True} if c else {})} for c in (False, True)]
    runs[1]["kills"][2]["back_s"] = None                       # the run ended before it came back
    rows = chaos.summarise(runs)
    assert rows == [{"task": "apex:CartPole-v1", "seed": 0, "reached": True, "holds": True,
                     "score": 500.0, "kills": 3, "worker_kills": 1, "restarts": 2, "lost": 50,
                     "seconds_unkilled": 32.0, "seconds": 40.0, "ratio": 1.25}]
    line = ("error: the learner died: killed; the last checkpoint is /r/c (iteration 3); continue"
            " with: python -m course_lib train --algo apex --restore /r/c; results so far in /r")
    learner = {"line": line, "one_line": True, "names_learner": True, "exit_continued": 0,
               "command": "python -m course_lib train --algo apex --restore /r/c",
               "summary": "apex CartPole-v1: reached 500.0", "reached": True, "holds": True,
               "checkpoint_score": 499.5}
    targets = chaos.check_targets(rows, learner)
    assert all(t["met"] for t in targets.values())
    assert not any(t["met"] for t in chaos.check_targets(
        [{**rows[0], "holds": False}], {**learner, "one_line": False}).values())
    result = {"meta": _meta({"quick": False}), "summary": rows, "learner": learner,
              "targets": targets}
    report = run_all.write_report({"chaos": result}, quick=False, out=tmp_path / "R.md")
    assert "## Faults survived: actors killed, goals reached" in report
    assert "| apex:CartPole-v1 | 0 | yes | 500 | yes | 3 | 1 | 2 | 50 | 32.00 | 40.00 | 1.25 |" \
        in report
    assert f"```\n{line}\n```" in report and "exit 0, apex CartPole-v1: reached 500.0" in report
    # a run that reached its goal before the kill tested nothing: it says so, and misses
    unkilled = {"exit": 0, "killed": False, "line": "", "one_line": True, "names_learner": False,
                "command": None, "reached": False, "holds": False}
    assert not chaos.check_targets(rows, unkilled)[
        "killed learner: one line, its command reached the goal, checkpoint held"]["met"]
    report = run_all.write_report({"chaos": {**result, "learner": unkilled}}, quick=False,
                                  out=tmp_path / "R2.md")
    assert "The run ended (exit 0) before its learner was killed: nothing was tested." in report
    assert "```\n\n```" not in report


def test_the_ladders_cap_grows_with_this_machines_bare_costs_per_rung():
    """CAP_S was sized on a faster machine: where one bare transition (act + latency + the
    updates it owes) takes longer here, each rung's cap grows by that factor, never below
    CAP_S; at a high latency the machine matters less, so the factor falls towards 1. The
    report gives the cap per rung."""
    scaling, summary = _bench_module("scaling"), _bench_module("scaling_summary")
    same = {**scaling.CAP_COSTS, "updates_per_transition": 0.25}
    slower = {"act_ms": 0.288, "update_ms": 2.15, "updates_per_transition": 0.25}
    faster = {"act_ms": 0.05, "update_ms": 1.0, "updates_per_transition": 0.25}
    assert scaling.cap_at(0.0, same) == scaling.cap_at(5.0, same) == scaling.CAP_S
    assert scaling.cap_at(0.0, faster) == scaling.CAP_S                    # never below
    at = {latency: scaling.cap_at(latency, slower) for latency in (0.0, 0.5, 2.0, 5.0)}
    # (0.288 + 0 + 0.25 * 2.15) / (0.0924 + 0 + 0.25 * 1.404) = 1.86 at 0 ms
    assert at[0.0] == pytest.approx(45 * 0.8255 / 0.4434, abs=0.1)
    assert at[0.0] > at[0.5] > at[2.0] > at[5.0] > scaling.CAP_S
    cfg = {"cap_s": 45.0, "caps_s": {f"{k:g}": v for k, v in at.items()}}
    assert summary.caps_text(cfg).startswith(f"{at[0.0]:g} s at 0 ms; ")
    assert summary.caps_text({"cap_s": 45.0}) == "45 s"
    assert summary.caps_text({"cap_s": 45.0, "caps_s": {"0": 45.0, "2": 45.0}}) == "45 s"
