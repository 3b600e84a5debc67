"""The reconciler, the enforcement order and the hook plugin on real cgroup v1 files."""

from __future__ import annotations

import pytest

from agent.qos import config, enforce, knobs
from agent.qos.cgroups import CgroupError
from agent.qos.config import QoSConfig
from agent.qos.hook import QoSHookPlugin
from agent.qos.knobs import CPUMax
from agent.qos.reconciler import Reconciler
from agent.qos.scratch import ScratchTree
from apis.extension.qos import KubeQoSClass
from apis.k8s.core import Pod
from proto.runtime.v1alpha1 import api_pb2
from tests.support.qos import batch_ctr, ctr, make_pod

pytestmark = [pytest.mark.integration, pytest.mark.root]

MiB = 2**20
BE_IDLE = config.load("resourceQOSStrategy: {beClass: {cpuQOS: {enable: true, schedIdle: 1}}}")


def v1_file(tree: ScratchTree, controller: str, rel: str, name: str) -> str:
    return (tree.hierarchy.path(controller, rel) / name).read_text().strip()


def reconciler(tree: ScratchTree, pods: list[Pod], cfg: QoSConfig | None = None) -> Reconciler:
    return Reconciler(cgroups=tree.kube, pods=lambda: pods, config=cfg or QoSConfig())


def test_reconciler_writes_real_v1_files(real_tree: ScratchTree) -> None:
    ls = make_pod(ctr("a", {"cpu": "500m", "memory": "64Mi"}, {"cpu": "1", "memory": "128Mi"}))
    lsr = make_pod(ctr("a", limits={"cpu": "2", "memory": "256Mi"}))
    be = make_pod(
        batch_ctr("a", cpu_request="500", cpu_limit="1500", memory_limit="96Mi"),
        qos="BE",
    )
    pods = [ls, lsr, be]
    cgs = {p.uid: real_tree.add_pod(p) for p in pods}
    r = reconciler(real_tree, pods)

    report = r.reconcile_once()
    assert report.errors == {} and report.applied == 3

    def read(pod: Pod, controller: str, name: str) -> str:
        return v1_file(real_tree, controller, cgs[pod.uid].rel, name)

    assert cgs[lsr.uid].rel.endswith(f"kubepods/pod{lsr.uid}")  # Guaranteed: directly under kubepods
    assert (read(ls, "cpu", "cpu.shares"), read(ls, "cpu", "cpu.cfs_quota_us")) == ("512", "100000")
    assert read(ls, "memory", "memory.limit_in_bytes") == str(128 * MiB)
    assert (read(lsr, "cpu", "cpu.shares"), read(lsr, "cpu", "cpu.cfs_quota_us")) == ("2048", "200000")
    assert (read(be, "cpu", "cpu.shares"), read(be, "cpu", "cpu.cfs_quota_us")) == ("512", "150000")
    assert read(be, "memory", "memory.limit_in_bytes") == str(96 * MiB)
    container = cgs[be.uid].children()[0]
    assert v1_file(real_tree, "cpu", container.rel, "cpu.cfs_quota_us") == "150000"

    again = r.reconcile_once()
    assert again.changes == [] and again.errors == {}


def test_cpu_idle_and_shares_in_the_order_the_kernel_accepts(real_tree: ScratchTree) -> None:
    be = make_pod(ctr("a"), qos="BE")
    pod_cg = real_tree.add_pod(be)
    if not pod_cg.supports(knobs.CPU_IDLE):
        pytest.skip("kernel without cpu.idle (< 5.15)")
    r = reconciler(real_tree, [be], BE_IDLE)
    assert r.reconcile_once().errors == {}
    assert v1_file(real_tree, "cpu", pod_cg.rel, "cpu.idle") == "1"
    assert v1_file(real_tree, "cpu", pod_cg.rel, "cpu.shares") == "3"  # the kernel's idle weight
    be_root = real_tree.kube.qos_dir(KubeQoSClass.BEST_EFFORT)
    assert v1_file(real_tree, "cpu", be_root.rel, "cpu.idle") == "1"
    with pytest.raises(CgroupError, match="kernel rejected"):
        pod_cg.write(knobs.CPU_SHARES, 100)  # why enforce never writes shares while idle
    assert r.reconcile_once().changes == []  # idle + skipped shares is a steady state

    r.set_config(QoSConfig())
    assert r.reconcile_once().errors == {}
    assert v1_file(real_tree, "cpu", pod_cg.rel, "cpu.idle") == "0"
    assert v1_file(real_tree, "cpu", pod_cg.rel, "cpu.shares") == "2"  # restored after idle reset it to 1024
    assert v1_file(real_tree, "cpu", be_root.rel, "cpu.idle") == "0"


