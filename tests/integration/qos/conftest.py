"""Real cgroups for QoS tests: a uniquely named kubepods-like subtree, processes in it, full cleanup.

Every test gets `/sys/fs/cgroup/<controller>/tessera-qos-test-<random>/kubepods/{burstable,besteffort}`
(cgroupfs layout; `agent.qos.scratch.ScratchTree`) in each v1 controller QoS uses; processes the
test starts are killed and every cgroup removed afterwards, whatever happened. Skips with the
reason when not root or when the machine has no writable cgroup v1 cpu/memory hierarchy.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent.qos.cgroups import CgroupError
from agent.qos.scratch import ScratchTree
from tests.support import cgroups


@pytest.fixture
def real_tree() -> Iterator[ScratchTree]:
    hierarchy = cgroups.v1_hierarchy()
    try:
        tree = ScratchTree(hierarchy, prefix="tessera-qos-test")
    except (CgroupError, OSError) as e:
        pytest.skip(f"cannot create cgroups under {hierarchy.mounts['cpu']}: {e}")
    with tree:
        yield tree
