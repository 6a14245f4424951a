"""Read a benchmark's JSON result, so a notebook can show the 3-seed figure beside its own run.

`bench/run_all.py` writes `bench/results/<name>.json` (one file per benchmark in its `NAMES`).
A notebook quoting a single run reads the benchmark's numbers with `load(name)` instead of
copying them into prose, so the prose never drifts from the measurement.

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