def test_v1_parent_child_quota_rules(real_tree: ScratchTree) -> None:
    be = make_pod(batch_ctr("a", cpu_request="1000", cpu_limit="2000"), qos="BE")
    pod_cg = real_tree.add_pod(be)
    r = reconciler(real_tree, [be])
    r.reconcile_once()
    be_root = real_tree.kube.qos_dir(KubeQoSClass.BEST_EFFORT)

    with pytest.raises(CgroupError, match=r"cpu\.cfs_quota_us: value '50000': kernel rejected"):
        be_root.write(knobs.CPU_MAX, CPUMax(50_000))  # the kernel's rule: not below a child
    enforce.Enforcer().limit_subtree(be_root, CPUMax(50_000))
    assert v1_file(real_tree, "cpu", be_root.rel, "cpu.cfs_quota_us") == "50000"
    assert v1_file(real_tree, "cpu", pod_cg.rel, "cpu.cfs_quota_us") == "50000"

    capped = r.reconcile_once()  # the pod wants 2 cores, the BE cgroup allows 0.5: capped, no error
    assert capped.errors == {}
    assert v1_file(real_tree, "cpu", pod_cg.rel, "cpu.cfs_quota_us") == "50000"

    be_root.write(knobs.CPU_MAX, CPUMax(-1))  # suppression lifted
    assert r.reconcile_once().errors == {}
    assert v1_file(real_tree, "cpu", pod_cg.rel, "cpu.cfs_quota_us") == "200000"


def test_memory_protection_files_missing_on_v1_are_not_errors(real_tree: ScratchTree) -> None:
    cfg = config.load("resourceQOSStrategy: {lsClass: {memoryQOS: {enable: true, minLimitPercent: 100}}}")
    ls = make_pod(ctr("a", {"memory": "32Mi"}, {"memory": "64Mi"}))
    pod_cg = real_tree.add_pod(ls)
    report = reconciler(real_tree, [ls], cfg).reconcile_once()
    assert report.errors == {} and report.applied == 1
    if pod_cg.supports(knobs.MEMORY_MIN):  # an Anolis-style kernel has them
        assert v1_file(real_tree, "memory", pod_cg.rel, "memory.min") == str(32 * MiB)


def test_a_vanished_pod_cgroup_is_missing_not_an_error(real_tree: ScratchTree) -> None:
    ls = make_pod(ctr("a", {"cpu": "100m"}))
    real_tree.add_pod(ls).remove()
    report = reconciler(real_tree, [ls]).reconcile_once()
    assert (report.missing, report.errors) == (1, {})


def test_hook_caps_a_new_be_container_under_suppression(real_tree: ScratchTree) -> None:
    be = make_pod(batch_ctr("a", cpu_request="1000", cpu_limit="2000"), qos="BE")
    real_tree.kube.pod_dir(be.uid, KubeQoSClass.BEST_EFFORT).create()  # kubelet made the pod cgroup
    real_tree.kube.qos_dir(KubeQoSClass.BEST_EFFORT).write(knobs.CPU_MAX, CPUMax(50_000))
    plugin = QoSHookPlugin(config=QoSConfig(), pods={be.uid: be}.get, cgroups=real_tree.kube)
    request = api_pb2.ContainerResourceHookRequest(
        pod_meta=api_pb2.PodSandboxMetadata(name=be.name, namespace=be.namespace, uid=be.uid),
        container_meta=api_pb2.ContainerMetadata(name="a"),
        container_resources=api_pb2.LinuxContainerResources(cpu_shares=2),
    )
    response = api_pb2.ContainerResourceHookResponse()
    plugin.pre_create_container(request, response)
    r = response.container_resources
    assert (r.cpu_shares, r.cpu_period, r.cpu_quota) == (1024, 100_000, 50_000)  # runc would fail at 200000
    assert dict(r.unified) == {}  # runc rejects unified on v1
