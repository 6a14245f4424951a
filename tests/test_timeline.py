"""course_lib.viz.timeline on a small hand-made Chrome trace in ray.timeline()'s format."""

import pytest

from course_lib.viz import timeline


def call(cat, tid, ts_s, dur_s, name=None):
    method = cat.rsplit(".", 1)[-1]
    return {"cat": cat, "name": name or method, "pid": "192.0.2.2", "tid": tid,
            "ts": ts_s * 1e6, "dur": dur_s * 1e6, "ph": "X", "cname": "generic_work",
            "args": {"name": method, "task_id": "00"}}


TRACE = [
    call("task::apex-replay:ReplayStore.__init__", "worker:r", 99.0, 0.5),
    call("task::ApexLearnerActor.train", "worker:l", 100.0, 1.0),
    call("task::ApexLearnerActor.train", "worker:l", 101.5, 0.5),
    call("task::Explorer.run", "worker:e2", 100.5, 1.0),
    call("task::Explorer.run", "worker:e1", 100.2, 0.3),
    call("task::ReplayStore.sample", "worker:r", 100.1, 0.2),
    call("task::ReplayStore.add", "worker:r", 100.2, 0.2),      # overlaps the sample
    call("task::Evaluator.evaluate", "worker:v", 10.0, 1.0),    # long before `since`
    # phases of a call, the driver's submissions and a plain task are not actor calls
    {"cat": "task:execute", "name": "task:execute", "tid": "worker:l", "ts": 100e6,
     "dur": 1e6, "ph": "X"},
    {"cat": "submit_task", "name": "submit_task", "tid": "driver:01", "ts": 100e6,
     "dur": 1e5, "ph": "X"},
    call("task::rollout", "worker:t", 100.0, 1.0, name="rollout"),
]


def test_actor_spans_one_row_per_actor_in_role_order():
    spans = timeline.actor_spans(TRACE, since=50.0)
    assert list(spans) == ["Explorer 1", "Explorer 2", "ReplayStore", "ApexLearnerActor"]
    assert [s.method for s in spans["ReplayStore"]] == ["sample", "add"]   # __init__ skipped
    learner = spans["ApexLearnerActor"]
    assert learner[0].start == pytest.approx(0.0)                          # first call kept
    assert learner[1].start == pytest.approx(1.5) and learner[1].duration == pytest.approx(0.5)
    assert spans["Explorer 1"][0].start == pytest.approx(0.2)              # the earlier one


def test_busy_fractions_merge_overlaps_and_clip_to_the_window():
    spans = timeline.actor_spans(TRACE, since=50.0)
    assert timeline.window(spans) == pytest.approx((0.0, 2.0))
    busy = timeline.busy_fractions(spans)
    assert busy["ApexLearnerActor"] == pytest.approx(0.75)          # 1.5 s of 2 s
    assert busy["ReplayStore"] == pytest.approx(0.15)      # 0.1-0.4 s, overlap counted once
    assert busy["Explorer 2"] == pytest.approx(0.5)
    between = timeline.busy_fractions(spans, between=(0.0, 1.0))
    assert between["ApexLearnerActor"] == pytest.approx(1.0)


def test_calls_under_way_at_since_are_cut_to_start_there():
    spans = timeline.actor_spans(TRACE, since=100.6)
    assert spans["ApexLearnerActor"][0].start == pytest.approx(0.0)   # 100.0-101.0 -> 100.6-101.0
    assert spans["ApexLearnerActor"][0].duration == pytest.approx(0.4)
    assert "Explorer 1" not in spans                                # ended at 100.5


def test_without_since_old_calls_stay_and_init_can_be_kept():
    spans = timeline.actor_spans(TRACE, skip=())
    assert "Evaluator" in spans and spans["ReplayStore"][0].method == "__init__"


def test_plot_timeline_draws_one_row_per_actor():
    import matplotlib

    matplotlib.use("Agg")
    spans = timeline.actor_spans(TRACE, since=50.0)
    ax = timeline.plot_timeline(spans, title="t")
    assert [t.get_text() for t in ax.get_yticklabels()] == list(reversed(spans))
    assert {t.get_text() for t in ax.get_legend().get_texts()} == {"add", "run", "sample",
                                                                   "train"}


def test_an_empty_trace_says_what_to_do():
    assert timeline.actor_spans([]) == {}
    with pytest.raises(ValueError, match="run something first"):
        timeline.window({})
