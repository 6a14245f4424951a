"""The day by measurement (scripts/day.py): what it counts, the banner's split, and every
notebook within its slot."""

import datetime as dt
import json

import nbformat
import pytest

import scripts.day as day
from course_lib.teaching import bench_results


def timed(cell, seconds: float):
    """`cell` with nbclient's timing record of a run of `seconds`."""
    start = dt.datetime(2026, 11, 26, 10, tzinfo=dt.UTC)
    cell.metadata["execution"] = {
        "iopub.execute_input": start.isoformat().replace("+00:00", "Z"),
        "shell.execute_reply": (start + dt.timedelta(seconds=seconds)).isoformat()
        .replace("+00:00", "Z")}
    return cell


def small_notebook(folder):
    """A notebook `99_day` with its deck: each kind of cell the day counts, or leaves out."""
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    shown = nbformat.v4.new_output("execute_result", data={"text/plain": "def f():\n\n    pass"})
    cells = [md("one two three four"),                                   # 4 words
             md("the prompt of an exercise, in its minutes"),
             timed(code("stub", metadata={"tags": ["exercise"]}), 1.0),
             code("solution\nlines", metadata={"tags": ["solution"]}),
             timed(code("check(x)", metadata={"tags": ["check"]}), 2.0),
             timed(code("a = 1\n\nb = 2"), 30.0),                         # 2 lines
             timed(code("show_source(f)", outputs=[shown]), 0.5),        # 1 + 2 lines
             timed(code("assert a", metadata={"tags": ["ci"]}), 9.0),
             md("a capstone's prompt", metadata={"tags": ["prompt"]}),
             code("untimed = 1"),                                        # 1 line, no time
             md("# Appendix (optional)"),
             timed(code("not = 'in the day'"), 100.0),
             timed(code("ray.shutdown()"), 3.5)]                         # 1 line
    (folder / "notebooks").mkdir()
    (folder / "slides").mkdir()
    path = folder / "notebooks" / "99_day.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    (folder / "slides" / "99_day.md").write_text(
        "minutes: 10\n---\n## Your turn: this (3 min)\n---\n## Demo (2 min)\n")
    return path


def test_the_day_counts_prose_code_exercises_and_recorded_run_time(tmp_path, monkeypatch):
    path = small_notebook(tmp_path)
    monkeypatch.setattr(day, "ROOT", tmp_path)
    monkeypatch.setattr(day, "quiz_words", lambda stem: 6)
    m = day.material(path)
    assert m.slot == 10 and m.exercises == 5
    assert m.reading == pytest.approx((4 + 6) / day.WORDS_PER_MIN)
    assert m.code == pytest.approx((2 + 3 + 1 + 1) / day.LINES_PER_MIN)
    assert m.run == pytest.approx((1 + 2 + 30 + 0.5 + 3.5) / 60)
    assert m.untimed == 1
    assert m.left == pytest.approx(10 - m.total)


def test_an_appendix_that_ends_on_its_reading_leaves_it_out_of_the_day(tmp_path, monkeypatch):
    """08's appendix ends on a Markdown reading, not on `ray.shutdown()`: none of it counts."""
    path = small_notebook(tmp_path)
    nb = nbformat.read(path, as_version=4)
    nb.cells[-1] = nbformat.v4.new_markdown_cell("a closing reading " * 50)
    nbformat.write(nb, path)
    monkeypatch.setattr(day, "ROOT", tmp_path)
    monkeypatch.setattr(day, "quiz_words", lambda stem: 6)
    m = day.material(path)
    assert m.reading == pytest.approx((4 + 6) / day.WORDS_PER_MIN)
    assert m.run == pytest.approx((1 + 2 + 30 + 0.5) / 60)


def test_the_banner_splits_the_recorded_run(tmp_path):
    path = small_notebook(tmp_path)
    nb = json.loads(path.read_text())
    nb["metadata"]["course"] = {"duration_s": 150.0, "executed": "2026-11-26",
                                "machine": "2 CPUs"}
    nb["cells"][5]["metadata"]["tags"] = [bench_results.QUICK_BY_DEFAULT]
    said = bench_results.runtime("99_day", nb)
    assert said.startswith("Run time: this notebook ran in 2.5 min in full mode (2026-11-26, "
                           "2 CPUs): 0.1 min in the day's sections; 0.5 min in the cells the "
                           "attendee edition runs in quick mode by default; set FULL_RACE")
    assert "1.7 min in the optional appendix" in said
    assert "1 cell(s) have not run in full mode since they were written" in said
    nb["cells"][5]["id"] = "race"
    nb["metadata"]["course"]["attendee_s"] = {"race": 6.0}
    said = bench_results.runtime("99_day", nb)
    assert ("0.5 min in the cells the attendee edition runs in quick mode by default (there: "
            "0.1 min); set FULL_RACE") in said


def test_the_day_counts_a_quick_by_default_cell_as_long_as_the_attendee_edition_ran_it(
        tmp_path, monkeypatch):
    path = small_notebook(tmp_path)
    monkeypatch.setattr(day, "ROOT", tmp_path)
    monkeypatch.setattr(day, "quiz_words", lambda stem: 6)
    nb = json.loads(path.read_text())
    nb["cells"][5]["metadata"]["tags"] = [bench_results.QUICK_BY_DEFAULT]
    path.write_text(json.dumps(nb))
    assert day.material(path).run == pytest.approx((1 + 2 + 30 + 0.5 + 3.5) / 60)  # an upper bound
    nb["cells"][5]["id"] = "race"
    nb["metadata"]["course"] = {"attendee_s": {"race": 6.0}}
    path.write_text(json.dumps(nb))
    assert day.material(path).run == pytest.approx((1 + 2 + 6 + 0.5 + 3.5) / 60)


def test_the_band_of_a_benchmark_is_its_seeds_that_reached_the_goal():
    line = bench_results.expected_band("apex", "apex-4")
    runs = [r for r in bench_results.load("apex")["runs"] if r["variant"] == "apex-4"]
    steps = sorted(r["env_steps"] for r in runs if r["reached"])
    assert f"{steps[0]:,}-{steps[-1]:,} env steps" in line
    assert bench_results.expected_band("no_such_result").startswith("no benchmark result")


def test_every_notebook_fits_its_slot():
    over = [f"{m.notebook}: {m.total:.1f} min for a slot of {m.slot}"
            for m in map(day.material, day.notebooks()) if m.left < 0]
    assert not over, "material over the slot (python scripts/day.py): " + "; ".join(over)
