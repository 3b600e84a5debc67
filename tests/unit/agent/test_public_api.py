"""The agent packages this suite covers export a complete `__all__` (ruff's RUF022 keeps it sorted)."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize(
    "package", ["agent", "agent.discovery", "agent.health", "agent.kubeletsim", "agent.metrics", "agent.qos"]
)
def test_all_is_complete(package: str) -> None:
    module = importlib.import_module(package)
    assert len(set(module.__all__)) == len(module.__all__)
    for name in module.__all__:
        assert hasattr(module, name), name
