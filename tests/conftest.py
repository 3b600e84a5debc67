"""Shared test settings: hypothesis profiles (deterministic in CI, no wall-clock deadlines), e2e
last, and the private containerd the runtime proxy's integration and end-to-end tests share."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from tests.support.containerd import Containerd

from tests.support import sockets

settings.register_profile(
    "ci", max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """End-to-end tests run last: they take longest, and a failure below them says more."""
    items.sort(key=lambda item: item.get_closest_marker("e2e") is not None)


@pytest.fixture(scope="session")
def ctrd() -> Iterator[Containerd]:
    """One private containerd + runc for the session; skips, saying why, where it cannot run."""
    from tests.support import containerd  # grpc and the CRI stubs: only for the tests that need them

    reason = containerd.unavailable_reason()
    if reason is not None:
        pytest.skip(f"real containerd tests skipped: {reason}")
    with containerd.Containerd.start() as instance:
        yield instance


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    """A short temporary directory: unix socket paths must stay under 108 bytes."""
    with sockets.temporary() as path:
        yield path
