import importlib

import pytest


@pytest.mark.parametrize("package", ["agent.hooks", "agent.ledger", "runtimeproxy"])
def test_all_is_sorted_and_complete(package: str) -> None:
    module = importlib.import_module(package)
    assert list(module.__all__) == sorted(module.__all__)
    for name in module.__all__:
        assert hasattr(module, name), name
