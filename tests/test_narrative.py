"""Numbers in prose come from outputs: no measured-looking figure typed into a Markdown cell
of a notebook, a deck, the FAQ, the instructor guide or the README.

A measured number (a time, a rate, a speed-up, a percentage, a count of steps or updates) is
printed by the code cell that measured it, as an f-string sentence, and the prose around it
stays qualitative ("the printed line above", "several times faster"). Prose that quotes a
figure drifts the first time the notebook is re-run on another machine, and an attendee who
sees "about half" next to a plot that says 1.00 learns to distrust the material.

What is flagged, in Markdown cells of every notebook (`measured_numbers` below):
- durations: a number with a time unit ("5 s", "136 s", "2.3 ms", "40 µs", "6 min"), and the
  worded ones ("half a minute", "a fraction of a millisecond", "a few seconds");
- percentages ("26%", "13 percent");
- ratios and speed-ups ("2.9x", "3-4×");
- rates ("1,500 transitions/s", "60K steps per second");
- counts of work done: a number with steps, updates, episodes, transitions, iterations, calls,
  evaluations or gradients ("20K steps", "1,000 updates").

The allow-list, kept short on purpose:
1. Code: inline code and fenced blocks are not prose. Settings and arithmetic on settings are
   written as code (`batch_size=512`, `steps_per_worker=4000`, `6 × 0.4 s = 2.4 s`), which
   also tells the reader they are inputs, not results.
2. Cited figures: a paragraph that cites its source (an "et al." reference, an arXiv id or
   `[@key]`) may quote that source's numbers, e.g. a paper's learner batch size.
Everything else needs no entry: years, versions ("Ray 2.60"), notebook numbers and core counts
carry no unit above, so they are never flagged. Hyphenated compounds that name a setting of the
task ("the 500-step time limit", "3-step returns") are not flagged either: the hyphen makes them
an adjective, not a measured count.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from scripts import figures

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

_NUM = r"(?<![\w.-])\d[\d,]*(?:\.\d+)?\s*[kKM]?"
_WORD_NUM = r"\b(?:a|an|one|two|three|four|five|six|ten|half an?|a fraction of an?|a few|several)"
_TIME_UNIT = (r"(?:s|sec|secs|seconds?|ms|µs|us|ns|milliseconds?|microseconds?"
              r"|min|mins|minutes?|h|hours?)\b")
_COUNT_NOUN = (r"(?:env\s+|environment\s+|learner\s+|gradient\s+)?"
               r"(?:steps?|updates?|episodes?|transitions?|iterations?|calls?|evaluations?"
               r"|gradients?|samples?)\b")
PATTERNS = {
    "duration": re.compile(_NUM + r"\s*" + _TIME_UNIT),
    "worded duration": re.compile(_WORD_NUM + r"\s+(?:milli|micro)?(?:seconds?|minutes?|hours?)\b",
                                  re.IGNORECASE),
    "percentage": re.compile(_NUM + r"\s*(?:%|percent\b)"),
    "ratio": re.compile(_NUM + r"\s*(?:[-–]\s*\d+(?:\.\d+)?\s*)?[x×](?![\w])"),
    "rate": re.compile(_NUM + r"\s*(?:[\w-]+\s+)?(?:/\s*s\b|per\s+second\b)"),
    "count": re.compile(_NUM + r"\s+" + _COUNT_NOUN),
}
CITATION = re.compile(r"et al\.|arXiv|\[@[\w-]+\]")
_FENCE = re.compile(r"```.*?```", re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK_TARGET = re.compile(r"\]\([^)]*\)|<[^>\n]*>")


def prose(markdown: str) -> str:
    """The Markdown without code (fenced and inline), link targets and HTML tags."""
    text = _FENCE.sub(" ", markdown)
    text = _INLINE_CODE.sub(" CODE ", text)
    return _LINK_TARGET.sub(" ", text)


def measured_numbers(markdown: str) -> list[tuple[str, str]]:
    """(kind, matched text) for every measured-looking number in one Markdown cell."""
    hits = []
    for paragraph in re.split(r"\n\s*\n", prose(markdown)):
        if CITATION.search(paragraph):
            continue
        for kind, pattern in PATTERNS.items():
            hits += [(kind, " ".join(m.group(0).split())) for m in pattern.finditer(paragraph)
                     if m.group(0).lower() != "a second"]    # "a second time": an ordinal
    return hits


def test_the_detector_flags_measurements():
    for text in ("the local cluster starts in half a minute", "async took 6 s, sync 5 s",
                 "each call costs a fraction of a millisecond", "1 to 2 workers gives 2.9x",
                 "they fall 26% from 1 to 4 explorers", "it reached 475 after 20K steps",
                 "after 1,000 updates", "about 1,500 transitions/s", "~2.3 ms per call",
                 "the learner makes 6 updates per second", "3-4x faster", "half a second later"):
        assert measured_numbers(text), text


def test_the_detector_allows_code_citations_and_plain_numbers():
    for text in ("with `batch_size=512` and `6 × 0.4 s = 2.4 s`", "Ray 2.60 on Python 3.11",
                 "notebook 05 on 2 cores", "the 500-step time limit and 3-step returns",
                 "In 2018 Ape-X ran 360 actors", "about half of the gradients",
                 "Horgan et al. 2018 used a learner batch of 512 and 50 transitions per call",
                 "```python\nrun(steps=20_000)  # 5 s\n```", "[docs](https://x.org/5s)",
                 "eps_i = 0.4^(1 + 7 i/(N-1))", "several times faster",
                 "measure it a second time"):
        assert not measured_numbers(text), (text, measured_numbers(text))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_markdown_quotes_no_measured_numbers(path):
    nb = nbformat.read(path, as_version=4)
    found = [f"cell {i}: {kind} '{text}'"
             for i, cell in enumerate(nb.cells) if cell.cell_type == "markdown"
             for kind, text in measured_numbers(cell.source)]
    assert not found, (
        f"{path.name}: measured-looking numbers in Markdown; print them from the measuring "
        f"cell (an f-string) or word them qualitatively; settings go in `code`:\n  "
        + "\n  ".join(found))


def test_the_benchmark_readings_quote_no_measured_numbers():
    """bench/RESULTS.md: the figures are in the blocks bench/benchreport.py generates from the
    JSON; the reading a person writes around them stays qualitative, so it cannot drift."""
    text = (NOTEBOOKS[0].parents[1] / "bench" / "RESULTS.md").read_text()
    blocks = re.compile(r"<!-- generated: (\w+) .*?<!-- end generated: \1 -->", re.DOTALL)
    assert blocks.search(text), "bench/RESULTS.md has no generated blocks"
    found = measured_numbers(blocks.sub(" ", text))
    assert not found, ("bench/RESULTS.md: measured-looking numbers outside the generated "
                       f"blocks; word the reading qualitatively: {found}")


# ---------------------------------------------------------------------------------------------
# The documents: decks, FAQ, instructor guide, README (scripts/figures.py fills their numbers)
# ---------------------------------------------------------------------------------------------

#: a planned allotment, not a measurement: "(6 min)", "(about 10 min)", "(free; allow 5 min)",
#: "(15 min; the races run in quick mode)"
_PLAN = re.compile(r"\((?:about |allow |[^()\n]*; allow )?\d+ min\b[^()]*\)")


def document_prose(text: str) -> str:
    """A document without what scripts/figures.py writes (markers, generated blocks) and
    without planned minutes: what is left is typed by hand."""
    text = figures.BLOCK.sub(" ", figures.MARKER.sub(" FIGURE ", text))
    return _PLAN.sub(" ", text)


@pytest.mark.parametrize("path", figures.DOCUMENTS, ids=[p.name for p in figures.DOCUMENTS])
def test_documents_type_no_measured_numbers(path):
    """A measured number in a deck, the FAQ, the instructor guide or the README is a marker
    that scripts/figures.py fills from the notebook metadata or benchmark JSON it names."""
    found = measured_numbers(document_prose(path.read_text()))
    assert not found, (
        f"{path.relative_to(ROOT)}: measured-looking numbers typed by hand: {found}; write a "
        "marker <!--fig bench:NAME PATH FORMAT--><!--/fig--> (scripts/figures.py) or word "
        "them qualitatively; planned minutes go in parentheses, '(6 min)'")


def test_every_figure_in_the_documents_is_current():
    stale = figures.stale()
    assert not stale, ("figures in the documents differ from the outputs they name; run "
                       "`python scripts/figures.py fill`:\n  " + "\n  ".join(stale))


def test_the_documents_use_markers_and_the_agenda_table():
    """The fill is in use: the guide's agenda table and at least one benchmark figure."""
    text = {p.name: p.read_text() for p in figures.DOCUMENTS}
    assert "<!-- generated: agenda -->" in text["INSTRUCTOR.md"]
    sources = [m["source"] for t in text.values() for m in figures.MARKER.finditer(t)]
    assert any(s.startswith("bench:") for s in sources)
    assert any(s.startswith("nb:") for s in sources)


