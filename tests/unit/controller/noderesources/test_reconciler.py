"""The reconciler over real caches (kube.cache.Store) with a recording Node writer and a fake clock:
what it writes, when it waits, what it refuses."""

from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from apis.crds.device import Device
from apis.errors import ConfigError, ValidationError
from apis.extension import names
from apis.k8s import resources
from apis.k8s.core import Node
from controller.noderesources.desired import from_device
from controller.noderesources.metrics import NodeResourcesMetrics
from controller.noderesources.reconciler import (
    REASON_MALFORMED_DEVICE,
    NodeResourcesReconciler,
    NodeResourcesSettings,
)
from controller.runtime import Malformed, PermanentError, Result
from kube.cache import Store
from kube.errors import NotFound
from kube.events import ObjectReference
from tests.support.clocks import FakeClock
from tests.unit.controller.noderesources.devices import NVIDIA_LABELS, GiB, make_device, make_node


@dataclass
class RecordingWriter:
    """Answers patches like the API server (a new resourceVersion each), keeping what was sent."""

    patches: list[tuple[str, str, Any]] = field(default_factory=list)
    rv: int = 100
    missing: set[str] = field(default_factory=set)

    def patch(
        self, name: str, patch: Any, *, namespace: str = "", patch_type: str = "", subresource: str = ""
    ) -> dict[str, Any]:
        if name in self.missing:
            raise NotFound(f"nodes {name!r} not found", status=404)
        self.patches.append((name, subresource, patch))
        self.rv += 1
        return {"metadata": {"name": name, "resourceVersion": str(self.rv)}}


class Harness:
    def __init__(self, clock: FakeClock, settings: NodeResourcesSettings | None = None) -> None:
        self.nodes: Store[Node] = Store()
        self.devices: Store[Device | Malformed] = Store()
        self.writer = RecordingWriter()
        self.registry = CollectorRegistry()
        self.reconciler = NodeResourcesReconciler(
            self.nodes,
            self.devices,
            self.writer,
            settings=settings or NodeResourcesSettings(),
            metrics=NodeResourcesMetrics(self.registry),
            clock=clock,
        )

    def put(self, obj: Node | Device | Malformed) -> None:
        if isinstance(obj, Node):
            self.nodes.upsert(obj.name, obj.meta.resource_version, obj)
        elif isinstance(obj, Device):
            self.devices.upsert(obj.node_name, obj.meta.resource_version, obj)
        else:
            self.devices.upsert(obj.name, obj.reference.resource_version, obj)

    def reconcile(self, key: str = "n1") -> Result:
        return self.reconciler.reconcile(key)

    def status_patches(self) -> list[dict[str, Any]]:
        return [p for _, sub, p in self.writer.patches if sub == "status"]

    def label_patches(self) -> list[dict[str, Any]]:
        return [p for _, sub, p in self.writer.patches if sub == ""]

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        return self.registry.get_sample_value(name, labels or {})


def test_a_new_node_gets_its_resources_and_labels(clock: FakeClock) -> None:
    h = Harness(clock)
    h.put(make_node())
    h.put(make_device(gpus=8, rdma=4))
    assert h.reconcile() == Result()
    [status] = h.status_patches()
    assert status["status"]["allocatable"] == {
        names.GPU_CORE: "800",
        names.GPU_MEMORY: "640Gi",
        names.GPU_MEMORY_RATIO: "800",
        names.KOORD_GPU: "800",
        names.RDMA: "400",
    }
    assert status["status"]["capacity"] == status["status"]["allocatable"]
    assert h.label_patches() == [{"metadata": {"labels": NVIDIA_LABELS}}]
    assert h.sample("tessera_controller_node_writes_total", {"part": "status"}) == 1


def test_nothing_is_written_when_the_node_matches(clock: FakeClock) -> None:
    h = Harness(clock)
    h.put(make_device(gpus=8))
    want = {names.GPU_CORE: 800, names.GPU_MEMORY: 640 * GiB, names.GPU_MEMORY_RATIO: 800, names.KOORD_GPU: 800}
    h.put(make_node(resources=want, labels=NVIDIA_LABELS))
    assert h.reconcile() == Result()
    assert h.writer.patches == []


