"""Pods, Nodes and Device CRs in Koordinator's deprecated names (`kubernetes.io/gpu-core`, ...),
parsed from their JSON as the scheduler's informers parse them: they schedule exactly like the
`koordinator.sh/` ones, share GPUs with them and are counted with them (never past 100%), also
where NodeResourcesFit compares requests with node allocatable by name."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest

from apis.crds.device import Device, DeviceType
from apis.extension import allocation, devicetypes, names
from apis.k8s.core import Node, Pod
from cli.launchers.scheduler import node_manifest, pod_manifest
from scheduler.core import Scheduler
from scheduler.framework.config import load_config
from scheduler.simulation.cluster import NodeShape, gpu_node

OLD_HALF = {names.DEPRECATED_GPU_CORE: "50", names.DEPRECATED_GPU_MEMORY_RATIO: "50"}
NEW_HALF = {names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50"}
#: NodeResourcesFit checking device resources against node allocatable too (not left to DeviceShare).
FIT_CHECKS_DEVICES = """
profiles:
  - schedulerName: tessera-scheduler
    pluginConfig:
      - name: NodeResourcesFit
        args: {ignoredResources: []}
"""
ANNOTATION = names.ANNOTATION_DEVICE_ALLOCATED
_OLD_SPELLING = {new: old for old, new in devicetypes.DEPRECATED_NAMES.items()}


def pod(name: str, requests: dict[str, str]) -> Pod:
    return Pod.from_dict(pod_manifest(name, {names.CPU: "1", **requests}))


def old_koordinator_node(node: Node) -> Node:
    """`node` as Koordinator before v1.2 published it: device resources under the deprecated names."""
    manifest = node_manifest(node)
    for field in ("allocatable", "capacity"):
        status = manifest["status"][field]
        manifest["status"][field] = {_OLD_SPELLING.get(k, k): v for k, v in status.items()}
    assert names.DEPRECATED_GPU_CORE in manifest["status"]["allocatable"]
    return Node.from_dict(manifest)


def one_gpu_scheduler(config: str | None = None, *, old_node: bool = False) -> Scheduler:
    node, device = gpu_node("gpu-1", NodeShape(gpus=1, nics_per_switch=0))
    scheduler = Scheduler(load_config(config) if config else None)
    scheduler.cache.add_node(old_koordinator_node(node) if old_node else node)
    scheduler.cache.add_device(device)
    return scheduler


def gpu_shares(annotations: Mapping[str, str]) -> list[tuple[int, dict[str, int]]]:
    gpus = allocation.from_pod_annotations(annotations).get(DeviceType.GPU, ())
    return [(a.minor, dict(a.resources)) for a in gpus]


@pytest.mark.parametrize(
    ("config", "old_node"),
    [(None, False), (FIT_CHECKS_DEVICES, False), (FIT_CHECKS_DEVICES, True)],
    ids=["default", "fit-checks-devices", "fit-checks-devices-on-an-old-node"],
)
def test_both_spellings_share_one_gpu_and_add_up_to_it(config: str | None, old_node: bool) -> None:
    scheduler = one_gpu_scheduler(config, old_node=old_node)
    old = scheduler.schedule_one(pod("old", OLD_HALF))
    new = scheduler.schedule_one(pod("new", NEW_HALF))
    assert (old.node, new.node) == ("gpu-1", "gpu-1"), (old.status, new.status)
    # The annotation of the deprecated-name pod is the one a koordinator.sh pod gets.
    assert gpu_shares(old.annotations) == gpu_shares(new.annotations)
    assert gpu_shares(old.annotations)[0][1][names.GPU_CORE] == 50
    # Half + half is the whole GPU: a third half, in either spelling, fits nowhere.
    for name, requests in (("third-old", OLD_HALF), ("third-new", NEW_HALF)):
        third = scheduler.schedule_one(pod(name, requests))
        assert third.node is None, name
        # Short of GPU, never of a resource "no node offers" (the deprecated name).
        assert "Insufficient" in str(third.status), third.status
        assert names.DEPRECATED_RESOURCE_DOMAIN not in str(third.status), third.status


def test_a_running_pod_annotated_by_an_older_scheduler_is_counted() -> None:
    scheduler = one_gpu_scheduler()
    old_share = {
        names.DEPRECATED_GPU_CORE: "50",
        names.DEPRECATED_GPU_MEMORY: "40Gi",
        names.DEPRECATED_GPU_MEMORY_RATIO: "50",
    }
    annotation = json.dumps({"gpu": [{"minor": 0, "resources": old_share}]})
    manifest = pod_manifest(
        "running", {names.CPU: "1", **OLD_HALF}, node_name="gpu-1", annotations={ANNOTATION: annotation}
    )
    scheduler.cache.add_pod(Pod.from_dict(manifest))
    assert scheduler.schedule_one(pod("half", NEW_HALF)).node == "gpu-1"
    assert scheduler.schedule_one(pod("one-more", {names.GPU_CORE: "10", names.GPU_MEMORY_RATIO: "10"})).node is None


def test_one_resource_in_both_spellings_is_refused_with_a_clear_reason() -> None:
    scheduler = one_gpu_scheduler()
    mixed = scheduler.schedule_one(pod("mixed", {**NEW_HALF, names.DEPRECATED_GPU_CORE: "50"}))
    assert mixed.node is None
    assert "kubernetes.io/gpu-core and koordinator.sh/gpu-core are the same resource" in str(mixed.status)


def test_a_device_cr_in_deprecated_names_offers_its_gpus() -> None:
    node, device = gpu_node("gpu-1", NodeShape(gpus=1, nics_per_switch=0))
    raw = device.to_dict()
    for dev in raw["spec"]["devices"]:
        dev["resources"] = {_OLD_SPELLING.get(k, k): v for k, v in dev["resources"].items()}
    assert names.DEPRECATED_GPU_CORE in raw["spec"]["devices"][0]["resources"]
    scheduler = Scheduler()
    scheduler.cache.add_node(node)
    scheduler.cache.add_device(Device.from_dict(raw))
    assert scheduler.schedule_one(pod("old", OLD_HALF)).node == "gpu-1"
    assert scheduler.schedule_one(pod("new", NEW_HALF)).node == "gpu-1"
    assert scheduler.schedule_one(pod("third", NEW_HALF)).node is None
