"""course_lib.bench_results: notebooks read a benchmark's JSON, or get a one-line fix."""

import json

import pytest

from course_lib import bench_results


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
    with pytest.raises(FileNotFoundError, match=r"bench/run_all.py --only sac") as err:
        bench_results.load("sac")
    assert "\n" not in str(err.value)
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "sac.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        bench_results.load("sac")