def test_every_slot_keeps_time_for_slides_beside_exercises_and_the_run():
    """A deck's `minutes:` covers its "Your turn"/demo minutes, its notebook's run time in the
    day and at least SLIDES_MIN minutes of slides."""
    short = [f"{nb}: slot {slot}, exercises {ex}, run {run:.1f} min"
             for nb, slot, ex, run, left in figures.agenda_rows() if left < figures.SLIDES_MIN]
    assert not short, "slots too short for their exercises and run: " + "; ".join(short)


def test_a_marker_is_filled_from_its_source_and_a_wrong_one_is_named(tmp_path):
    text = ("took <!--fig nb:07_rllib duration_s .0f-->1<!--/fig--> s; "
            "<!--fig bench:scaling summary[latency_ms=2,variant=dqn].seeds d-->0<!--/fig-->")
    meta = figures.notebook_meta("07_rllib")
    assert figures.filled(text).startswith(f"took <!--fig nb:07_rllib duration_s .0f-->"
                                          f"{meta['duration_s']:.0f}<!--/fig--> s")
    for source, message in (("nb:99_none duration_s .0f", "no notebook"),
                            ("bench:scaling summary[variant=dqn].seeds d", "matches"),
                            ("bench:scaling nothing d", "no key 'nothing'"),
                            ("disk:x y z", "the kind is nb: or bench:")):
        with pytest.raises(figures.FigureError, match=message):
            figures.filled(f"<!--fig {source}-->?<!--/fig-->")
    page = tmp_path / "page.md"
    page.write_text("<!--fig nb:07_rllib duration_s .0f-->1<!--/fig-->")
    assert figures.stale([page]) and "(1 -> " in figures.stale([page])[0]