def test_a_deleted_device_removes_resources_and_labels(clock: FakeClock) -> None:
    h = Harness(clock)
    h.put(make_node(resources={names.GPU_CORE: 800, names.RDMA: 100}, labels=NVIDIA_LABELS))
    h.reconcile()
    [status] = h.status_patches()
    assert status["status"]["allocatable"] == {names.GPU_CORE: None, names.RDMA: None}
    assert h.label_patches() == [{"metadata": {"labels": dict.fromkeys(NVIDIA_LABELS)}}]


def test_a_missing_node_is_left_alone(clock: FakeClock) -> None:
    h = Harness(clock)
    h.put(make_device())
    assert h.reconcile() == Result()
    assert h.writer.patches == []


def test_a_node_deleted_while_writing_is_not_an_error(clock: FakeClock) -> None:
    h = Harness(clock)
    h.put(make_node())
    h.put(make_device())
    h.writer.missing.add("n1")
    assert h.reconcile() == Result()


def test_a_malformed_device_is_refused_and_the_node_untouched(clock: FakeClock) -> None:
    h = Harness(clock)
    h.put(make_node(resources={names.GPU_CORE: 800}))
    device_ref = ObjectReference("Device", "n1", api_version="scheduling.koordinator.sh/v1alpha1")
    error = ValidationError("spec.devices[1]", "duplicate gpu device with minor 0", obj="device n1")
    h.put(Malformed(device_ref, error))
    with pytest.raises(PermanentError) as caught:
        h.reconcile()
    assert caught.value.reason == REASON_MALFORMED_DEVICE
    assert "spec.devices[1]: duplicate gpu device with minor 0" in str(caught.value)
    assert [r.kind for r in caught.value.about] == ["Node", "Device"]
    assert h.writer.patches == []


def test_a_device_whose_healthy_gpu_offers_nothing_is_refused(clock: FakeClock) -> None:
    h = Harness(clock)
    h.put(make_node())
    h.put(make_device(gpus=2, memory=0))
    with pytest.raises(PermanentError) as caught:
        h.reconcile()
    assert f"resources[{names.GPU_MEMORY}]" in str(caught.value)
    assert h.writer.patches == []


def test_a_small_increase_waits_up_to_the_maximum_delay(clock: FakeClock) -> None:
    h = Harness(clock, NodeResourcesSettings(diff_threshold=0.1, max_delay=300))
    now = {names.GPU_CORE: 1500, names.GPU_MEMORY: 15 * 80 * GiB, names.GPU_MEMORY_RATIO: 1500, names.KOORD_GPU: 1500}
    h.put(make_node(resources=now, labels=NVIDIA_LABELS))
    h.put(make_device(gpus=16))  # the 16th GPU is back: +6.7%
    assert h.reconcile() == Result(requeue_after=300)
    clock.advance(100)
    assert h.reconcile() == Result(requeue_after=200)  # counted from when it first waited
    assert h.writer.patches == []
    clock.advance(200)
    assert h.reconcile() == Result()
    [status] = h.status_patches()
    assert status["status"]["allocatable"][names.GPU_CORE] == "1600"
    assert h.sample("tessera_controller_node_deferred_updates_total") == 1


def test_an_urgent_change_takes_a_waiting_increase_with_it(clock: FakeClock) -> None:
    h = Harness(clock)
    now = {names.GPU_CORE: 1500, names.GPU_MEMORY: 15 * 80 * GiB, names.GPU_MEMORY_RATIO: 1500, names.KOORD_GPU: 1500}
    h.put(make_node(resources=now, labels=NVIDIA_LABELS))
    h.put(make_device(gpus=16))
    assert h.reconcile().requeue_after == 300
    h.put(make_device(gpus=16, rdma=1))  # a NIC appears: urgent
    assert h.reconcile() == Result()
    [status] = h.status_patches()
    assert set(status["status"]["allocatable"]) == {*now, names.RDMA}


