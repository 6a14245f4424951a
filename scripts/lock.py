"""Write requirements/lock.txt: the exact version of every package of the tested environment.

Run with the Python of the environment the tests passed in (`make lock` runs it in .venv):

    .venv/bin/python scripts/lock.py            # writes requirements/lock.txt
    .venv/bin/python scripts/lock.py --check    # exit 1 if the file differs from what it writes

The set is the closure of pyproject.toml's requirements with every extra (what `make test`
installs), walked through the installed packages' own metadata: packages installed in the
environment by hand are left out, and a package the pins name but the environment lacks is an
error. Versions lose their local label (torch 2.13.0+cpu is locked as 2.13.0, which the CPU and
the default build both satisfy). A package that pyproject.toml installs only under a marker
(cpprb: `python_version < '3.13'`) keeps the marker, so that one lock serves Python 3.11, 3.12
and 3.13. Every install route passes the file to pip as constraints (`-c`): it fixes versions,
it installs nothing by itself.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import sys
import tomllib
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "lock.txt"
HEADER = """\
# The tested environment, every package at its exact version: written by `make lock`
# (scripts/lock.py) from the environment the tests passed in. Do not edit by hand: change the
# pins in pyproject.toml, install, test, then `make lock`. Every install route uses it as
# constraints: pip install -c requirements/lock.txt -e ".[attendee]"
"""


def project_requirements() -> tuple[str, list[Requirement], dict[str, list[Requirement]]]:
    """pyproject.toml's name, base requirements and extras."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = {name: [Requirement(r) for r in reqs]
              for name, reqs in project.get("optional-dependencies", {}).items()}
    return project["name"], [Requirement(r) for r in project["dependencies"]], extras


def _applies(req: Requirement, extra: str = "") -> bool:
    return req.marker is None or req.marker.evaluate({"extra": extra})


def closure(leaves: frozenset[str] = frozenset()) -> dict[str, str]:
    """{canonical name: installed version} of everything the project with all its extras
    needs here, walked through the installed metadata; the requirements of `leaves` are not
    followed (torch's differ between its CPU and CUDA builds)."""
    name, base, extras = project_requirements()
    own = canonicalize_name(name)
    wanted = [r for r in base if _applies(r)]
    wanted += [r for reqs in extras.values() for r in reqs if _applies(r)]
    found: dict[str, str] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    while wanted:
        req = wanted.pop()
        key = canonicalize_name(req.name)
        if key == own or (key, frozenset(req.extras)) in seen:
            continue                                   # our own extras are walked above
        seen.add((key, frozenset(req.extras)))
        try:
            dist = md.distribution(req.name)
        except md.PackageNotFoundError:
            sys.exit(f"lock: {req.name} is required but not installed in {sys.prefix}: "
                     "install the full set first (make install)")
        found[key] = dist.version.split("+")[0]
        for sub in [] if key in leaves else map(Requirement, dist.requires or []):
            if any(_applies(sub, extra) for extra in ("", *req.extras)):
                wanted.append(sub)
    return found


def markers() -> dict[str, Marker]:
    """The markers pyproject.toml installs some pins under (cpprb: not on Python 3.13)."""
    _, base, extras = project_requirements()
    reqs = base + [r for group in extras.values() for r in group]
    return {canonicalize_name(r.name): Marker(str(r.marker).split(" and extra ==")[0])
            for r in reqs if r.marker is not None and "extra" not in str(r.marker)}


def render(pins: dict[str, str]) -> str:
    python = ".".join(map(str, sys.version_info[:3]))
    conditional = markers()
    lines = [HEADER + f"# Generated on Python {python}; the same pins resolve on 3.11-3.13.\n"]
    for name in sorted(pins):
        marker = f"; {conditional[name]}" if name in conditional else ""
        lines.append(f"{name}=={pins[name]}{marker}\n")
    return "".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if requirements/lock.txt differs from this environment")
    args = parser.parse_args()
    text = render(closure())
    if args.check:
        old = LOCK.read_text() if LOCK.exists() else ""
        same = old.splitlines()[5:] == text.splitlines()[5:]     # past the header
        print("lock: up to date" if same else "lock: requirements/lock.txt differs: make lock")
        sys.exit(0 if same else 1)
    LOCK.parent.mkdir(exist_ok=True)
    LOCK.write_text(text)
    print(f"lock: {LOCK.relative_to(ROOT)}, {len(text.splitlines()) - 5} packages")


if __name__ == "__main__":
    main()
