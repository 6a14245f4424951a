"""requirements/lock.txt, the tested environment at exact versions (`make lock`), agrees with
pyproject.toml's pins and with the environment the tests run in, and every install route
(make, conda, offline, cluster) installs with it as pip constraints."""

import re
import sys
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from scripts import lock as locker

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "lock.txt"
LINE = re.compile(r"^([a-z0-9][a-z0-9-]*)==([0-9][0-9a-z.!]*)(; .+)?$")


def locked() -> dict[str, Requirement]:
    lines = [line for line in LOCK.read_text().splitlines() if not line.startswith("#")]
    bad = [line for line in lines if not LINE.match(line)]
    assert not bad, f"not `name==version[; marker]` (canonical name, no +local): {bad}"
    names = [line.split("==")[0] for line in lines]
    assert names == sorted(names), "the lock is sorted by name"
    return {Requirement(line).name: Requirement(line) for line in lines}


def test_lock_has_pyprojects_pins_and_markers():
    """Every direct pin is in the lock at the same version and under the same marker: change
    a pin in pyproject.toml without `make lock` and this fails."""
    lock = locked()
    _, base, extras = locker.project_requirements()
    for req in base + [r for group in extras.values() for r in group]:
        if req.name == "course-lib":                       # an extra made of other extras
            continue
        name = canonicalize_name(req.name)
        assert name in lock, f"{req.name} is pinned in pyproject.toml but not locked: make lock"
        assert lock[name].specifier == req.specifier, f"{name}: {lock[name]} against {req}"
        assert str(lock[name].marker or "") == str(req.marker or ""), name


def test_the_installed_environment_is_the_locked_one():
    """What the tests run in (installed from the lock) has the lock's versions. What torch
    brings depends on its build (the CUDA build adds nvidia-* and cuda-* libraries, which a
    lock written with the CPU build lacks); every other package is in the lock."""
    lock = locked()
    installed = locker.closure()
    wrong = {name: (version, str(lock[name].specifier)) for name, version in installed.items()
             if name in lock and not lock[name].specifier.contains(version, prereleases=True)}
    assert not wrong, f"installed here (version, lock): {wrong}: make lock, or reinstall"
    missing = set(locker.closure(leaves=frozenset({"torch"}))) - set(lock)
    assert not missing, f"installed through the pins but not locked: {sorted(missing)}"


def test_markers_keep_the_lock_valid_on_every_supported_python():
    """cpprb has no wheels for 3.13: the lock says so, as pyproject.toml does."""
    cpprb = locked()["cpprb"]
    env = {"python_version": "3.13", "python_full_version": "3.13.0"}
    assert not cpprb.marker.evaluate(env)
    assert cpprb.marker.evaluate({**env, "python_version": "3.11"})


def test_the_lock_check_sees_a_stale_lock(tmp_path, monkeypatch):
    """`scripts/lock.py --check` (what a contributor runs after a pin change) fails when the
    lock differs from the environment, and passes when it is the one it writes."""
    stale = tmp_path / "lock.txt"
    monkeypatch.setattr(locker, "LOCK", stale)
    stale.write_text(locker.render(locker.closure()))
    monkeypatch.setattr(sys, "argv", ["lock.py", "--check"])
    try:
        locker.main()
    except SystemExit as done:
        assert done.code == 0
    stale.write_text(stale.read_text().replace("\nray==", "\nray==0.0.1\n#"))
    try:
        locker.main()
        raise AssertionError("a stale lock passed the check")
    except SystemExit as done:
        assert done.code == 1


def test_conda_installs_with_the_lock():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    [pip] = [d["pip"] for d in env["dependencies"] if isinstance(d, dict)]
    assert pip[0] == "-c requirements/lock.txt" and pip[1].startswith("-e .[attendee")