def test_a_health_drop_is_written_at_once(clock: FakeClock) -> None:
    h = Harness(clock, NodeResourcesSettings(max_delay=3600))
    now = {names.GPU_CORE: 1600, names.GPU_MEMORY: 16 * 80 * GiB, names.GPU_MEMORY_RATIO: 1600, names.KOORD_GPU: 1600}
    h.put(make_node(resources=now, labels=NVIDIA_LABELS))
    h.put(make_device(gpus=16, unhealthy=(7,)))  # -6.25%: below the threshold, but a drop
    assert h.reconcile() == Result()
    [status] = h.status_patches()
    assert status["status"]["allocatable"][names.GPU_CORE] == "1500"


def test_threshold_zero_writes_small_increases_at_once(clock: FakeClock) -> None:
    h = Harness(clock, NodeResourcesSettings(diff_threshold=0))
    now = {names.GPU_CORE: 1500, names.GPU_MEMORY: 15 * 80 * GiB, names.GPU_MEMORY_RATIO: 1500, names.KOORD_GPU: 1500}
    h.put(make_node(resources=now, labels=NVIDIA_LABELS))
    h.put(make_device(gpus=16))
    assert h.reconcile() == Result()
    assert len(h.status_patches()) == 1


def test_a_cache_behind_our_own_write_does_not_write_again(clock: FakeClock) -> None:
    h = Harness(clock)
    h.put(make_node(resource_version="10"))
    h.put(make_device())
    h.reconcile()
    written = len(h.writer.patches)
    last_rv = str(h.writer.rv)
    h.reconcile()  # e.g. the Device changed before our write's Node event arrived
    assert len(h.writer.patches) == written
    h.put(make_node(resource_version=last_rv))  # the cache caught up, but someone removed our resources
    h.reconcile()
    assert len(h.writer.patches) > written


def test_the_event_reference_is_the_node(clock: FakeClock) -> None:
    h = Harness(clock)
    assert h.reconciler.reference("gone") == ObjectReference("Node", "gone", api_version="v1")
    h.put(make_node())
    assert h.reconciler.reference("n1").uid == "uid-n1"


@pytest.mark.parametrize(
    ("settings", "flag"),
    [
        (NodeResourcesSettings(diff_threshold=1.0), "--resource-diff-threshold"),
        (NodeResourcesSettings(diff_threshold=-0.1), "--resource-diff-threshold"),
        (NodeResourcesSettings(max_delay=-1), "--resource-max-delay"),
        (NodeResourcesSettings(workers=0), "--node-resources-workers"),
    ],
    ids=["threshold-1", "negative-threshold", "negative-delay", "no-workers"],
)
def test_bad_settings_name_their_flag(settings: NodeResourcesSettings, flag: str) -> None:
    with pytest.raises(ConfigError, match=flag):
        settings.validate()


def test_a_device_cr_in_deprecated_names_is_published_in_current_names(clock: FakeClock) -> None:
    # A koordlet before v1.2 wrote its Device CR as kubernetes.io/gpu-*; the Node still carries
    # what Koordinator's manager published from it under the same names.
    old_gpu = {
        names.DEPRECATED_GPU_CORE: "100",
        names.DEPRECATED_GPU_MEMORY: "80Gi",
        names.DEPRECATED_GPU_MEMORY_RATIO: "100",
    }
    device = Device.from_dict(
        {
            "metadata": {"name": "n1", "labels": NVIDIA_LABELS, "resourceVersion": "5"},
            "spec": {"devices": [{"type": "gpu", "minor": i, "health": True, "resources": old_gpu} for i in range(2)]},
        }
    )
    old_status = {names.DEPRECATED_GPU_CORE: "200", names.DEPRECATED_GPU_MEMORY: "160Gi", "cpu": "64"}
    node = Node.from_dict_as_written(
        {
            "metadata": {"name": "n1", "labels": NVIDIA_LABELS, "resourceVersion": "10"},
            "status": {"allocatable": old_status, "capacity": old_status},
        }
    )
    h = Harness(clock)
    h.put(device)
    h.put(node)
    h.reconcile()
    [status] = h.status_patches()
    # As for the same GPUs in the current names; the old names on the Node are not the
    # controller's and are left as they are.
    assert status["status"]["allocatable"] == resources.format_list(from_device(make_device(gpus=2)).resources)
