"""`make fresh`: every committed output whose code has changed since the commit it records.

    python scripts/fresh.py [--report]

An output is a notebook (its metadata `course.commit`, written by `scripts/notebooks.py
execute`), a benchmark result `bench/results/*.json` or data a notebook reads,
`notebooks/figures/*.json` (their `meta.commit`, written by `bench/benchlib.py`), or a figure
drawn from one of those (`bench/figures/*.png`, `notebooks/figures/*.svg`: the commit of the
JSON it is drawn from). Its code is:

- a notebook: `course_lib/**.py`, the notebook's own code cells, and each benchmark result
  it loads (`bench_results.load("NAME")` in a code cell, or `load("NAME")` in a course_lib
  module the cells import, as `ladder.committed_rung` does: its outputs print that JSON, so a
  result re-measured since the notebook ran makes the notebook stale: compared with the
  fingerprint `execute` recorded, `course.data`, or for a notebook run before those, with the
  result at its commit). So `make refresh`, which re-runs the benchmarks before it executes
  the notebooks, leaves every output fresh before anything is committed;
- a result: the code of `course_lib/` and `bench/` that its benchmark `bench/NAME.py` (for
  data in notebooks/figures, the module its `meta.command` ran) can run, directly or through
  others: whole files, or of a module it reaches only by `from m import a, b`, what importing
  those names runs (`scripts/imports.py`, `import_slices`), so that a change the benchmark
  cannot run (a notebook exercise's checker, another benchmark's entry point) leaves its result
  fresh; a result with no such module: all of `course_lib/**.py` and `bench/**.py`;
- a figure: its result's code and `bench/plots.py`, which draws it from the result (the one
  module `plots.py` imports, `bench/scaling_summary.py`, is the scaling result's own).

What counts as an import (strings, f-strings, `python -m`) is `scripts/imports.py`'s to say.

The code is compared at the recorded commit and in the working tree with comments and
docstrings ignored (`ast.dump` of each file, or of its slice, with its docstrings stripped; a
notebook's code cells one by one, IPython's `%` and `!` lines left out), so rewording a
docstring does not make an output stale and changing a statement does. An output that records
no commit is listed as "no provenance"; one that ran on uncommitted code (`<commit>-dirty`) as
stale when a file it recorded as uncommitted (`meta.uncommitted`) is one it depends on, or when
it recorded none.

Exit status 1 when an output is stale or has no provenance, 0 when every output is fresh;
`--report` always exits 0 (CI prints the list without failing).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

if __package__:          # `python -m scripts.fresh`, or imported (the tests)
    from scripts.imports import code_slice, import_closure, import_slices, imported
    from scripts.provenance import CODE, DIRTY, ROOT, fingerprint, git
else:                    # `python scripts/fresh.py`: Python puts this folder first on sys.path
    from imports import code_slice, import_closure, import_slices, imported
    from provenance import CODE, DIRTY, ROOT, fingerprint, git

NOTEBOOK_CODE = ("course_lib",)
RESULT_CODE = CODE


@dataclass
class Output:
    """A committed output, the commit it records (None: none) and the code it depends on."""

    path: str                      # relative to the repository
    commit: str | None
    code: tuple[str, ...]          # folders whose .py files it depends on
    own: str | None = None         # a notebook: itself (its code cells are code too)
    recorded: str = ""             # what it records instead of a commit, if anything
    data: tuple[str, ...] = ()     # files it reads, compared whole (a notebook's bench results)
    only: frozenset[str] | None = None   # of `code`, only these files count (None: all)
    slices: dict | None = None     # of `only`, the names whose code counts (None: whole files)
    seen: dict[str, str | None] | None = None   # fingerprints of `data` when it ran, if recorded
    uncommitted: tuple[str, ...] | None = None   # files uncommitted when it ran (None: unknown)

    def depends_on(self, path: str) -> bool:
        """Whether `path` is part of what this output depends on: its code (of `code`'s folders,
        the files of `only` if given), itself, or the data it reads."""
        in_code = any(path.startswith(folder.rstrip("/") + "/") for folder in self.code)
        return (path == self.own or path in self.data
                or (in_code and (self.only is None or path in self.only)))


#: a notebook's use of a benchmark result: `bench_results.load("apex")`
LOADS_RESULT = re.compile(r"bench_results\.load\(\s*[\"'](\w+)[\"']")
#: a notebook's use of data in notebooks/figures: its file name, `FIGURES / "profile.json"`
NAMES_DATA = re.compile(r"[\"'](\w+\.json)[\"']")


def code_cells(text: str) -> list[str]:
    """The sources of a notebook's code cells."""
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for c in json.loads(text).get("cells", []) if c.get("cell_type") == "code"]


