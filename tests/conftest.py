"""Shared test settings: hypothesis profiles (deterministic in CI, no wall-clock deadlines), e2e last."""

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """End-to-end tests run last: they take longest, and a failure below them says more."""
    items.sort(key=lambda item: item.get_closest_marker("e2e") is not None)
