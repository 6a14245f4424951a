"""What a claim is checked against: the committed outputs of the notebooks and the committed
benchmark results, read from one checkout (`Evidence(root)`), never re-run.

    e = Evidence()                                   # this repository
    e.bench("scaling")["summary"]                    # bench/results/scaling.json
    e.row(e.bench("apex")["summary"], variant="dqn") # the one list item whose fields match
    out = e.cell("02_parallel_rollouts", "f5febdcd") # a notebook cell's outputs, by cell id
    out.grab(r"sync: ([\\d,]+) updates")             # (20.0,): the numbers of the first match
    out.grab_all(r"(\\d+) explorers?")               # [(1.0,), (2.0,), (4.0,)]
    out.values(sync=r"sync: ([\\d,]+) updates")       # {"sync": 20.0}

A cell's text is everything it printed or displayed: streams, `text/plain`, and the visible text
of `text/html` (a live progress bar's last state, a checker's verdict). Numbers are read with
their thousands separators and signs ("42,360" -> 42360.0, "-3%" -> -3.0). Anything missing
(a result file, a cell id, a pattern that does not match) raises `EvidenceError` with one line
that says what and where, so a claim whose evidence moved fails with a message, not a traceback.

A test points `Evidence` at a copy of the repository's outputs in a temporary folder
(`Evidence(tmp_path)`) to show that a changed output makes a claim fail.
"""

from __future__ import annotations

import html
import json
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NUMBER = re.compile(r"[-+−]?\d[\d,]*(?:\.\d+)?")


class EvidenceError(Exception):
    """Evidence a claim names is missing or does not have the expected shape."""


def number(text: str) -> float:
    """ "42,360" -> 42360.0, "−3" -> -3.0 (the minus sign of a typeset number too)."""
    return float(text.replace(",", "").replace("−", "-"))


class Output:
    """The text a notebook cell printed or displayed, with helpers to read numbers from it."""

    def __init__(self, where: str, text: str):
        self.where, self.text = where, text

    def grab(self, pattern: str) -> tuple[float, ...]:
        """The numbers of the groups of the first match of `pattern` (re.search)."""
        match = re.search(pattern, self.text)
        if match is None:
            raise EvidenceError(f"{self.where}: no output matches {pattern!r}")
        return tuple(number(g) for g in match.groups())

    def grab_all(self, pattern: str) -> list[tuple[float, ...]]:
        """The numbers of the groups of every match of `pattern`, in order (at least one)."""
        found = [tuple(number(g) for g in m.groups()) for m in re.finditer(pattern, self.text)]
        if not found:
            raise EvidenceError(f"{self.where}: no output matches {pattern!r}")
        return found

    def values(self, **patterns: str) -> dict[str, float]:
        """{name: the number of the one group of each pattern's first match}."""
        return {name: self.grab(pattern)[0] for name, pattern in patterns.items()}

    def pair(self, row: str) -> dict[str, tuple[float, ...]]:
        """{"sync": ..., "async": ...}: the numbers of `row` (a pattern with `{}` where the
        name goes) on the line of each of two runs that a cell printed one under the other."""
        return {"sync": self.grab(r"(?m)^\s*" + row.format("sync")),
                "async": self.grab(row.format("async"))}

    def has(self, text: str) -> bool:
        """Whether `text` occurs in the output (whitespace as printed)."""
        return text in self.text


def _visible(markup: str) -> str:
    """The text an HTML output shows: tags and scripts dropped, entities decoded."""
    markup = re.sub(r"<(script|style)\b.*?</\1>", " ", markup, flags=re.DOTALL)
    return html.unescape(re.sub(r"<[^>]+>", " ", markup))


def output_text(cell: dict) -> str:
    """Everything one code cell printed or displayed, in order."""
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(_joined(out.get("text", "")))
        elif "data" in out:
            data = out["data"]
            if "text/html" in data:
                parts.append(_visible(_joined(data["text/html"])))
            elif "text/plain" in data:
                parts.append(_joined(data["text/plain"]))
        elif out.get("output_type") == "error":
            parts.append(f"{out.get('ename')}: {out.get('evalue')}")
    return "\n".join(parts)


def _joined(text) -> str:
    return "".join(text) if isinstance(text, list) else text


class Evidence:
    """The committed outputs and results of the checkout at `root`."""

    def __init__(self, root: Path = ROOT):
        self.root = Path(root)

    @cache  # noqa: B019 (one Evidence per checkout; the files do not change while it lives)
    def notebook(self, stem: str) -> dict:
        """notebooks/<stem>.ipynb as JSON."""
        path = self.root / "notebooks" / f"{stem}.ipynb"
        if not path.is_file():
            raise EvidenceError(f"no notebook {path}")
        return json.loads(path.read_text())

    def meta(self, stem: str) -> dict:
        """The notebook's `course` metadata (mode, commit, duration_s, ...)."""
        return self.notebook(stem)["metadata"].get("course", {})

    def cell(self, stem: str, cell_id: str) -> Output:
        """The outputs of the cell with id `cell_id` of notebooks/<stem>.ipynb."""
        cells = [c for c in self.notebook(stem)["cells"] if c.get("id") == cell_id]
        if len(cells) != 1:
            raise EvidenceError(f"notebooks/{stem}.ipynb: {len(cells)} cells have the id "
                                f"{cell_id!r}, not one")
        return Output(f"notebooks/{stem}.ipynb#{cell_id}", output_text(cells[0]))

    @cache  # noqa: B019
    def bench(self, name: str) -> dict:
        """bench/results/<name>.json."""
        path = self.root / "bench" / "results" / f"{name}.json"
        if not path.is_file():
            raise EvidenceError(f"no benchmark result {path}")
        return json.loads(path.read_text())

    def file(self, relative: str) -> str:
        """The text of a committed file (a config, a runbook's table)."""
        path = self.root / relative
        if not path.is_file():
            raise EvidenceError(f"no file {path}")
        return path.read_text()

    @staticmethod
    def row(rows: list[dict], **fields) -> dict:
        """The one item of `rows` whose fields equal `fields` (numbers compared as numbers)."""
        def same(a, b) -> bool:
            return a == b or (isinstance(a, int | float) and isinstance(b, int | float)
                              and float(a) == float(b))
        found = [r for r in rows if all(same(r.get(k), v) for k, v in fields.items())]
        if len(found) != 1:
            raise EvidenceError(f"{len(found)} rows match {fields}, not one")
        return found[0]
