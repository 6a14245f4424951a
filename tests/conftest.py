"""Shared fixtures for the unit tests."""

import pytest
import ray

from course_lib import init_ray


@pytest.fixture(scope="session")
def ray_local():
    """One local 2-CPU Ray instance shared by every test that needs Ray."""
    init_ray(num_cpus=2)
    yield ray
    ray.shutdown()