#: a library module's own use of one: `load("scaling")` (`course_lib.teaching.ladder`)
LIBRARY_LOADS = re.compile(r"\bload\(\s*[\"'](\w+)[\"']\)")


def results_loaded(text: str, root: Path = ROOT) -> tuple[str, ...]:
    """The data files a notebook's code cells read: the bench/results/*.json they load, those
    that the course_lib modules they import load themselves (notebook 05's capstone prints the
    committed ladder through `ladder.committed_rung`), and each JSON of notebooks/figures they
    name."""
    code = "\n".join(code_cells(text))
    names = set(LOADS_RESULT.findall(code))
    for path in modules_imported(code, root):
        names |= set(LIBRARY_LOADS.findall((root / path).read_text()))
    found = {f"bench/results/{name}.json" for name in names
             if (root / "bench" / "results" / f"{name}.json").is_file()}
    found |= {f"notebooks/figures/{name}" for name in NAMES_DATA.findall(code)
              if (root / "notebooks" / "figures" / name).is_file()}
    return tuple(sorted(found))


def modules_imported(code: str, root: Path) -> set[str]:
    """The course_lib files that notebook code can run: the import closure of each module it
    imports (IPython's `%` and `!` lines left out)."""
    lines = [line for line in code.splitlines() if not line.lstrip().startswith(("%", "!"))]
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return set()
    names = {name for node in ast.walk(tree) for name in imported(node, "")
             if name.startswith("course_lib")}
    return {path for name in names for path in import_closure(name, root) or ()
            if path.startswith("course_lib/")}


def strip_docstrings(tree: ast.AST) -> ast.AST:
    """`tree` without the docstrings of its module, classes and functions."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return tree


def normalized_python(text: str, names: frozenset[str] | None = None) -> str:
    """What of a Python source counts as code: its AST without docstrings (comments and layout
    are not in an AST), of the whole file or of what importing `names` from it can run
    (`imports.code_slice`); the text itself when it does not parse."""
    try:
        return ast.dump(strip_docstrings(code_slice(ast.parse(text), names)))
    except SyntaxError:
        return text


def normalized_notebook(text: str) -> str:
    """A notebook's code cells, each normalized like a .py file (magics and shell lines out)."""
    code = ["\n".join(line for line in s.splitlines() if not line.lstrip().startswith(("%", "!")))
            for s in code_cells(text)]
    return "\n".join(normalized_python(s) for s in code)


def normalized(path: str, text: str, names: frozenset[str] | None = None) -> str:
    return (normalized_notebook(text) if path.endswith(".ipynb")
            else normalized_python(text, names))


def files_at(commit: str, folders, root: Path) -> dict[str, str]:
    """{path: blob hash} of the .py files under `folders` at `commit`."""
    out = git("ls-tree", "-r", commit, "--", *folders, root=root)
    return {line.split("\t", 1)[1]: line.split()[2] for line in out.splitlines()
            if line.endswith(".py")}


def files_now(folders, root: Path) -> dict[str, str]:
    """{path: blob hash} of the .py files under `folders` in the working tree."""
    paths = sorted(str(p.relative_to(root)) for folder in folders
                   for p in (root / folder).rglob("*.py") if "__pycache__" not in p.parts)
    hashes = git("hash-object", "--", *paths, root=root).split() if paths else []
    return dict(zip(paths, hashes, strict=True))


