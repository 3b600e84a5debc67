"""The controller's public surface: sorted, complete __all__ lists."""

import importlib

import pytest


@pytest.mark.parametrize(
    "package",
    ["controller", "controller.runtime", "controller.noderesources", "controller.podgroups", "controller.webhook"],
)
def test_all_is_sorted_and_complete(package: str) -> None:
    module = importlib.import_module(package)
    assert list(module.__all__) == sorted(module.__all__)
    for name in module.__all__:
        assert hasattr(module, name), name
