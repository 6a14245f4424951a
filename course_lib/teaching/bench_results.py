"""Read a benchmark's JSON result, so a notebook can show the 3-seed figure beside its own run,
and a notebook's own recorded run (its run-time banner).

`bench/run_all.py` writes `bench/results/<name>.json` (one file per benchmark in its `NAMES`).
A notebook quoting a single run reads the benchmark's numbers with `load(name)` instead of
copying them into prose, so the prose never drifts from the measurement; `expected_band` gives
the range course_lib's own seeds reached the goal in, to set beside a run on the attendee's
pieces. `runtime(stem)` prints how long the notebook's last full-mode execution took
(`scripts/notebooks.py execute` records it), day and optional appendix apart; scripts/day.py
reads the same records for the day's table.

The folder is looked for in the repository that holds this package (the editable install the
workshop uses: notebooks run from notebooks/, build/student/ or workshop/), then under the
working directory and its parents (a notebook copied somewhere else inside a checkout).
"""

from __future__ import annotations

import json
from pathlib import Path

from course_lib.workspace import REPO


def results_dir() -> Path | None:
    """The first bench/results folder found from the package, then from the working directory."""
    candidates = [REPO / "bench" / "results"]
    cwd = Path.cwd().resolve()
    candidates += [folder / "bench" / "results" for folder in (cwd, *cwd.parents)]
    return next((path for path in candidates if path.is_dir()), None)


def load(name: str) -> dict:
    """The parsed `bench/results/<name>.json`; a one-line FileNotFoundError if it is missing."""
    folder = results_dir()
    path = (folder or REPO / "bench" / "results") / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"no benchmark result {path}: run `python -m bench.run_all --only {name}` "
            f"(or `make bench`) in the repository first")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON ({err}); re-run "
                         f"`python -m bench.run_all --only {name}`") from None


def expected_band(name: str, variant: str | None = None) -> str:
    """One line: how course_lib's own runs of `bench/<name>.py` (those of `variant`, when the
    result has several) reached the goal, seed by seed: the range of env steps and seconds of
    the seeds that reached it. The band to expect a run on the attendee's pieces in; a missing
    result, or a --quick smoke run, says so instead."""
    try:
        result = load(name)
    except FileNotFoundError as err:
        return str(err)
    runs = result.get("runs") or next(v["runs"] for v in result.values()
                                      if isinstance(v, dict) and "runs" in v)
    runs = [r for r in runs if variant in (None, r.get("variant"))]
    reached = [r for r in runs if r["reached"]]
    meta, which = result["meta"], f"bench/{name}.py" + (f", {variant}" if variant else "")
    if meta["config"]["quick"] or not reached:
        return (f"{which}: " + ("a --quick smoke run, it measures nothing" if reached else
                                f"no seed of {len(runs)} reached the goal"))
    steps = sorted(r["env_steps"] for r in reached)
    seconds = sorted(r.get("seconds", r.get("time_s")) for r in reached)
    return (f"course_lib's own runs ({which}, {meta['started'][:10]}): {len(reached)} of "
            f"{len(runs)} seeds reached the goal, in {steps[0]:,}-{steps[-1]:,} env steps and "
            f"{seconds[0]:.0f}-{seconds[-1]:.0f} s (1-minute load {meta['load_before'][0]:.1f} "
            f"when they started)")


# -- a notebook's recorded run: its metadata `course` and each cell's time ------------------------

#: a Markdown cell that starts with this starts the notebook's optional appendix: not in the day
APPENDIX = "# Appendix"
#: the tag of a code cell that the attendee edition runs in quick mode by default (07's race)
QUICK_BY_DEFAULT = "quick-by-default"


def cell_seconds(cell) -> float | None:
    """How long `cell` ran in the notebook's last execution (nbclient's timing in its
    metadata), or None if it has not run since it was written."""
    from datetime import datetime

    times = cell.get("metadata", {}).get("execution", {})
    if "iopub.execute_input" not in times or "shell.execute_reply" not in times:
        return None
    start, end = (datetime.fromisoformat(times[k].replace("Z", "+00:00"))
                  for k in ("iopub.execute_input", "shell.execute_reply"))
    return (end - start).total_seconds()


def attendee_cell_seconds(cell, course: dict) -> float | None:
    """How long `cell` takes an attendee: for a `QUICK_BY_DEFAULT` cell the time it took in
    the attendee edition's run (`course["attendee_s"]`, recorded by scripts/notebooks.py),
    else its time in the full-mode run (`cell_seconds`): an upper bound where none is recorded."""
    if QUICK_BY_DEFAULT in cell["metadata"].get("tags", []):
        recorded = course.get("attendee_s", {}).get(cell.get("id"))
        if recorded is not None:
            return recorded
    return cell_seconds(cell)


def day_and_appendix(cells) -> tuple[list, list]:
    """(the cells of the day, those of the optional appendix), split at the `APPENDIX` heading;
    the last cell (`ray.shutdown()`) belongs to the day."""
    starts = [i for i, c in enumerate(cells) if c["cell_type"] == "markdown"
              and "".join(c["source"]).lstrip().startswith(APPENDIX)]
    if not starts:
        return list(cells), []
    return [*cells[:starts[0]], *cells[-1:]], list(cells[starts[0]:-1])


def runtime(stem: str, nb: dict | None = None) -> str:
    """The notebook's run-time banner: how long its last full-mode execution took (its metadata,
    `course.duration_s`, and each cell's recorded time), split into the day's sections, the
    optional appendix and the cells this edition runs in quick mode by default. `nb`: the
    notebook as just executed (scripts/notebooks.py), else notebooks/<stem>.ipynb."""
    nb = nb or json.loads((REPO / "notebooks" / f"{stem}.ipynb").read_text())
    course = nb["metadata"].get("course", {})
    if "duration_s" not in course:
        return f"{stem} has no recorded run yet (python scripts/notebooks.py execute)."
    cells = [c for c in nb["cells"] if "ci" not in c["metadata"].get("tags", [])]
    day, appendix = day_and_appendix(cells)
    by_default = [c for c in day if QUICK_BY_DEFAULT in c["metadata"].get("tags", [])]
    quick = sum(cell_seconds(c) or 0 for c in by_default)
    parts = [f"{(sum(cell_seconds(c) or 0 for c in day) - quick) / 60:.1f} min in the day's "
             "sections"]
    if quick:
        timed = [attendee_cell_seconds(c, course) for c in by_default
                 if c.get("id") in course.get("attendee_s", {})]
        said = f" (there: {sum(timed) / 60:.1f} min)" if len(timed) == len(by_default) else ""
        parts.append(f"{quick / 60:.1f} min in the cells the attendee edition runs in quick "
                     f"mode by default{said}; set FULL_RACE = True for the full run")
    if appendix:
        parts.append(f"{sum(cell_seconds(c) or 0 for c in appendix) / 60:.1f} min in the "
                     "optional appendix")
    untimed = sum(1 for c in cells if c["cell_type"] == "code" and cell_seconds(c) is None
                  and "solution" not in c["metadata"].get("tags", []))
    return (f"Run time: this notebook ran in {course['duration_s'] / 60:.1f} min in full mode "
            f"({course.get('executed', '?')}, {course.get('machine', '?')}): "
            + "; ".join(parts) + "."
            + (f" {untimed} cell(s) have not run in full mode since they were written."
               if untimed else "")
            + " Quick mode (COURSE_QUICK=1) runs every training briefly.")