class Repository:
    """The repository's code at each commit, read once per (commit, file)."""

    def __init__(self, root: Path = ROOT):
        self.root = root
        self._text: dict[tuple[str, str], str | None] = {}

    def text(self, commit: str | None, path: str) -> str | None:
        """`path` at `commit` (None: the working tree); None when it does not exist there."""
        key = (commit or "", path)
        if key not in self._text:
            if commit is None:
                file = self.root / path
                self._text[key] = file.read_text() if file.exists() else None
            else:
                try:
                    self._text[key] = git("show", f"{commit}:{path}", root=self.root)
                except RuntimeError:
                    self._text[key] = None
        return self._text[key]

    def changed(self, output: Output) -> list[str]:
        """The files of `output`'s code whose code (not comments or docstrings) differs between
        its commit and the working tree."""
        then, now = files_at(output.commit, output.code, self.root), files_now(output.code,
                                                                                self.root)
        candidates = sorted(p for p in then.keys() | now.keys() if then.get(p) != now.get(p)
                            and (output.only is None or p in output.only))
        if output.own:
            candidates.append(output.own)
        changed = []
        for path in candidates:
            old, new = self.text(output.commit, path), self.text(None, path)
            names = (output.slices or {}).get(path)
            if (old is None or new is None
                    or normalized(path, old, names) != normalized(path, new, names)):
                changed.append(path)
        if output.seen is not None:        # what the output read, against the data now
            changed += [path for path in output.data
                        if output.seen.get(path) != fingerprint(self.root / path)]
        else:                              # recorded before fingerprints: data at its commit
            changed += [path for path in output.data
                        if self.text(output.commit, path) != self.text(None, path)]
        return changed


def recorded_commit(value) -> str | None:
    """A recorded commit, or None when there is none (or it says it is unknown)."""
    return value if isinstance(value, str) and value and not value.startswith("unknown") else None


def outputs(root: Path = ROOT) -> list[Output]:
    """Every committed output with the commit it records."""
    tracked = set(git("ls-files", "notebooks", "bench", root=root).splitlines())
    found = []
    for path in sorted(p for p in tracked if p.startswith("notebooks/") and p.endswith(".ipynb")):
        text = (root / path).read_text()
        meta = json.loads(text).get("metadata", {}).get("course", {})
        found.append(Output(path, recorded_commit(meta.get("commit")), NOTEBOOK_CODE, own=path,
                            recorded=str(meta.get("commit") or ""),
                            data=results_loaded(text, root),
                            seen=meta.get("data")))
    results = {}
    for path in sorted(p for p in tracked if p.startswith("bench/results/")
                       and p.endswith(".json")):
        meta = json.loads((root / path).read_text()).get("meta", {})
        results[Path(path).stem] = Output(path, recorded_commit(meta.get("commit")), RESULT_CODE,
                                          recorded=str(meta.get("commit") or ""),
                                          **_closure(f"bench.{Path(path).stem}", root),
                                          uncommitted=uncommitted_of(meta))
    plots = frozenset({"bench/plots.py"})
    found += results.values()
    found += drawn(tracked, "bench/figures/", (".png",), results, plots, alone=True)
    data = {}                      # data a notebook reads, made by a benchmark: its command says
    for path in sorted(p for p in tracked if p.startswith("notebooks/figures/")
                       and p.endswith(".json")):
        meta = json.loads((root / path).read_text()).get("meta", {})
        data[Path(path).stem] = Output(path, recorded_commit(meta.get("commit")), RESULT_CODE,
                                       recorded=str(meta.get("commit") or ""),
                                       **_closure(producer(meta), root),
                                       uncommitted=uncommitted_of(meta))
    found += data.values()
    found += drawn(tracked, "notebooks/figures/", (".png", ".svg"), data, frozenset(),
                   alone=False)
    return found


