"""Real cgroups for QoS tests: a uniquely named kubepods-like subtree, processes in it, full cleanup.

Every test gets `/sys/fs/cgroup/<controller>/tessera-test-<random>/kubepods/{burstable,besteffort}`
(cgroupfs layout) in each v1 controller QoS uses; processes the test starts are killed and every
cgroup removed afterwards, whatever happened. Skips with the reason when not root or when the
machine has no writable cgroup v1 cpu/memory hierarchy.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from agent.qos import knobs
from agent.qos.cgroups import Cgroup, CgroupError, Hierarchy
from agent.qos.knobs import CgroupVersion
from agent.qos.layout import KubeCgroups, parse_container_id
from apis.core import Pod
from apis.qos import KubeQoSClass, kube_qos_class

pytestmark = [pytest.mark.integration, pytest.mark.root]


@dataclass
class RealTree:
    hierarchy: Hierarchy
    kube: KubeCgroups
    base: Cgroup
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def add_pod(self, pod: Pod) -> Cgroup:
        """mkdir the pod's cgroup and its containers' where kubelet and containerd would."""
        pod_cg = self.kube.pod_dir(pod.uid, kube_qos_class(pod)).create()
        for raw in pod.container_ids.values():
            pod_cg.child(self.kube.container_names(parse_container_id(raw))[0]).create()
        return pod_cg

    def spawn(self, cg: Cgroup, code: str) -> subprocess.Popen[bytes]:
        """Start `python -c code` and move it into `cg`; it waits for a line on stdin before running.

        So whatever it does (spin, allocate) happens inside the cgroup. Killed at teardown.
        """
        proc = subprocess.Popen(
            [sys.executable, "-c", f"import sys; sys.stdin.readline()\n{code}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.procs.append(proc)
        cg.add_process(proc.pid)
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        proc.stdin.close()
        return proc


def _require_v1_root() -> Hierarchy:
    if os.geteuid() != 0:
        pytest.skip("needs root: creates cgroups under /sys/fs/cgroup")
    try:
        hierarchy = Hierarchy.detect()
    except CgroupError as e:
        pytest.skip(f"no cgroup hierarchy: {e}")
    if hierarchy.version is not CgroupVersion.V1:
        pytest.skip("these tests exercise cgroup v1 (v2 is covered by the fixture-tree unit tests)")
    return hierarchy


@pytest.fixture
def real_tree() -> Iterator[RealTree]:
    hierarchy = _require_v1_root()
    base = hierarchy.cgroup(f"tessera-test-{uuid.uuid4().hex[:12]}")
    try:
        for rel in ("kubepods/burstable", "kubepods/besteffort"):
            base.child(rel).create()
    except OSError as e:
        base.remove()
        pytest.skip(f"cannot create cgroups under {hierarchy.mounts['cpu']}: {e}")
    tree = RealTree(hierarchy, KubeCgroups.detect(hierarchy, base.rel), base)
    tree.kube.qos_dir(KubeQoSClass.BEST_EFFORT).write(knobs.CPU_SHARES, 2)  # as kubelet sets it
    try:
        yield tree
    finally:
        for proc in tree.procs:
            proc.kill()
            proc.wait(timeout=10)
        _remove(base)


def _remove(base: Cgroup) -> None:
    """rmdir the subtree; a killed task can take a moment to leave its cgroup (EBUSY)."""
    deadline = time.monotonic() + 10
    while True:
        try:
            base.remove()
            return
        except CgroupError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
