"""The bench scripts without long runs or Ray: RESULTS.md and figures from canned JSON, the RLlib
race's contenders, and the SAC settings loop on a few Pendulum steps."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bench_module(name: str):
    """bench/<name>.py as a module (bench/ is no package; its scripts import benchlib)."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{name}",
                                                      ROOT / "bench" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "bench"))
    return module


run_all = _bench_module("run_all")

INFO = {"cpu": "Test CPU", "cpus": 2, "memory_gb": 24.0, "os": "Linux", "date": "2026-01-01 12:00",
        "load_average": [0.5, 0.4, 0.3], "versions": {"python": "3.11.7", "ray": "2.60.0"}}
LOAD = {"load_average_before_after": [0.3, 1.2]}
RESULTS = {
    "replay": {"config": LOAD, "buffers": [{"operation": "sample+update (512)", "ours_us": 460.0,
                                            "cpprb_us": 820.0, "ours/cpprb": 0.56}],
               "ray_ingest": {"explorers": 2, "batch": 50, "transitions_per_s": 68_000.0},
               "targets": {"sample+update ours/cpprb": {"value": 0.56, "target": 1.0,
                                                        "met": True}}},
    "apex": {"missing": "bench/apex.py is not in this checkout"},
    "sac": {"error": "exit code 1: boom"},
    "ray_overhead": {"config": LOAD, "targets": {},
                     "rows": [{"operation": "task, sync", "ray_us": 2_600.0, "ray_per_s": 385.0,
                               "reference_us": 0.1, "ray/reference": 26_000.0}]},
    "rllib": {"config": LOAD, "runs": [
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
    text = run_all.write_report(RESULTS, quick=False, out=out, info=INFO)
    assert out.read_text() == text
    assert "2 CPUs (Test CPU)" in text and "2026-01-01" in text and "ray 2.60.0" in text
    assert "replay: sample+update ours/cpprb | 0.56 | 1.00 | met" in text
    assert "Not run: bench/apex.py is not in this checkout." in text
    assert "exit code 1: boom" in text
    assert "≤ 0.1 (RLlib missed the goal)" in text
    assert "load average before/after: 0.3 / 1.2" in text
    assert (tmp_path / "figures" / "rllib_cartpole.png").stat().st_size > 1_000
    assert (tmp_path / "figures" / "ray_overhead.png").exists()
    assert "![rllib_cartpole](figures/rllib_cartpole.png)" in text


def test_quick_report_says_so(tmp_path):
    text = run_all.write_report({"apex": RESULTS["apex"], "replay": RESULTS["replay"]}, quick=True,
                                out=tmp_path / "R.md", info=INFO)
    assert text.count("QUICK SMOKE RUN") == 1 and "No targets checked" in text


def test_each_side_of_the_rllib_benchmark_runs_its_own_implementation():
    """Both sides of Pendulum-v1 are "sac": the side, not the name, picks whose code runs."""
    from course_lib.apex import ApexConfig, train_apex
    from course_lib.rllib_compare import RLlibConfig, train_rllib
    from course_lib.sac import SACConfig, train_sac

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
    assert seen == {"CartPole-v1": (ApexConfig, train_apex), "Pendulum-v1": (SACConfig, train_sac)}


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