def _closure(module: str, root: Path) -> dict:
    """An output's `only` and `slices` from the import closure of the module that made it."""
    slices = import_slices(module, root)
    return {"only": None if slices is None else frozenset(slices), "slices": slices}


def uncommitted_of(meta: dict) -> tuple[str, ...] | None:
    """The files a result records as uncommitted when it ran (`provenance.stamp`), or None."""
    files = meta.get("uncommitted")
    return tuple(files) if isinstance(files, list) else None


def producer(meta: dict) -> str:
    """The module whose run a result's `meta.command` records: `python -m bench.x ...` and
    `python bench/x.py ...` are both `bench.x` ("" when the command names none)."""
    words = (meta.get("command") or "").split()
    if "-m" in words[:-1]:
        return words[words.index("-m") + 1]
    return next((w.removesuffix(".py").replace("/", ".") for w in words if w.endswith(".py")),
                "")


def drawn(tracked, folder: str, suffixes, sources: dict[str, Output], extra: frozenset,
          alone: bool) -> list[Output]:
    """The pictures in `folder`, each drawn from the source whose name starts its own (the
    longest such): that source's commit and code, with `extra` (the code that draws it).
    A picture no source's name starts: listed with no provenance if `alone`, else left out
    (notebooks/figures holds pictures of their own, a screenshot)."""
    found = []
    for path in sorted(p for p in tracked if p.startswith(folder) and p.endswith(suffixes)):
        source = max((name for name in sources if Path(path).stem.startswith(name)),
                     key=len, default=None)
        if source is None and not alone:
            continue
        only = sources[source].only if source else None
        found.append(Output(path, sources[source].commit if source else None, RESULT_CODE,
                            recorded=f"{sources[source].path}: {sources[source].recorded}"
                            if source else "no result it is drawn from",
                            only=None if only is None else only | extra,
                            slices=sources[source].slices if source else None,
                            uncommitted=sources[source].uncommitted if source else None))
    return found


def check(root: Path = ROOT) -> list[tuple[str, str, str]]:
    """(status, output, detail) for each output: status "fresh", "stale" or "no provenance"."""
    repo = Repository(root)
    rows = []
    for output in outputs(root):
        if output.commit is None:
            rows.append(("no provenance", output.path, "records no commit"
                         + (f" ({output.recorded})" if output.recorded else "")))
            continue
        commit = output.commit.removesuffix(DIRTY)
        try:
            changed = repo.changed(Output(output.path, commit, output.code, output.own,
                                          data=output.data, only=output.only,
                                          slices=output.slices, seen=output.seen))
        except RuntimeError:
            rows.append(("stale", output.path, f"{commit[:10]} is not in this repository"))
            continue
        dirty = [] if not output.commit.endswith(DIRTY) else (
            ["unrecorded files"] if output.uncommitted is None else
            [f for f in output.uncommitted if output.depends_on(f)])
        if dirty:
            rows.append(("stale", output.path, f"ran on uncommitted changes to {commit[:10]} "
                                               f"({', '.join(dirty[:3])})"))
        elif changed:
            shown = ", ".join(changed[:4]) + (f" and {len(changed) - 4} more"
                                              if len(changed) > 4 else "")
            rows.append(("stale", output.path, f"since {commit[:10]}: {shown} changed"))
        else:
            rows.append(("fresh", output.path, commit[:10]))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", action="store_true",
                        help="list only, exit 0 even when something is stale (CI)")
    args = parser.parse_args(argv)
    rows = check()
    for status, path, detail in rows:
        print(f"{status:<14} {path}: {detail}")
    not_fresh = [row for row in rows if row[0] != "fresh"]
    print(f"{len(rows) - len(not_fresh)} of {len(rows)} outputs fresh"
          + ("" if not not_fresh else
             ": re-run what is listed (make bench, make notebooks) from committed code"))
    return 0 if args.report or not not_fresh else 1


if __name__ == "__main__":
    sys.exit(main())
