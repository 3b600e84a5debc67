"""Real cgroups for QoS tests: a uniquely named kubepods-like subtree, processes in it, full cleanup.

Every test gets `/sys/fs/cgroup/<controller>/tessera-qos-test-<random>/kubepods/{burstable,besteffort}`
(cgroupfs layout; `agent.qos.scratch.ScratchTree`) in each v1 controller QoS uses; processes the
test starts are killed and every cgroup removed afterwards, whatever happened. Skips with the
reason when not root or when the machine has no writable cgroup v1 cpu/memory hierarchy.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from agent.qos.cgroups import CgroupError, Hierarchy
from agent.qos.knobs import CgroupVersion
from agent.qos.scratch import ScratchTree


@pytest.fixture
def real_tree() -> Iterator[ScratchTree]:
    if os.geteuid() != 0:
        pytest.skip("needs root: creates cgroups under /sys/fs/cgroup")
    try:
        hierarchy = Hierarchy.detect()
    except CgroupError as e:
        pytest.skip(f"no cgroup hierarchy: {e}")
    if hierarchy.version is not CgroupVersion.V1:
        pytest.skip("these tests exercise cgroup v1 (v2 is covered by the fixture-tree unit tests)")
    try:
        tree = ScratchTree(hierarchy, prefix="tessera-qos-test")
    except (CgroupError, OSError) as e:
        pytest.skip(f"cannot create cgroups under {hierarchy.mounts['cpu']}: {e}")
    with tree:
        yield tree
