"""Readings that cannot drift: every registered claim (claims/*.py) is stated, word for word,
where the registry says, and holds on the committed outputs and results. Fast: it reads JSON,
runs nothing (no Ray, no notebook).

The second half shows that the test has teeth: a copy of a committed output with two numbers
swapped, or a result edited so that a reading is reversed, makes that real claim false; a
phrase reworded away makes it unplaced; missing evidence is a false claim with a message.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from claims import readings
from claims.__main__ import check, evidence_at
from claims.evidence import ROOT, Evidence, EvidenceError, Output
from claims.registry import CLAIMS, all_claims, missing_phrases, prose, verdict

ALL = all_claims()


@pytest.mark.parametrize("claim_id", sorted(ALL))
def test_the_reading_is_stated_where_the_registry_says(claim_id):
    missing = missing_phrases(ALL[claim_id])
    assert not missing, (f"{claim_id}: the phrase is gone from its document; if the prose was "
                         "reworded, update the claim's phrase in claims/ (and re-read the "
                         "reading against its evidence):\n  " + "\n  ".join(missing))


@pytest.mark.parametrize("claim_id", sorted(ALL))
def test_the_reading_holds_on_the_committed_outputs(claim_id):
    item = ALL[claim_id]
    seen = verdict(item, Evidence())
    assert seen.ok, (f"{claim_id} no longer holds: {seen.seen}\n  evidence: {item.evidence}\n"
                     "  reword the reading where it stands, or measure it again:\n  "
                     + "\n  ".join(f"{doc}: {phrase!r}" for doc, phrase in item.places()))


def test_every_claim_names_existing_documents_and_says_what_it_reads():
    for item in ALL.values():
        assert item.where and item.evidence, item.id
        for doc, _ in item.places():
            assert (ROOT / doc).is_file(), f"{item.id}: no document {doc}"


def test_the_registry_covers_every_kind_of_document():
    """Registered readings in the notebooks, the decks, the FAQ, the instructor guide, the
    README, the runbook and RESULTS.md, and evidence from notebook outputs and results."""
    documents = {doc for item in ALL.values() for doc, _ in item.places()}
    for expected in ("notebooks/02_parallel_rollouts.ipynb", "notebooks/05_apex.ipynb",
                     "slides/05_apex.md", "slides/FAQ.md", "slides/INSTRUCTOR.md", "README.md",
                     "bench/RESULTS.md", "cluster/README.md"):
        assert expected in documents, expected


# ---------------------------------------------------------------------------------------------
# The test has teeth: changed outputs make real claims false
# ---------------------------------------------------------------------------------------------

def _copy(relative: str, tmp_path: Path) -> Path:
    target = tmp_path / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / relative, target)
    return target


def _one_explorer_uses_the_most_cpu_at_2_ms(root: Path) -> None:
    """A copy of scaling.json under `root` in which one explorer has the most CPU seconds at
    2 ms, so that the reading 'four explorers use the most CPU seconds' is false there."""
    path = _copy("bench/results/scaling.json", root)
    result = json.loads(path.read_text())
    row = next(r for r in result["summary"] if r["latency_ms"] == 2.0 and r["variant"] == "apex-1")
    row["median_cpu_s"] = 1e6
    path.write_text(json.dumps(result))


def test_swapping_two_numbers_of_a_committed_output_makes_the_reading_false(tmp_path):
    """Notebook 02 reads its sync/async run as 'per env step the asynchronous run makes more
    updates'. In a copy of the notebook, swap the two runs' updates and env steps in the
    printed lines: the same claim is now false on the copy, and still true on the committed
    notebook."""
    item = CLAIMS["nb02-async-more-updates-per-env-step"]
    assert verdict(item, Evidence()).ok
    path = _copy("notebooks/02_parallel_rollouts.ipynb", tmp_path)
    nb = json.loads(path.read_text())
    [cell] = [c for c in nb["cells"] if c.get("id") == "f5febdcd"]
    text = "".join(o.get("text", "") if isinstance(o.get("text"), str) else "".join(o["text"])
                   for o in cell["outputs"] if o["output_type"] == "stream")
    run = r"(\d[\d,]* updates, [\d,]+ env steps)"
    sync = re.search(r"(?m)^\s*sync: " + run, text)[1]
    other = re.search(r"async: " + run, text)[1]
    swapped = (text.replace(f" sync: {sync}", "SYNC").replace(f"async: {other}", f"async: {sync}")
               .replace("SYNC", f" sync: {other}"))
    assert swapped != text
    for out in cell["outputs"]:
        if out["output_type"] == "stream":
            out["text"] = swapped
    path.write_text(json.dumps(nb))
    seen = verdict(item, Evidence(tmp_path))
    assert not seen.ok and "async" in seen.seen


def test_a_result_edited_so_that_a_reading_reverses_makes_it_false(tmp_path):
    """RESULTS.md and the FAQ read the scaling ladder as 'four explorers use the most CPU
    seconds of the Ape-X rows at every latency above zero'. Give one explorer the most at one
    latency in a copy of scaling.json: the claim is false there."""
    item = CLAIMS["scaling-four-explorers-most-cpu"]
    assert verdict(item, Evidence()).ok
    _one_explorer_uses_the_most_cpu_at_2_ms(tmp_path)
    seen = verdict(item, Evidence(tmp_path))
    assert not seen.ok and "2.0: 1" in seen.seen


def test_also_checks_every_claim_on_another_commits_results(tmp_path, capsys):
    """`python -m claims --also REV` reads the tree of commit REV as well: in a repository whose
    commit gives one explorer the most CPU seconds at 2 ms, that claim is false at the commit
    (and still true here), and the whole check fails, naming the commit. A REV git does not know
    is one line that says what to give."""
    repo = tmp_path / "repo"
    _one_explorer_uses_the_most_cpu_at_2_ms(repo)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "edited"]):
        subprocess.run(git + args, check=True)
    (tmp_path / "out").mkdir()
    item = CLAIMS["scaling-four-explorers-most-cpu"]
    assert verdict(item, Evidence()).ok
    assert not verdict(item, evidence_at("HEAD", tmp_path / "out", repo)).ok
    assert check(also="HEAD", root=repo) == 1
    printed = capsys.readouterr().out
    assert "FALSE at HEAD" in printed.split("scaling-four-explorers-most-cpu", 1)[1]
    with pytest.raises(SystemExit, match="git cannot archive it.*give a commit"):
        evidence_at("no-such-commit", tmp_path / "out", repo)


def test_a_reworded_phrase_leaves_its_claim_unplaced(tmp_path):
    item = CLAIMS["nb03-one-update-old"]
    assert not missing_phrases(item)
    for doc, _ in item.places():
        target = tmp_path / doc
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text((ROOT / doc).read_text().replace("exactly one update old",
                                                           "one update old, mostly"))
    prose.cache_clear()
    try:
        assert len(missing_phrases(item, tmp_path)) == len(item.places())
    finally:
        prose.cache_clear()


def test_missing_or_reshaped_evidence_is_a_false_claim_with_a_message(tmp_path):
    for claim_id, message in (("nb01-tasks-in-waves", "no notebook"),
                              ("results-soak-held", "no benchmark result")):
        seen = verdict(CLAIMS[claim_id], Evidence(tmp_path))
        assert not seen.ok and message in seen.seen
    path = _copy("bench/results/soak.json", tmp_path)
    path.write_text(json.dumps({"meta": {}, "verdict": {}}))
    seen = verdict(CLAIMS["results-soak-held"], Evidence(tmp_path))
    assert not seen.ok and "another shape" in seen.seen


def test_evidence_reads_numbers_and_names_what_is_missing():
    out = Output("x#y", "sync: 42,360 env steps, −3% and 2.5x\nsync: 7 env steps")
    assert out.grab(r"sync: ([\d,]+) env steps, ([−\d]+)% and ([\d.]+)x") == (42360.0, -3.0, 2.5)
    assert out.grab_all(r"sync: ([\d,]+)") == [(42360.0,), (7.0,)]
    with pytest.raises(EvidenceError, match="x#y: no output matches"):
        out.grab(r"async: (\d+)")
    with pytest.raises(EvidenceError, match="2 rows match"):
        Evidence.row([{"a": 1}, {"a": 1.0}], a=1)
    assert Evidence.row([{"a": 1, "b": 2}, {"a": 2}], a=1.0) == {"a": 1, "b": 2}
    with pytest.raises(EvidenceError, match="0 cells have the id"):
        Evidence().cell("02_parallel_rollouts", "no-such-cell")


# ---------------------------------------------------------------------------------------------
# The census of readings (python -m claims readings)
# ---------------------------------------------------------------------------------------------

def test_the_census_finds_readings_and_tells_registered_from_filled_and_pointers():
    phrases = ["nearly every gradient is exactly one update old"]
    assert readings.classify("With two workers, nearly every gradient is exactly one update "
                             "old.", phrases) == "registered"
    assert readings.classify("Ape-X took <!--fig bench:x y .2f-->0.17<!--/fig--> of DQN's time.",
                             []) == "filled"
    assert readings.classify("Compare the printed factors with your answers.", []) is None
    assert readings.classify("The printed line says which run was faster.", []) == "pointer"
    assert readings.classify("Async is faster than sync on two cores.", []) == "other"
    assert readings.sentences("One. Two is faster.\n\n- a list item\n```\ncode. More.\n```") == [
        "One.", "Two is faster.", "a list item"]


def test_the_census_counts_every_document_and_the_registered_readings():
    text = readings.report()
    assert all(doc in text for doc in readings.DOCUMENTS)
    total = text.splitlines()[-2].split()
    assert total[0] == "all" and int(total[1]) >= len(ALL)


def committed(before: dict, path: str) -> dict:
    """The JSON file `path` as commit `before["committed_in"]` holds it: a reading that names an
    earlier run types that run's figures in, and they are checked against the file committed
    then (a clone without that history cannot check)."""
    import subprocess

    where = f"{before['committed_in']}:{path}"
    shown = subprocess.run(["git", "show", where], cwd=ROOT, capture_output=True, text=True)
    if shown.returncode != 0:
        pytest.skip(f"this clone lacks commit {before['committed_in']}: {shown.stderr.strip()}")
    return json.loads(shown.stdout)


def test_the_earlier_learner_feed_figures_are_that_commits_file():
    """The learner_feed claims compare two machines."""
    from claims.learner import LEARNER_FEED_BEFORE as before
    then = committed(before, "bench/results/learner_feed.json")
    default = next(r for r in then["summary"] if r["setting"] == "default")["updates_s"]
    assert round(default, 1) == before["default"]
    assert round(then["bare_updates_s"], 1) == before["bare"]
    runs = {}
    for run in then["runs"]:
        runs.setdefault(run["setting"], []).append(run["ratio"])
    assert round(max(max(v) - min(v) for v in runs.values()), 2) == before["widest_spread"]


def test_the_earlier_rllib_figures_are_that_commits_file():
    """The rllib reading names the run before it."""
    from claims.results import RLLIB_BEFORE as before
    cart, pend = committed(before, "bench/results/rllib.json")["summary"]
    assert cart["task"] == "CartPole-v1" and cart["rllib_reached"] == before["dqn_reached"]
    steps = cart["rllib_median_env_steps"] / cart["ours_median_env_steps"]
    assert round(steps, 2) == before["dqn_steps_vs_ours"]
    assert pend["task"] == "Pendulum-v1" and pend["rllib_reached"] == before["sac_reached"]
