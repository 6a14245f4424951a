"""Numbers in notebook prose come from outputs: no measured-looking figure in a Markdown cell.

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

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))

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
