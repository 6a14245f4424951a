"""Write requirements/lock.txt: one version of every package, for every supported platform.

    make lock                                 # = .venv/bin/python scripts/lock.py
    .venv/bin/python scripts/lock.py --check  # resolve again: exit 1 if the lock differs
    .venv/bin/python scripts/lock.py --upgrade-package ray   # move one package (uv's option)

The lock is written by a real resolver, uv (its version is pinned in requirements/uv.in),
from pyproject.toml with every extra: its universal resolution gives one file for Linux x86_64
and aarch64 (WSL is Linux x86_64) and Apple Silicon macOS, on every Python that
`requires-python` accepts, with environment markers where machines differ and the sha256 of
every file on PyPI. Versions already in the lock are kept unless pyproject.toml needs another
one (uv prefers the pins of the file it rewrites). Then each platform x Python is resolved
again with wheels only (`--only-binary :all:`) against the lock: a package without a wheel
there fails `make lock`, which is how the floors were found (Python 3.11.5 for soupsieve,
macOS 14 for torch). requirements/uv.txt, the hashed installer every route bootstraps, is
written from requirements/uv.in the same way. Needs the network (PyPI); the tests that keep
the lock in step (tests/test_lock.py) do not.

Every install route passes the lock to uv as constraints (`uv pip install -c
requirements/lock.txt -e ".[attendee]"`): it fixes versions and hashes, it installs nothing
by itself.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from course_lib.cluster.lockfile import PLATFORMS  # noqa: E402

LOCK = ROOT / "requirements" / "lock.txt"
UV_IN = ROOT / "requirements" / "uv.in"
UV_LOCK = ROOT / "requirements" / "uv.txt"
#: the index the lock is resolved against and its hashes come from (uv ignores pip's config)
INDEX = "https://pypi.org/simple"


def requires_python() -> SpecifierSet:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return SpecifierSet(project["requires-python"])


def supported_pythons() -> list[str]:
    """The oldest Python `requires-python` accepts (e.g. 3.11.5) and each later minor
    version it accepts (3.12, 3.13)."""
    spec = requires_python()
    floor = next(s.version for s in spec if s.operator == ">=")
    major, minor = map(int, floor.split(".")[:2])
    later = [f"{major}.{m}" for m in range(minor + 1, minor + 10) if f"{major}.{m}.0" in spec]
    return [floor, *later]


def uv() -> str:
    """The uv next to this Python (the venv's, installed from requirements/uv.txt), else the
    one on the PATH."""
    path = Path(sys.executable).parent / "uv"
    found = str(path) if path.exists() else shutil.which("uv")
    if found is None:
        sys.exit(f"lock: no uv in {path.parent} nor on the PATH: install it first "
                 f"({sys.executable} -m pip install --require-hashes -r requirements/uv.txt)")
    return found


def compile_args(output: str) -> list[str]:
    """The `uv pip compile` arguments of the lock (its header records them, but `-o`)."""
    return ["pip", "compile", "pyproject.toml", "--all-extras", "--universal",
            "--python-version", supported_pythons()[0], "--generate-hashes",
            "--default-index", INDEX, "--no-header", "--quiet", "-o", output]


def header() -> str:
    """What the lock says about itself, above what uv writes."""
    command = " ".join(compile_args("requirements/lock.txt"))
    oldest, *_, newest = supported_pythons()
    pythons = f"{oldest} to {newest}"
    return f"""\
# One version of every package the workshop installs, for Linux x86_64 and aarch64 (WSL
# too) and Apple Silicon macOS 14+ on Python {pythons}, with the sha256 of every file on
# PyPI. Written by `make lock` (scripts/lock.py) with uv:
#     uv {command}
# Do not edit by hand: change a pin in pyproject.toml, then `make lock`. Every route installs
# with it as constraints: uv pip install -c requirements/lock.txt -e ".[attendee]"
"""


def run_uv(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([uv(), *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    if done.returncode:
        sys.exit(f"lock: `uv {' '.join(args)}` failed:\n{done.stderr.strip()}")
    return done


def write(output: Path, extra: list[str]) -> None:
    """Resolve into `output`, keeping the versions it already pins."""
    run_uv(compile_args(str(output)) + extra)
    output.write_text(header() + output.read_text())
    run_uv(["pip", "compile", str(UV_IN), "--universal", "--generate-hashes",
            "--default-index", INDEX, "--custom-compile-command", "make lock", "--quiet",
            "-o", str(UV_LOCK)])


def check_platforms(lock: Path) -> list[str]:
    """Resolve the project on each platform x Python with wheels only, at the lock's versions;
    one line per combination, 'ok' or why not."""
    lines = []
    for name, (target, env, _) in PLATFORMS.items():
        for python in supported_pythons():
            args = ["pip", "compile", "pyproject.toml", "--all-extras", "--python-platform",
                    target, "--python-version", python, "--only-binary", ":all:", "-c",
                    str(lock), "--default-index", INDEX, "--no-header", "--no-annotate",
                    "--quiet"]
            done = subprocess.run([uv(), *args], cwd=ROOT, capture_output=True, text=True,
                                  env={**os.environ, **env})
            count = sum("==" in line for line in done.stdout.splitlines())
            why = (done.stderr.strip().splitlines() or ["?"])[-1] if done.returncode else ""
            lines.append(f"{name} Python {python}: "
                         + (f"ok, {count} packages, all wheels" if not why else f"FAILS: {why}"))
    return lines


def body(text: str) -> list[str]:
    """A lock's lines past its header (the comments uv writes at the top)."""
    lines = text.splitlines()
    return lines[next((i for i, line in enumerate(lines) if not line.startswith("#")), 0):]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="resolve again; exit 1 if requirements/lock.txt would change")
    args, extra = parser.parse_known_args()            # the rest goes to uv (--upgrade...)
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            fresh = Path(tmp) / "lock.txt"
            fresh.write_text(LOCK.read_text() if LOCK.exists() else "")
            run_uv(compile_args(str(fresh)) + extra)
            same = body(fresh.read_text()) == body(LOCK.read_text() if LOCK.exists() else "")
        print("lock: up to date" if same else "lock: requirements/lock.txt differs: make lock")
        sys.exit(0 if same else 1)
    write(LOCK, extra)
    print(f"lock: {LOCK.relative_to(ROOT)} written; wheels for every supported platform:")
    report = check_platforms(LOCK)
    print("\n".join("  " + line for line in report))
    if any("FAILS" in line for line in report):
        sys.exit("lock: some platform lacks a wheel (above): change the pin in pyproject.toml "
                 "or the floor in requires-python")


if __name__ == "__main__":
    main()
