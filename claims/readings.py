"""Where the documents read measured results, and how each reading is kept true.

A *reading candidate* is a sentence of a document's prose with a word that compares or
measures ("faster", "fewer", "grows", "reaches", "about", ...). Each one is counted as

- **registered**: it holds a phrase of a registered claim (claims/*.py), tested by
  tests/test_claims.py against the committed outputs;
- **filled**: it holds a value that scripts/figures.py fills from a result (`<!--fig ...-->`);
- **pointer**: it sends the reader to a printed output instead of reading it ("the printed
  line", "the notebook prints");
- **other**: none of these. Most are not readings of a result at all (how an algorithm works,
  what a setting does); the rest are readings that still need a claim or a rewording.
  `python -m claims readings --list` prints them, document by document, for that review.

Readings printed by the code itself are counted apart: the lines of notebook outputs with such a
word (a cell's f-string verdict, "speed-up from chunking: 434x"), and the rows of
bench/RESULTS.md's generated targets table (each one a verdict the report writes: met or MISSED).
The word list is deliberately wide: a candidate that is not a reading costs a glance, a reading
that the list misses is never looked at.
"""

from __future__ import annotations

import json
import re
from collections import Counter

from claims.evidence import ROOT, output_text
from claims.registry import prose, registered_phrases, squeezed

#: the documents whose prose may read a result
DOCUMENTS = (sorted(str(p.relative_to(ROOT)) for p in (ROOT / "notebooks").glob("[0-9]*.ipynb"))
             + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "slides").glob("*.md"))
             + ["README.md", "CONTRIBUTING.md", "bench/RESULTS.md"])
WORDS = re.compile(
    r"\b(faster|slower|quicker|fewer|more|less|grows?|grew|falls?|fell|drops?|rises?|overlap\w*"
    r"|reach(?:es|ed)?|beats?|ahead|behind|level|about|twice|half|times|far|closer|wins?"
    r"|dominates?|bottleneck|exceeds?|higher|lower|larger|smaller|cheaper|costlier"
    r"|most|least|nearly|almost|every seed|on par)\b", re.IGNORECASE)
POINTER = re.compile(r"\bprint(?:s|ed)?\b|the (?:table|figure|plot)s? (?:above|below)",
                     re.IGNORECASE)
_CODE = re.compile(r"```.*?```", re.DOTALL)
_GENERATED = re.compile(r"<!-- generated: (\w+) .*?<!-- end generated: \1 -->", re.DOTALL)


def sentences(text: str) -> list[str]:
    """`text` (Markdown) cut into sentences: at a sentence end, a blank line or a list item."""
    text = _GENERATED.sub("\n\n", _CODE.sub("\n\n", text))
    text = re.sub(r"(?m)^\s*(?:[-*]|\d+\.)\s+|^\s*#+\s+|^\|.*\|$", "\n\n", text)
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z*`(])|\n\s*\n", text)
    return [squeezed(p) for p in parts if p.strip()]


def _states(sentence: str, phrase: str) -> bool:
    """Whether a registered phrase is (part of) this sentence: the whole phrase, the sentence
    inside a longer phrase, or a phrase that runs on into the next sentence."""
    if phrase in sentence or sentence in phrase:
        return True
    return len(phrase) >= 40 and (phrase[:40] in sentence or phrase[-40:] in sentence)


def classify(sentence: str, phrases: list[str]) -> str | None:
    """registered, filled, pointer or other; None when the sentence reads nothing."""
    if any(_states(sentence, p) for p in phrases):
        return "registered"
    if "<!--fig " in sentence:
        return "filled"
    if not WORDS.search(sentence):
        return None
    return "pointer" if POINTER.search(sentence) else "other"


def document_text(document: str) -> str:
    """The Markdown of a document (a notebook's Markdown cells, joined by blank lines)."""
    path = ROOT / document
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text())["cells"]
        return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return path.read_text()


def candidates(document: str) -> list[tuple[str, str]]:
    """(kind, sentence) for every reading candidate of one document."""
    phrases = registered_phrases().get(document, [])
    out = []
    for sentence in sentences(document_text(document)):
        kind = classify(sentence, [p for p in phrases if p in prose(document)])
        if kind:
            out.append((kind, sentence))
    return out


def printed_readings() -> int:
    """Lines of notebook outputs and target rows of RESULTS.md that print a reading."""
    lines = 0
    for document in DOCUMENTS:
        if document.endswith(".ipynb"):
            for cell in json.loads((ROOT / document).read_text())["cells"]:
                if cell["cell_type"] == "code":
                    lines += sum(bool(WORDS.search(line) and re.search(r"\d", line))
                                 for line in output_text(cell).splitlines())
    results = (ROOT / "bench" / "RESULTS.md").read_text()
    block = re.search(r"<!-- generated: targets .*?<!-- end generated: targets -->", results,
                      re.DOTALL)
    lines += len(re.findall(r"(?m)^\| .* \| (?:met|MISSED) \|", block.group(0) if block else ""))
    return lines


def report(listing: bool = False) -> str:
    """Counts per document (and with `listing`, the 'other' sentences)."""
    total: Counter = Counter()
    lines = [f"{'document':<38} {'registered':>10} {'filled':>7} {'pointer':>8} {'other':>6}"]
    listed = []
    for document in DOCUMENTS:
        found = candidates(document)
        counts = Counter(kind for kind, _ in found)
        total.update(counts)
        lines.append(f"{document:<38} {counts['registered']:>10} {counts['filled']:>7} "
                     f"{counts['pointer']:>8} {counts['other']:>6}")
        if listing:
            listed += [f"{document}: {s}" for kind, s in found if kind == "other"]
    lines.append(f"{'all':<38} {total['registered']:>10} {total['filled']:>7} "
                 f"{total['pointer']:>8} {total['other']:>6}")
    lines.append(f"readings printed by code (notebook output lines, RESULTS.md targets): "
                 f"{printed_readings()}")
    return "\n".join(lines + ([""] + listed if listing else []))

