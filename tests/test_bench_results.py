"""course_lib.teaching.bench_results: notebooks read a benchmark's JSON, or get a one-line fix."""

import json
from pathlib import Path

import pytest

from course_lib.teaching import bench_results


def test_load_reads_the_repository_results(tmp_path, monkeypatch):
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "replay.json").write_text(json.dumps({"buffers": [1]}))
    monkeypatch.setattr(bench_results, "REPO", tmp_path)
    assert bench_results.load("replay") == {"buffers": [1]}


def test_load_falls_back_to_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "apex.json").write_text("{}")
    (tmp_path / "workshop").mkdir()
    monkeypatch.setattr(bench_results, "REPO", tmp_path / "elsewhere")
    monkeypatch.chdir(tmp_path / "workshop")
    assert bench_results.load("apex") == {}


def test_a_missing_or_broken_result_says_what_to_run(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_results, "REPO", tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"bench.run_all --only sac") as err:
        bench_results.load("sac")
    assert "\n" not in str(err.value)
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "sac.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        bench_results.load("sac")


RESULTS = sorted((Path(__file__).resolve().parents[1] / "bench" / "results").glob("*.json"))
META = {"commit", "uncommitted", "config", "versions", "machine", "load_before", "load_after",
        "started", "finished", "command"}


@pytest.mark.parametrize("path", RESULTS, ids=[p.stem for p in RESULTS])
def test_every_committed_result_has_one_shape_with_its_provenance(path):
    """{"meta": {...}, ...results}: the commit whose code produced it (or that it is unknown),
    the config, versions, machine and load; nothing of that left among the results."""
    result = json.loads(path.read_text())
    meta = result["meta"]
    assert META <= meta.keys(), f"{path.name}: meta lacks {sorted(META - meta.keys())}"
    assert meta["commit"].startswith("unknown") or len(meta["commit"].removesuffix("-dirty")) == 40
    assert {"python", "ray", "torch", "gymnasium", "numpy"} <= meta["versions"].keys()
    assert {"cores", "cpu"} <= meta["machine"].keys()
    assert isinstance(meta["load_before"], list) and isinstance(meta["load_after"], list)
    stray = {"config", "load_before", "load_after", "load_average_before_after", "quick"}
    assert not stray & result.keys(), f"{path.name}: {sorted(stray & result.keys())} outside meta"


def test_a_benchmark_writes_its_result_in_that_shape(tmp_path):
    """bench/benchlib.py's Recording: the result's config moves into meta, beside the commit
    (dirty or not, as git says), the versions, machine, loads, times and command line."""
    from bench.benchlib import Recording
    from scripts import provenance

    recording = Recording(packages=("stable-baselines3",))
    written = recording.write({"config": {"quick": True, "seeds": [0]}, "runs": [1, 2]},
                              tmp_path / "x.json")
    assert json.loads((tmp_path / "x.json").read_text()) == written
    meta = written["meta"]
    assert META <= meta.keys() and list(written) == ["meta", "runs"]
    assert meta["config"] == {"quick": True, "seeds": [0]}
    assert meta["commit"] == provenance.stamp()["commit"]
    assert meta["commit"].endswith("-dirty") == bool(meta["uncommitted"])
    assert "stable-baselines3" in meta["versions"] and meta["machine"]["cores"] >= 1
    assert len(meta["load_before"]) == len(meta["load_after"]) == 3
    assert meta["started"] <= meta["finished"] and meta["wall_s"] >= 0
