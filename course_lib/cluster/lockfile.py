"""requirements/lock.txt read as data: which version of each package a given machine installs.

The lock is uv's universal resolution of pyproject.toml (`make lock`, scripts/lock.py): one
file for every supported platform and Python, in requirements-file syntax, where a package
that only some machines need (or that differs between them) carries an environment marker:

    cpprb==11.0.0 ; python_full_version < '3.13' \\
        --hash=sha256:...

`pins(read_lock(path), marker_environment("linux-x86_64", "3.11.14"))` is what a Linux x86_64
node with Python 3.11.14 installs: {name: version}. The cluster's version check
(`checks.check_versions`), the node test and tests/test_lock.py all read the lock this way.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

#: The platforms the lock is checked on (scripts/lock.py resolves each one with wheels only):
#: {name: (uv's --python-platform, extra environment for uv, PEP 508 marker values)}.
#: WSL is Linux x86_64. macOS: torch 2.13.0 ships arm64 wheels for macOS 14 and later only.
PLATFORMS: dict[str, tuple[str, dict[str, str], dict[str, str]]] = {
    "linux-x86_64": ("x86_64-manylinux_2_28", {},
                     {"sys_platform": "linux", "platform_system": "Linux",
                      "platform_machine": "x86_64", "os_name": "posix"}),
    "linux-aarch64": ("aarch64-manylinux_2_28", {},
                      {"sys_platform": "linux", "platform_system": "Linux",
                       "platform_machine": "aarch64", "os_name": "posix"}),
    "macos-arm64": ("aarch64-apple-darwin", {"MACOSX_DEPLOYMENT_TARGET": "14.0"},
                    {"sys_platform": "darwin", "platform_system": "Darwin",
                     "platform_machine": "arm64", "os_name": "posix"}),
}

_HASH = re.compile(r"--hash=(sha256:[0-9a-f]{64})")


@dataclass(frozen=True)
class Locked:
    """One entry of the lock: a package at one version, for the machines its marker selects."""
    name: str                  # canonical (lower case, dashes)
    version: str
    marker: Marker | None
    hashes: tuple[str, ...]

    def applies(self, environment: dict[str, str]) -> bool:
        return self.marker is None or self.marker.evaluate(environment)


def read_lock(path: str | os.PathLike) -> list[Locked]:
    """The entries of the lock file at `path` (see `parse_lock`)."""
    return parse_lock(Path(path).read_text())


def parse_lock(text: str) -> list[Locked]:
    """The entries of a lock file's text. A line that is not `name==version[ ; marker]`
    raises ValueError naming it."""
    logical = re.sub(r"\\\n", " ", text)               # join the continuation lines
    entries = []
    for line in logical.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        spec = _HASH.sub("", line).strip()
        try:
            req = Requirement(spec)
        except ValueError as err:
            raise ValueError(f"lock: cannot read {spec!r} ({err})") from None
        specifiers = list(req.specifier)
        if len(specifiers) != 1 or specifiers[0].operator != "==":
            raise ValueError(f"lock: {spec!r} is not pinned with ==")
        entries.append(Locked(canonicalize_name(req.name), specifiers[0].version, req.marker,
                              tuple(_HASH.findall(line))))
    return entries


def marker_environment(platform: str, python: str) -> dict[str, str]:
    """PEP 508 marker values of a CPython `python` ("3.12" or "3.11.14") on `platform` (a key
    of PLATFORMS)."""
    if platform not in PLATFORMS:
        raise ValueError(f"unknown platform {platform!r}; one of {', '.join(PLATFORMS)}")
    parts = python.split(".")
    full = ".".join(parts + ["0"] * (3 - len(parts)))
    return {**PLATFORMS[platform][2], "python_version": ".".join(parts[:2]),
            "python_full_version": full, "implementation_name": "cpython",
            "platform_python_implementation": "CPython", "implementation_version": full,
            "platform_release": "", "platform_version": "", "extra": ""}


def pins(entries: list[Locked], environment: dict[str, str]) -> dict[str, str]:
    """{name: version} of the entries that apply in `environment`; ValueError if two versions
    of one package do (a lock that does not say which one a machine gets)."""
    found: dict[str, str] = {}
    for entry in entries:
        if entry.applies(environment):
            if found.setdefault(entry.name, entry.version) != entry.version:
                raise ValueError(f"lock: {entry.name} has two versions for "
                                 f"{environment.get('sys_platform')} Python "
                                 f"{environment.get('python_full_version')}")
    return found
