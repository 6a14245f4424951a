"""Shared fixtures for the unit tests, and for the browser tests (marker `browser`)."""

import os
from pathlib import Path

import pytest
import ray

from course_lib import init_ray


@pytest.fixture(scope="session")
def ray_local():
    """One local 2-CPU Ray instance shared by every test that needs Ray."""
    init_ray(num_cpus=2)
    yield ray
    ray.shutdown()


@pytest.fixture
def by_value(request):
    """Actors unpickle the test module's classes and functions by value (they cannot import
    it), for the test."""
    ray.cloudpickle.register_pickle_by_value(request.module)
    yield
    ray.cloudpickle.unregister_pickle_by_value(request.module)


# --------------------------------------------------------------------------------------------
# Headless Chromium (tests marked `browser`): Debian's `chromium`, installed by `make chromium`
# --------------------------------------------------------------------------------------------

ARTIFACTS = Path(__file__).resolve().parents[1] / "build" / "test-artifacts"


@pytest.fixture(scope="session")
def chromium_path():
    """Chromium's path; without one the browser tests skip, except in CI where they fail."""
    from scripts.slides import BuildError, find_chromium

    try:
        return find_chromium()
    except BuildError as err:
        if os.environ.get("CI"):
            pytest.fail(str(err))
        pytest.skip(str(err))


@pytest.fixture(scope="session")
def browser(chromium_path):
    """One headless Chromium for the session, driven by Playwright."""
    from playwright.sync_api import sync_playwright

    from scripts.slides import chromium_args

    with sync_playwright() as p:
        args = [a for a in chromium_args() if a != "--headless"]
        b = p.chromium.launch(executable_path=chromium_path, args=args, timeout=60_000)
        yield b
        b.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where browser tests keep their screenshots (gitignored with build/)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
