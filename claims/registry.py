"""The registry: a claim is a reading of a measured result, the exact phrases that state it in
the documents, and a predicate over the committed outputs and results that must hold.

    @claim("nb03-sync-first",
           {"notebooks/03_parameter_server.ipynb": "the synchronous run can finish first"},
           "the printed seconds of both runs (cell 1f8cc69b)")
    def _(e):
        (sync_s,), (async_s,) = e.cell("03_parameter_server", "1f8cc69b").grab_all(
            r"updates in\\s+([\\d.]+) s")
        return holds(sync_s < async_s, f"sync {sync_s} s, async {async_s} s")

`where` maps a document to the phrase (or phrases) that state the reading there. A phrase is
matched after collapsing whitespace, so a line break in the Markdown does not matter; in a
notebook only the Markdown cells count. When the prose is edited so that a phrase is gone, the
claim fails until the registry is updated with it: the registry cannot drift from the prose.
The predicate returns `holds(condition, seen)`: whether the reading is true of the committed
evidence, and what was seen, which the test prints when it is not.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from claims.evidence import ROOT, Evidence, EvidenceError


@dataclass(frozen=True)
class Verdict:
    ok: bool
    seen: str


def holds(condition: bool, seen: str) -> Verdict:
    """A predicate's answer: is the reading true, and what the evidence says."""
    return Verdict(bool(condition), seen)


@dataclass(frozen=True)
class Claim:
    id: str
    where: dict[str, tuple[str, ...]]     # document (repository path) -> phrases stating it
    evidence: str                          # in words: what the predicate reads
    predicate: Callable[[Evidence], Verdict]

    def places(self) -> list[tuple[str, str]]:
        return [(doc, phrase) for doc, phrases in self.where.items() for phrase in phrases]


CLAIMS: dict[str, Claim] = {}
#: the modules that register claims, one per group of documents
MODULES = ("lessons", "apex", "later", "results", "learner", "scaling", "outside")


def claim(claim_id: str, where: dict[str, str | tuple[str, ...]], evidence: str):
    """Register the decorated predicate as the claim `claim_id` (a decorator)."""
    def register(predicate: Callable[[Evidence], Verdict]) -> Callable[[Evidence], Verdict]:
        if claim_id in CLAIMS:
            raise ValueError(f"claim {claim_id!r} is registered twice")
        CLAIMS[claim_id] = Claim(claim_id, {doc: (p,) if isinstance(p, str) else tuple(p)
                                            for doc, p in where.items()}, evidence, predicate)
        return predicate
    return register


def printed(claim_id: str, where: dict[str, str | tuple[str, ...]], stem: str, cell_id: str,
            pattern: str, test: Callable[..., bool]) -> None:
    """Register the simplest claim: the numbers one notebook cell printed (the groups of the
    first match of `pattern`) pass `test(*numbers)`."""
    @claim(claim_id, where, f"notebooks/{stem}.ipynb#{cell_id}, the numbers of {pattern!r}")
    def _(e: Evidence) -> Verdict:
        numbers = e.cell(stem, cell_id).grab(pattern)
        return holds(test(*numbers), "printed " + ", ".join(f"{n:g}" for n in numbers))


def squeezed(text: str) -> str:
    return " ".join(text.split())


@cache
def prose(document: str, root: Path = ROOT) -> str:
    """A document's prose, whitespace collapsed: a notebook's Markdown cells, any other file
    whole."""
    path = root / document
    if not path.is_file():
        return ""
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text())["cells"]
        text = "\n\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                           for c in cells if c["cell_type"] == "markdown")
    else:
        text = path.read_text()
    return squeezed(text)


def missing_phrases(item: Claim, root: Path = ROOT) -> list[str]:
    """The places of `item` whose phrase is not in its document (or the document is gone)."""
    return [f"{doc}: {phrase!r}" for doc, phrase in item.places()
            if squeezed(phrase) not in prose(doc, root)]


def verdict(item: Claim, evidence: Evidence) -> Verdict:
    """The claim's predicate on `evidence`; evidence that is missing or has another shape
    (a renamed key, a reworded output line) makes a false claim, said so."""
    try:
        return item.predicate(evidence)
    except EvidenceError as err:
        return Verdict(False, f"evidence missing: {err}")
    except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError) as err:
        return Verdict(False, f"evidence has another shape: {type(err).__name__} {err}")


def all_claims() -> dict[str, Claim]:
    """Every registered claim (importing the modules that register them)."""
    for name in MODULES:
        importlib.import_module(f"claims.{name}")
    return CLAIMS


def registered_phrases() -> dict[str, list[str]]:
    """document -> the phrases registered there."""
    out: dict[str, list[str]] = {}
    for item in all_claims().values():
        for doc, phrase in item.places():
            out.setdefault(doc, []).append(squeezed(phrase))
    return out
