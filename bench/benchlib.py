"""What every benchmark script shares: running (a private Ray temp dir, the command line),
timing, seeding, and recording where a result came from.

A script builds its parser with `parser`, opens a `Recording` before it measures anything, and
writes its result with `Recording.write`. Every `bench/results/<name>.json` then has one shape:

    {"meta": {"commit", "uncommitted", "config", "versions", "machine", "load_before",
              "load_after", "started", "finished", "command"},
     ...the benchmark's own results (runs, summary, targets, ...)}

`meta.commit` is the HEAD commit whose code ran, with "-dirty" appended when course_lib/ or
bench/ had uncommitted changes (listed in `meta.uncommitted`); `scripts/fresh.py` reads it to
list results whose code has changed since. `meta.config` is the script's own settings (its
result's "config"); loads are the 1/5/15-minute load averages.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from scripts.provenance import stamp

REPO = Path(__file__).resolve().parents[1]
#: the versions every result records; a script adds the references it measures against
PACKAGES = ("ray", "torch", "gymnasium", "numpy")


@contextlib.contextmanager
def private_ray_tmp():
    """Give Ray its own temp dir (unless RAY_TMPDIR is set) and no token auth, for the block:
    a benchmark never shares /tmp/ray or ~/.ray/auth_token with another Ray on the machine."""
    own = "RAY_TMPDIR" not in os.environ
    if own:
        os.environ["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="ray-bench-")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    try:
        yield os.environ["RAY_TMPDIR"]
    finally:
        if own:
            shutil.rmtree(os.environ.pop("RAY_TMPDIR"), ignore_errors=True)


def parser(doc: str, name: str, quick_help: str, seeds: bool = False) -> argparse.ArgumentParser:
    """The arguments every benchmark takes: `--quick` (a smoke run) and `--json` (where); with
    `seeds`, `--seeds` too (read with `seeds_of`)."""
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument("--quick", action="store_true", help=quick_help)
    p.add_argument("--json", default=str(REPO / "bench" / "results" / f"{name}.json"),
                   help="where to write (default: bench/results/<name>.json)")
    if seeds:
        p.add_argument("--seeds", type=int, nargs="+", default=None,
                       help="default: 0 1 2 (--quick: 0)")
    return p


def seeds_of(args, full=(0, 1, 2)) -> tuple[int, ...]:
    """The seeds given with `--seeds`, else seed 0 alone in a quick run and `full` otherwise."""
    return tuple(args.seeds or ((0,) if args.quick else full))


def seed_all(seed: int) -> None:
    """Seed Python's, numpy's and torch's global generators (code that draws from them)."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class Stopwatch:
    """Seconds on the clock since it was made (or since `restart`)."""

    def __init__(self):
        self.restart()

    def restart(self) -> None:
        self.start = time.perf_counter()

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.start


def load() -> list[float]:
    """The 1/5/15-minute load averages."""
    return [round(x, 2) for x in os.getloadavg()]


def machine() -> dict:
    """Cores, CPU model, memory and OS."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        cpu = next((line.split(":", 1)[1].strip() for line in
                    Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), cpu)
    try:
        mem_gb = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        mem_gb = None
    return {"cores": os.cpu_count(), "cpu": cpu, "memory_gb": mem_gb,
            "os": f"{platform.system()} {platform.release()}"}


def versions(extra=()) -> dict:
    """Python's version and each package's (PACKAGES and `extra`): "not installed" if absent."""
    found = {"python": platform.python_version()}
    for package in (*PACKAGES, *extra):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def load_note(meta: dict) -> str:
    """"1-minute load average before/after: a / b", from a result's meta."""
    return (f"1-minute load average before/after: {meta['load_before'][0]:.1f} / "
            f"{meta['load_after'][0]:.1f}")


class Recording:
    """Where a result comes from, recorded while it is measured: made before the first
    measurement (commit, load, start time), finished by `write` (load and time after)."""

    def __init__(self, packages=()):
        self.meta = {**stamp(root=REPO), "config": {}, "versions": versions(packages),
                     "machine": machine(), "load_before": load(), "load_after": None,
                     "started": now(), "finished": None,
                     "command": " ".join([Path(sys.orig_argv[0]).name, *sys.orig_argv[1:]])}
        self.clock = Stopwatch()

    def finish(self, config: dict) -> dict:
        """The meta, completed: `config`, the load and the time now, the wall time."""
        self.meta.update(config=config, load_after=load(), finished=now(),
                         wall_s=round(self.clock.seconds, 1))
        return self.meta

    def write(self, result: dict, path) -> dict:
        """`result` as {"meta", ...} at `path` (its "config" goes into meta); returns that."""
        shaped = {"meta": self.finish(result.get("config", {})),
                  **{k: v for k, v in result.items() if k not in ("config", "meta")}}
        print(load_note(shaped["meta"]))
        write_json(shaped, path)
        return shaped


def write_json(result: dict, path) -> Path:
    """`result` as indented JSON at `path` (folders created); prints where."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"wrote {path}")
    return path
