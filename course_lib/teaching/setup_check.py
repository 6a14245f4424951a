"""The pre-workshop check behind notebook 00: is this machine ready, and if not, what to fix.

`run_checks()` returns one `Check` per item; `report(checks)` shows them as a table with a
green READY or a red list of fixes.
"""

from __future__ import annotations

import html
import importlib.metadata as md
import os
import platform
import shutil
import time
from dataclasses import dataclass

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

PACKAGE = "course-lib"
INSTALL_FIX = ("run `make lab` (or `pip install -c requirements/lock.txt -e \".[attendee]\"`) "
               "from the repository root")


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def pinned_requirements(extras: tuple[str, ...] = ("attendee",)) -> list[Requirement]:
    """The exact pins of course-lib and of its `extras` (read from its installed metadata):
    by default the attendee's set, what the notebooks need beyond training's base."""
    reqs = [Requirement(r) for r in md.requires(PACKAGE) or []]
    env = [{"extra": e} for e in ("",) + extras]
    return [r for r in reqs if r.marker is None or any(r.marker.evaluate(e) for e in env)]


def check_python() -> Check:
    """This Python is one the pins are made for (`requires-python` of the installed package)."""
    version = platform.python_version()
    supported = SpecifierSet(md.metadata(PACKAGE)["Requires-Python"] or "")
    ok = supported.contains(version)
    return Check("Python", ok, version,
                 "" if ok else f"use a Python {supported} (the pins are made for those)")


def check_packages() -> list[Check]:
    """Every pinned package is installed at exactly its pinned version."""
    checks = []
    for req in pinned_requirements():
        try:
            installed = md.version(req.name)
        except md.PackageNotFoundError:
            checks.append(Check(req.name, False, "missing", INSTALL_FIX))
            continue
        base = installed.split("+")[0]  # torch reports e.g. 2.13.0+cpu
        ok = req.specifier.contains(base, prereleases=True)
        checks.append(Check(req.name, ok, installed,
                            "" if ok else f"expected {req.specifier}: {INSTALL_FIX}"))
    return checks


def check_cpus() -> Check:
    cpus = os.cpu_count() or 1
    return Check("CPU cores", cpus >= 2, str(cpus),
                 "" if cpus >= 2 else "the parallel lessons need at least 2 cores")


def check_shared_memory(min_gb: float = 1.0) -> Check:
    """Ray's object store lives in /dev/shm; docker's 64 MB default is far too small."""
    if not os.path.isdir("/dev/shm"):
        return Check("/dev/shm", True, "not present (macOS/Windows: Ray uses its own store)")
    free_gb = shutil.disk_usage("/dev/shm").free / 1e9
    ok = free_gb >= min_gb
    return Check("/dev/shm", ok, f"{free_gb:.1f} GB free",
                 "" if ok else "in docker, start the container with --shm-size=2g")


def check_gpu() -> Check:
    import torch
    if torch.cuda.is_available():
        return Check("GPU", True, torch.cuda.get_device_name(0))
    return Check("GPU", True, "none (fine: every lesson runs on the CPU)")


def check_gymnasium() -> Check:
    import gymnasium as gym
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    env.close()
    return Check("gymnasium CartPole-v1", obs.shape == (4,), f"observation shape {obs.shape}")


def check_ray(timeout_s: float = 90.0) -> Check:
    """Start (or reuse) Ray and run one task on it."""
    import ray

    from course_lib.errors import RayStartError
    from course_lib.ray_tools import init_ray
    start = time.perf_counter()
    try:
        init_ray(timeout_s=timeout_s)
        value = ray.get(ray.remote(lambda: 42).remote(), timeout=timeout_s)
    except (RayStartError, ray.exceptions.GetTimeoutError) as err:
        return Check("Ray", False, str(err), "see the README's troubleshooting section")
    seconds = time.perf_counter() - start
    cpus = int(ray.cluster_resources().get("CPU", 0))
    return Check("Ray", value == 42, f"running, {cpus} CPUs, first task after {seconds:.1f} s")


def check_widgets() -> Check:
    try:
        version = md.version("jupyterlab_widgets")
    except md.PackageNotFoundError:
        return Check("JupyterLab widgets", False, "missing", INSTALL_FIX)
    return Check("JupyterLab widgets", True, version)


def run_checks() -> list[Check]:
    """All checks, cheapest first; Ray last because it starts the local instance."""
    return [check_python(), *check_packages(), check_cpus(), check_shared_memory(),
            check_gpu(), check_gymnasium(), check_widgets(), check_ray()]


class Report:
    """The checks as a table (HTML in a notebook, text elsewhere) with a verdict."""

    def __init__(self, checks: list[Check]):
        self.checks = checks
        self.ready = all(c.ok for c in checks)

    def __repr__(self) -> str:
        lines = [f"{'✅' if c.ok else '❌'} {c.name:<24} {c.detail}"
                 + (f"  -> {c.fix}" if c.fix else "") for c in self.checks]
        verdict = "READY: everything the workshop needs is here." if self.ready else \
            "NOT READY: fix the items marked ❌ above, then re-run this notebook."
        return "\n".join([*lines, verdict])

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{'✅' if c.ok else '❌'}</td><td>{html.escape(c.name)}</td>"
            f"<td>{html.escape(c.detail)}</td><td>{html.escape(c.fix)}</td></tr>"
            for c in self.checks)
        color, verdict = ("#1a7f37", "READY") if self.ready else ("#cf222e", "NOT READY")
        return (f"<table><tr><th></th><th>check</th><th>found</th><th>fix</th></tr>{rows}</table>"
                f"<p style='color:white;background:{color};padding:6px;font-weight:bold'>"
                f"{verdict}</p>")


def report(checks: list[Check] | None = None) -> Report:
    return Report(run_checks() if checks is None else checks)
