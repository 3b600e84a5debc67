"""A memory limit QoS writes (batch-memory of a BE pod) is really enforced by the kernel."""

from __future__ import annotations

import pytest

from agent.qos.config import QoSConfig
from agent.qos.reconciler import Reconciler
from agent.qos.scratch import ScratchTree
from tests.support.qos import batch_ctr, make_pod

pytestmark = [pytest.mark.integration, pytest.mark.root]

MiB = 2**20
# Touch every page so the memory is really charged to the cgroup.
ALLOCATE = "n = {mib} * 2**20\nb = bytearray(n)\nfor i in range(0, n, 4096):\n    b[i] = 1\n"


def swap_active() -> bool:
    with open("/proc/swaps") as f:
        return len(f.read().splitlines()) > 1


def test_batch_memory_limit_kills_what_exceeds_it(real_tree: ScratchTree) -> None:
    if swap_active():
        pytest.skip("swap is on: an over-limit process would swap instead of being OOM-killed")
    be = make_pod(
        batch_ctr("a", memory_request="48Mi", memory_limit="48Mi"),
        qos="BE",
    )
    pod_cg = real_tree.add_pod(be)
    report = Reconciler(cgroups=real_tree.kube, pods=lambda: [be], config=QoSConfig()).reconcile_once()
    assert report.errors == {}
    container_cg = pod_cg.children()[0]
    limit_file = real_tree.hierarchy.path("memory", container_cg.rel) / "memory.limit_in_bytes"
    assert limit_file.read_text().strip() == str(48 * MiB)

    small = real_tree.spawn(container_cg, ALLOCATE.format(mib=8))
    assert small.wait(timeout=60) == 0  # within the limit: runs to the end

    big = real_tree.spawn(container_cg, ALLOCATE.format(mib=256))
    assert big.wait(timeout=60) == -9  # SIGKILL from the cgroup's OOM killer
    oom = (real_tree.hierarchy.path("memory", container_cg.rel) / "memory.oom_control").read_text()
    assert "oom_kill 1" in oom.splitlines()
