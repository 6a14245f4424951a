"""requirements/lock.txt (`make lock`: uv's universal resolution, with hashes) agrees with
pyproject.toml's pins and floors on every supported platform and Python, with the environment
the tests run in, and with the uv every route installs it with. All offline: writing the lock
needs PyPI, checking it does not."""

import importlib.metadata as md
import re

import pytest
import yaml
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from course_lib.cluster import lockfile
from scripts import lock as locker

ROOT = locker.ROOT
LOCK = lockfile.read_lock(locker.LOCK)
#: every supported machine: each platform of the lock x each supported Python
MACHINES = [(platform, python) for platform in lockfile.PLATFORMS
            for python in locker.supported_pythons()]


def project_pins() -> list[Requirement]:
    """pyproject.toml's pins, base and extras (not the extras made of other extras)."""
    project = locker.tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + [r for group in project["optional-dependencies"].values()
                                      for r in group]
    return [Requirement(r) for r in reqs if not r.startswith("course-lib")]


@pytest.mark.parametrize("platform, python", MACHINES)
def test_every_machine_gets_pyprojects_pins(platform, python):
    """On every supported machine the lock gives one version of each package, and each pin
    of pyproject.toml at its version, under its marker (cpprb: not on 3.13): change a pin
    without `make lock` and this fails."""
    env = lockfile.marker_environment(platform, python)
    pins = lockfile.pins(LOCK, env)                    # ValueError if two versions apply
    for req in project_pins():
        name = canonicalize_name(req.name)
        if req.marker is not None and not req.marker.evaluate(env):
            assert name not in pins, f"{name} is locked for {platform} {python}, its marker says no"
            continue
        assert name in pins, f"{req} is in pyproject.toml but not locked for {platform} " \
                             f"Python {python}: make lock"
        assert req.specifier.contains(pins[name]), f"{name}: lock {pins[name]}, pyproject {req}"


def test_every_file_has_its_hash_and_nothing_else_is_locked():
    assert len(LOCK) > 150
    assert all(entry.hashes for entry in LOCK), [e.name for e in LOCK if not e.hashes]
    names = [entry.name for entry in LOCK]
    assert names == sorted(names)


def test_the_cluster_extra_resolves_dateutil_for_botocore():
    """Issue 39: every botocore requires python-dateutil<3; the lock had 4.0.0, so nothing
    could install boto3 at the lock's versions. Now boto3 is locked with the rest."""
    pins = lockfile.pins(LOCK, lockfile.marker_environment("linux-x86_64", "3.11.14"))
    assert "boto3" in pins and "botocore" in pins
    botocore_dateutil = [r for r in map(Requirement, md.requires("botocore") or [])
                         if canonicalize_name(r.name) == "python-dateutil"]
    assert botocore_dateutil and botocore_dateutil[0].specifier.contains(pins["python-dateutil"])


def test_the_header_records_the_command_that_wrote_the_lock():
    """The lock says how it was made, and it is what scripts/lock.py runs today: a lock made
    another way (or for other Pythons) fails here."""
    assert locker.LOCK.read_text().startswith(locker.header())


def test_the_floors_are_declared():
    """soupsieve 4.1.3 needs Python 3.11.5: requires-python says so, and the oldest Python
    the lock is resolved for is that floor (Debian 12's 3.11.2 is refused before installing)."""
    floor = locker.supported_pythons()[0]
    assert floor == "3.11.5" and "3.11.2" not in locker.requires_python()
    soupsieve = [e for e in LOCK if e.name == "soupsieve"]
    assert len(soupsieve) == 1
    assert locker.supported_pythons()[1:] == ["3.12", "3.13"]
    readme = (ROOT / "README.md").read_text()
    assert "3.11.5" in readme and "macOS 14" in readme


def test_the_installed_environment_is_the_locked_one():
    """What the tests run in (installed from the lock) is the lock on this machine: every
    package the project needs here, at the lock's version, and none the lock lacks."""
    here = lockfile.pins(LOCK, {**default_environment(), "extra": ""})
    installed = closure()
    missing = sorted(set(installed) - set(here))
    assert not missing, f"installed through the pins but not locked: {missing}"
    wrong = {name: (version, here[name]) for name, version in installed.items()
             if version.split("+")[0] != here[name]}
    assert not wrong, f"installed here (version, lock): {wrong}: reinstall (make install)"


def closure() -> dict[str, str]:
    """{name: installed version} of everything `course-lib[test]` needs here, walked through
    the installed metadata."""
    wanted = [Requirement("course-lib[test]")]
    found: dict[str, str] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    while wanted:
        req = wanted.pop()
        key = canonicalize_name(req.name)
        if (key, frozenset(req.extras)) in seen:
            continue
        seen.add((key, frozenset(req.extras)))
        dist = md.distribution(req.name)
        if key != "course-lib":
            found[key] = dist.version
        for sub in map(Requirement, dist.requires or []):
            if sub.marker is None or any(sub.marker.evaluate({"extra": e})
                                         for e in ("", *req.extras)):
                wanted.append(sub)
    return found


def test_uv_is_pinned_once_and_hashed():
    """requirements/uv.in pins the installer; uv.txt (its hashes) and the cluster's install
    script URL follow it."""
    [pin] = [line for line in (ROOT / "requirements/uv.in").read_text().splitlines()
             if line and not line.startswith("#")]
    [uv] = lockfile.read_lock(ROOT / "requirements/uv.txt")
    assert pin == f"uv=={uv.version}" and len(uv.hashes) > 5
    setup = " ".join(yaml.safe_load((ROOT / "cluster/aws.yaml").read_text())["setup_commands"])
    assert re.findall(r"astral\.sh/uv/([\d.]+)/install\.sh", setup) == [uv.version]


def test_the_lock_check_compares_packages_not_the_header():
    text = locker.LOCK.read_text()
    assert locker.body("# another header\n" + text) == locker.body(text)
    assert locker.body(text.replace("\nray==2.60.0", "\nray==2.59.0")) != locker.body(text)


def test_conda_takes_a_python_with_every_locked_wheel():
    """environment.yml's Python is one minor version (conda-forge's latest patch of it) on
    which every pin applies: 3.11 or 3.12, not 3.13 (no cpprb wheel there)."""
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    [python] = [d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python")]
    version = python.removeprefix("python=")
    assert re.fullmatch(r"3\.1[12]", version), python
    pins = lockfile.pins(LOCK, lockfile.marker_environment("linux-x86_64", version))
    assert {canonicalize_name(r.name) for r in project_pins()} <= set(pins)
