from pathlib import Path

import pytest

from tests.support.qos import V2Tree


@pytest.fixture
def v2(tmp_path: Path) -> V2Tree:
    """An empty cgroup-v2 fixture tree (the root cgroup only) in a temporary directory."""
    return V2Tree(tmp_path / "cgroup")
