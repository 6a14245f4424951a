"""Which commit's code produced an output: the HEAD commit, and whether the code had
uncommitted changes when it ran.

Notebooks (`scripts/notebooks.py execute`, metadata `course.commit`) and benchmark results
(`bench/benchlib.py`, `meta.commit`) record it; `scripts/fresh.py` reads it back to list the
outputs whose code has changed since.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the folders whose code every output depends on
CODE = ("course_lib", "bench")
#: what a commit stamp ends with when the code had uncommitted changes
DIRTY = "-dirty"


def git(*args: str, root: Path = ROOT) -> str:
    """The stdout of `git args...` in `root`; a one-line RuntimeError when git fails."""
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {root}: "
                           f"{proc.stderr.strip().splitlines()[-1:] or proc.returncode}")
    return proc.stdout


def head(root: Path = ROOT) -> str:
    """The full hash of HEAD."""
    return git("rev-parse", "HEAD", root=root).strip()


def uncommitted(paths, root: Path = ROOT) -> list[str]:
    """The files under `paths` (relative to `root`) that differ from HEAD or are untracked."""
    out = git("status", "--porcelain", "--untracked-files=all", "--", *map(str, paths),
              root=root)
    return [line[3:] for line in out.splitlines() if line.strip()]


def stamp(paths=CODE, root: Path = ROOT) -> dict:
    """{"commit": HEAD, with DIRTY appended when the code under `paths` has uncommitted
    changes, "uncommitted": those files}: what an output records of the code that produced it.
    Code is the .py files under a folder, and any file named itself (a notebook): outputs
    beside the code (bench/results/, RESULTS.md) do not count."""
    named = {str(p) for p in paths}
    changed = [f for f in uncommitted(paths, root) if f.endswith(".py") or f in named]
    return {"commit": head(root) + (DIRTY if changed else ""), "uncommitted": changed}


def fingerprint(path: Path) -> str | None:
    """A short hash of a data file's bytes (None when it does not exist): what an output
    records of the data it read, so that `scripts/fresh.py` sees when that data changes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.is_file() else None
