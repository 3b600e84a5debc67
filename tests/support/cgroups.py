"""Whether a test may write real cgroups here: root and a cgroup v1 hierarchy, or a skip saying why.

Shared by the QoS integration tests and the `tessera bench qos` test, which measure on cgroup v1
(v2 is covered by the fixture-tree unit tests)."""

from __future__ import annotations

import os

import pytest

from agent.qos.cgroups import CgroupError, Hierarchy
from agent.qos.knobs import CgroupVersion

__all__ = ["v1_hierarchy"]


def v1_hierarchy() -> Hierarchy:
    """This machine's cgroup v1 hierarchy; skips the calling test when not root or there is none."""
    if os.geteuid() != 0:
        pytest.skip("needs root: creates cgroups under /sys/fs/cgroup")
    try:
        hierarchy = Hierarchy.detect()
    except CgroupError as e:
        pytest.skip(f"no cgroup hierarchy: {e}")
    if hierarchy.version is not CgroupVersion.V1:
        pytest.skip("these tests exercise cgroup v1 (v2 is covered by the fixture-tree unit tests)")
    return hierarchy
