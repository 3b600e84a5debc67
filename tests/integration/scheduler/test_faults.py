"""Bindings that go wrong, and bad input, against a real API server.

The scheduler runs in this process here so that its writes can fail on purpose: `FaultyPodAPI`
wraps the real `KubePodAPI` and, once per pod, loses a response after the API server applied the
Binding, refuses a request, binds the pod elsewhere first, or deletes the pod first. Whatever
happens, no GPU may end up held twice and every pod that can be bound is bound.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

import pytest

from apis.crds.device import Device
from apis.extension import names
from apis.k8s.core import Pod
from kube import Client, crds, errors, resources
from scheduler.cache import PodInfo
from scheduler.framework import SUCCESS, CycleState, ObjectWrite, PluginRef, Status, WaitingPod, Write
from scheduler.framework.interfaces import PermitPlugin, Plugin, PreBindPlugin
from scheduler.plugins import DEFAULT_PLUGINS, REGISTRY
from scheduler.service import GRPCSettings, HTTPSettings, QueueSettings, SchedulerService, SchedulerSettings
from scheduler.service.podapi import KubePodAPI
from tests.support import apiservers
from tests.support.cluster import (
    GPU_HALF,
    PodWatch,
    assert_no_device_shared_beyond_capacity,
    condition,
    create_gpu_nodes,
    create_namespace,
    create_pod,
    wait_for_event,
)
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

Fault = Callable[[Pod], None]


class FaultyPodAPI:
    """The real pod API, with one-shot faults per pod name and call."""

    def __init__(self, real: KubePodAPI) -> None:
        self.real = real
        self.before_bind: dict[str, Fault] = {}
        #: Called instead of the Binding, with what it would carry (the pod, the node, the annotations).
        self.instead_of_bind: dict[str, Callable[[Pod, str, Mapping[str, str]], None]] = {}
        #: (call, pod name) of every annotate and bind, in order.
        self.calls: list[tuple[str, str]] = []

    def annotate(self, pod: Pod, changes: Mapping[str, str | None], *, resource_version: str = "") -> None:
        self.calls.append(("annotate", pod.name))
        self.real.annotate(pod, changes, resource_version=resource_version)

    def bind(self, pod: Pod, node: str, annotations: Mapping[str, str] | None = None) -> None:
        self.calls.append(("bind", pod.name))
        before = self.before_bind.pop(pod.name, None)
        if before is not None:
            before(pod)
        fault = self.instead_of_bind.pop(pod.name, None)
        if fault is not None:
            fault(pod, node, annotations or {})
        else:
            self.real.bind(pod, node, annotations)

    def get(self, namespace: str, name: str) -> Pod | None:
        return self.real.get(namespace, name)

    def set_condition(self, pod: Pod, *, status: str, reason: str, message: str) -> None:
        self.real.set_condition(pod, status=status, reason=reason, message=message)


apiserver = apiservers.apiserver_fixture("function")


@pytest.fixture
def faulty(client: Client) -> FaultyPodAPI:
    return FaultyPodAPI(KubePodAPI(client))


@pytest.fixture
def service(client: Client, faulty: FaultyPodAPI) -> Iterator[SchedulerService]:
    settings = SchedulerSettings(
        grpc=GRPCSettings(address=""),
        http=HTTPSettings(address=""),
        queue=QueueSettings(initial_backoff=0.05, max_backoff=0.2),
    )
    with SchedulerService(settings, client, pod_api=faulty) as svc:
        yield svc


@pytest.fixture
def ns(client: Client) -> str:
    return create_namespace(client)


def holders(svc: SchedulerService, node: str) -> dict[int, set[str]]:
    with svc.lock:
        return {u.minor: {h.pod for h in u.holders} for u in svc.cache.device_usage(node) if u.type.value == "gpu"}


def bind_failures(svc: SchedulerService, reason: str) -> float:
    value = svc.registry.get_sample_value("tessera_scheduler_bind_failures_total", {"reason": reason})
    return value or 0.0


def test_a_pod_is_annotated_and_bound_in_one_write_and_a_stale_record_removed_first(
    client: Client, ns: str, faulty: FaultyPodAPI, service: SchedulerService
) -> None:
    create_gpu_nodes(client, "f-a")
    watch = PodWatch(client, ns)
    stale = {names.ANNOTATION_DEVICE_ALLOCATED: '{"gpu":[{"minor":3,"resources":{}}]}'}
    try:
        create_pod(client, ns, "shared", GPU_HALF)
        create_pod(client, ns, "cpu-only", {}, annotations=stale)
        pods = watch.wait_bound(2)
    finally:
        watch.stop()
    shared, cpu_only = sorted(pods, key=lambda p: p.name != "shared")
    assert names.ANNOTATION_DEVICE_ALLOCATED in shared.annotations
    assert names.ANNOTATION_DEVICE_ALLOCATED not in cpu_only.annotations
    # The Binding carried the allocation; only the record to remove needed a patch of its own.
    assert [c for c in faulty.calls if c[1] == "shared"] == [("bind", "shared")]
    assert [c for c in faulty.calls if c[1] == "cpu-only"] == [("annotate", "cpu-only"), ("bind", "cpu-only")]


def test_a_binding_whose_answer_was_lost_counts_as_bound(
    client: Client, ns: str, faulty: FaultyPodAPI, service: SchedulerService
) -> None:
    create_gpu_nodes(client, "f-a")
    watch = PodWatch(client, ns)

    def bind_then_drop_the_answer(pod: Pod, node: str, annotations: Mapping[str, str]) -> None:
        faulty.real.bind(pod, node, annotations)
        raise errors.Unreachable("connection reset by peer")

    faulty.instead_of_bind["seven"] = bind_then_drop_the_answer
    try:
        create_pod(client, ns, "seven", {names.NVIDIA_GPU: "7"})
        watch.wait_bound(1)
        create_pod(client, ns, "one", {names.NVIDIA_GPU: "1"})
        create_pod(client, ns, "one-too-many", {names.NVIDIA_GPU: "1"})
        pods = watch.wait_for(
            lambda pods: (
                sum(1 for p in pods if p.node_name) == 2
                and any(p.name == "one-too-many" and condition(p) is not None for p in pods)
            ),
            "one more pod bound and one reported unschedulable",
        )
    finally:
        watch.stop()
    assert_no_device_shared_beyond_capacity(client, pods)
    assert {p.name for p in pods if p.node_name} == {"seven", "one"}
    assert sum(len(h) for h in holders(service, "f-a").values()) == 8
    assert bind_failures(service, "Unreachable") == 0  # resolved by reading the pod back: it was bound
    assert bind_failures(service, "BoundElsewhere") == 0  # ... with this binding's devices: ours


def test_a_refused_binding_is_undone_and_retried(
    client: Client, ns: str, faulty: FaultyPodAPI, service: SchedulerService
) -> None:
    create_gpu_nodes(client, "f-a")
    watch = PodWatch(client, ns)

    def refuse(pod: Pod, node: str, _annotations: Mapping[str, str]) -> None:
        raise errors.ServerError("etcdserver: request timed out", status=503)

    faulty.instead_of_bind["p"] = refuse
    try:
        create_pod(client, ns, "p", GPU_HALF)
        (pod,) = watch.wait_bound(1)
    finally:
        watch.stop()
    assert bind_failures(service, "ServerError") == 1
    assert_no_device_shared_beyond_capacity(client, [pod])
    held = {minor: pods for minor, pods in holders(service, "f-a").items() if pods}
    assert list(held.values()) == [{f"{ns}/p"}]


def test_a_pod_bound_by_someone_else_is_adopted(
    client: Client, ns: str, faulty: FaultyPodAPI, service: SchedulerService
) -> None:
    create_gpu_nodes(client, "f-a", "f-b")
    watch = PodWatch(client, ns)

    def someone_else_was_faster(pod: Pod, node: str, annotations: Mapping[str, str]) -> None:
        other = "f-b" if node == "f-a" else "f-a"
        faulty.real.bind(pod, other)  # another scheduler, which wrote no devices of ours
        faulty.real.bind(pod, node, annotations)  # 409: already assigned

    faulty.instead_of_bind["p"] = someone_else_was_faster
    try:
        create_pod(client, ns, "p", GPU_HALF)
        (pod,) = watch.wait_bound(1)
    finally:
        watch.stop()
    uid = pod.uid
    chosen = "f-a" if pod.node_name == "f-b" else "f-b"

    def adopted() -> bool:
        with service.lock:
            on_its_node = service.cache.pod_node(uid) == pod.node_name and not service.cache.is_assumed(uid)
        # ... and the reservation on the node we chose is released.
        return on_its_node and not any(holders(service, chosen).values())

    # This process's informer and binder learn it a moment after the test's own watch did.
    wait_for(adopted, what="the pod in the cache where the API server has it", timeout_s=90)
    wait_for(lambda: bind_failures(service, "BoundElsewhere") == 1, what="the binder to adopt the pod", timeout_s=90)


def test_a_binding_rejected_by_admission_is_retried(
    client: Client, ns: str, faulty: FaultyPodAPI, service: SchedulerService
) -> None:
    create_gpu_nodes(client, "f-a")
    watch = PodWatch(client, ns)

    def reject(pod: Pod) -> None:
        raise errors.Invalid("admission webhook denied the request", status=422)

    faulty.before_bind["p"] = reject
    try:
        create_pod(client, ns, "p", GPU_HALF)
        watch.wait_bound(1)
    finally:
        watch.stop()
    assert bind_failures(service, "Invalid") == 1


def test_a_pod_deleted_while_being_bound_releases_its_devices(
    client: Client, ns: str, faulty: FaultyPodAPI, service: SchedulerService
) -> None:
    create_gpu_nodes(client, "f-a")
    watch = PodWatch(client, ns)
    deleted: list[str] = []

    def delete_first(pod: Pod) -> None:
        client.resource(resources.PODS).delete(pod.name, namespace=pod.namespace)
        deleted.append(pod.uid)

    faulty.before_bind["gone"] = delete_first
    try:
        create_pod(client, ns, "gone", {names.NVIDIA_GPU: "8"})
        create_pod(client, ns, "next", {names.NVIDIA_GPU: "8"})
        (pod,) = watch.wait_for(
            lambda pods: len(pods) == 1 and all(p.node_name for p in pods), "the next pod bound in its place"
        )
    finally:
        watch.stop()
    assert pod.name == "next" and deleted
    with service.lock:
        assert service.cache.pod_node(deleted[0]) is None
    assert all(h == {f"{ns}/next"} for h in holders(service, "f-a").values())


def test_bad_input_is_reported_and_scheduling_goes_on(client: Client, ns: str, service: SchedulerService) -> None:
    device, _ = create_gpu_nodes(client, "f-a", "f-b")
    watch = PodWatch(client, ns)
    try:
        # A bound pod whose device-allocated annotation cannot be read.
        create_pod(
            client,
            ns,
            "garbled",
            {names.NVIDIA_GPU: "1"},
            annotations={names.ANNOTATION_DEVICE_ALLOCATED: "{not json"},
            node_name="f-a",
        )
        (event,) = wait_for_event(client, ns, "garbled", "InvalidDeviceAllocation")
        assert "not valid JSON" in str(event["message"]) and event["type"] == "Warning"
        assert "does not know which devices this pod uses" in str(event["message"])
        # An invalid request: the reason names the rule it breaks.
        create_pod(client, ns, "invalid", {names.GPU_CORE: "150", names.GPU_MEMORY_RATIO: "150"})
        pods = watch.wait_for(
            lambda pods: any(p.name == "invalid" and condition(p) is not None for p in pods), "invalid reported"
        )
        _, reason, message = condition(next(p for p in pods if p.name == "invalid")) or ("", "", "")
        assert reason == "Unschedulable"
        assert message == (
            "0/2 nodes are available: invalid device request: koordinator.sh/gpu-core=150 "
            "must be <= 100 or a multiple of 100."
        )
        # A Device CR broken by its writer (in a way its schema cannot catch: the API server refuses
        # a mistyped minor): said on the object, the last valid version stays in use.
        broken = device.to_dict()
        broken["metadata"].setdefault("annotations", {})[names.ANNOTATION_GPU_NVLINK_PEERS] = '{"0": [99]}'
        client.resource(names.DEVICES).update(broken)
        (event,) = wait_for_event(client, "default", device.meta.name, "FailedParsing")
        assert "GPU 0 lists 99" in str(event["message"]) and "last valid version" in str(event["message"])
        # f-a's GPUs may be the garbled pod's: the next GPU pod goes to f-b.
        create_pod(client, ns, "still-works", GPU_HALF)
        pods = watch.wait_for(
            lambda pods: any(p.name == "still-works" and p.node_name for p in pods), "still-works bound"
        )
        assert next(p for p in pods if p.name == "still-works").node_name == "f-b"
    finally:
        watch.stop()
    assert service.loop.running
    current: Device = service.feed.devices.store.get("f-a")  # type: ignore[assignment]
    assert current.devices == device.devices
    # Entries Koordinator's schema admits but no one can allocate (a type Tessera does not know, a
    # minor listed twice): said once on the Device, the rest of it stays in use.
    odd = client.resource(names.DEVICES).get("f-a")
    odd["metadata"]["annotations"].pop(names.ANNOTATION_GPU_NVLINK_PEERS)
    odd["spec"]["devices"][1]["minor"] = odd["spec"]["devices"][0]["minor"]
    odd["spec"]["devices"].append({"type": "npu", "minor": 0, "health": True})
    client.resource(names.DEVICES).update(odd)
    (event,) = wait_for_event(client, "default", device.meta.name, "DevicesIgnored")
    assert "device type 'npu' is not one Tessera allocates" in str(event["message"])
    assert "is listed more than once" in str(event["message"]) and event["type"] == "Warning"
    current = wait_for(lambda: _with_fewer(service, "f-a", len(device.devices) - 2), what="f-a read without them")
    assert current.devices == device.devices[2:]
    # A GPU partition table Koordinator's decoder refuses: said on the Device, which stays in use.
    odd = client.resource(names.DEVICES).get("f-a")
    odd["metadata"].setdefault("annotations", {})[names.ANNOTATION_GPU_PARTITIONS] = '{"2": 5}'
    client.resource(names.DEVICES).update(odd)
    (event,) = wait_for_event(client, "default", device.meta.name, "InvalidGPUPartitions")
    assert "2: expected a list of partitions" in str(event["message"]) and event["type"] == "Warning"


def _with_fewer(service: SchedulerService, node: str, count: int) -> Device | None:
    found = service.feed.devices.store.get(node)
    return found if isinstance(found, Device) and len(found.devices) == count else None


class Gate(PermitPlugin):
    """Holds pods labelled `gate` at Permit (as gang scheduling holds members) for up to `seconds`."""

    name = "Gate"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        return Status.wait(self.seconds) if "gate" in pod.pod.labels else SUCCESS


def service_with(
    client: Client, faulty: FaultyPodAPI, plugin: Plugin, *, queue: QueueSettings | None = None
) -> SchedulerService:
    """A scheduler (not started yet) that runs `plugin` after the default plugins."""
    settings = SchedulerSettings(
        grpc=GRPCSettings(address=""), http=HTTPSettings(address=""), queue=queue or QueueSettings()
    )
    registry = {**REGISTRY, plugin.name: lambda args, handle: plugin}
    return SchedulerService(
        settings, client, registry=registry, default_plugins=(*DEFAULT_PLUGINS, PluginRef(plugin.name)), pod_api=faulty
    )


def gated_service(
    client: Client, faulty: FaultyPodAPI, *, seconds: float, queue: QueueSettings | None = None
) -> SchedulerService:
    """A scheduler whose Gate holds pods labelled `gate` for up to `seconds`."""
    return service_with(client, faulty, Gate(seconds), queue=queue)


def test_pods_held_at_permit_are_bound_when_allowed_and_released_when_timed_out(
    client: Client, ns: str, faulty: FaultyPodAPI
) -> None:
    create_gpu_nodes(client, "f-a")
    service = gated_service(client, faulty, seconds=1.5)
    watch = PodWatch(client, ns)
    try:
        service.start()
        framework = service.frameworks[names.SCHEDULER_NAME]
        create_pod(client, ns, "allowed", {names.NVIDIA_GPU: "4"}, labels={"gate": "1"})
        create_pod(client, ns, "timed-out", {names.NVIDIA_GPU: "4"}, labels={"gate": "1"})
        create_pod(client, ns, "later", {names.NVIDIA_GPU: "4"})
        watch.wait_for(lambda pods: len(pods) == 3, "three pods")
        uid = watch.pod("allowed").uid
        wait_for(lambda: framework.waiting_pod(uid) is not None, what="allowed to wait at Permit", timeout_s=90)
        with service.lock:
            waiting = framework.waiting_pod(uid)
            assert waiting is not None
            waiting.allow(Gate.name)
        pods = watch.wait_for(
            lambda pods: {p.name for p in pods if p.node_name} == {"allowed", "later"}, "allowed and later bound"
        )
        # timed-out held 4 GPUs at Permit until its time was up; then later got them.
        timeout = "rejected due to timeout after waiting at permit by Gate"
        wait_for_event(client, ns, "timed-out", "FailedScheduling", timeout)
    finally:
        watch.stop()
        service.stop()
    assert_no_device_shared_beyond_capacity(client, pods)


def test_a_pod_allowed_at_permit_whose_binding_is_refused_is_undone_through_the_cycle_and_retried(
    client: Client, ns: str, faulty: FaultyPodAPI
) -> None:
    create_gpu_nodes(client, "f-a")
    service = gated_service(client, faulty, seconds=60, queue=QueueSettings(initial_backoff=0.05, max_backoff=0.2))

    def refuse(pod: Pod, node: str, _annotations: Mapping[str, str]) -> None:
        raise errors.ServerError("etcdserver: request timed out", status=503)

    faulty.instead_of_bind["held"] = refuse
    watch = PodWatch(client, ns)
    try:
        service.start()
        framework = service.frameworks[names.SCHEDULER_NAME]
        create_pod(client, ns, "held", {names.NVIDIA_GPU: "8"}, labels={"gate": "1"})
        watch.wait_for(lambda pods: len(pods) == 1, "the pod")
        uid = watch.pod("held").uid
        allowed: list[WaitingPod] = []

        def new_wait() -> WaitingPod | None:
            waiting = framework.waiting_pod(uid)
            return waiting if waiting is not None and waiting not in allowed else None

        for attempt in ("first", "second"):
            # The second wait is a new cycle: only possible once the refused one was undone.
            waiting = wait_for(new_wait, what=f"the {attempt} wait at Permit", timeout_s=90)
            assert waiting is not None
            with service.lock:
                waiting.allow(Gate.name)
            allowed.append(waiting)
        (pod,) = watch.wait_bound(1)
    finally:
        watch.stop()
        service.stop()
    assert bind_failures(service, "ServerError") == 1
    assert_no_device_shared_beyond_capacity(client, [pod])
    assert all(held == {f"{ns}/held"} for held in holders(service, "f-a").values())
    assert service.cycle.waiting == 0


def test_retries_write_neither_the_condition_nor_the_event_again(
    client: Client, ns: str, service: SchedulerService
) -> None:
    create_gpu_nodes(client, "f-a")
    watch = PodWatch(client, ns)
    try:
        create_pod(client, ns, "nine", {names.NVIDIA_GPU: "9"})
        pods = watch.wait_for(lambda pods: bool(pods) and condition(pods[0]) is not None, "the first report")
        wait_for_event(client, ns, "nine", "FailedScheduling")
        reported = pods[0].meta.resource_version
        uid = pods[0].uid

        def attempts() -> int:
            queued = service.queue.get(uid)
            return queued.attempts if queued is not None else 0

        for i in range(3):  # Device changes that concern DeviceShare: each one retries the pod
            before = attempts()
            changed = crds.devices(client).get("f-a").to_dict()
            changed["spec"]["devices"][0]["labels"] = {"round": str(i)}
            client.resource(names.DEVICES).update(changed)
            wait_for(lambda before=before: attempts() > before, what=f"retry {i + 1}", timeout_s=90)
        assert service.reporter.wait_idle(30)
        service.recorder.flush(30)
    finally:
        watch.stop()
    assert watch.pod("nine").meta.resource_version == reported  # the same condition is not written again
    events = client.resource(resources.EVENTS).list(namespace=ns).items
    assert [e["count"] for e in events if e["reason"] == "FailedScheduling"] == [1]


class Stamp(PreBindPlugin):
    """Asks, at PreBind, for a write of another object: the pod's node under its name in the
    `bindings` ConfigMap of its namespace (as a DRA plugin writes a claim's status), undone by
    removing it; and, once for each pod named in `also`, a write of an object that does not exist.
    `look` is called with the pod at the start of each PreBind, before this attempt's writes."""

    name = "Stamp"

    def __init__(self, look: Callable[[Pod], None] | None = None) -> None:
        self.also: set[str] = set()
        self.look = look

    def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Sequence[Write], Status]:
        if self.look is not None:
            self.look(pod.pod)
        ns, name = pod.pod.namespace, pod.pod.name
        undo = ObjectWrite(resources.CONFIG_MAPS, "bindings", {"data": {name: None}}, namespace=ns)
        writes: list[Write] = [
            ObjectWrite(resources.CONFIG_MAPS, "bindings", {"data": {name: node}}, namespace=ns, undo=undo)
        ]
        if name in self.also:
            self.also.discard(name)
            writes.append(ObjectWrite(resources.CONFIG_MAPS, "no-such-map", {"data": {name: node}}, namespace=ns))
        return writes, SUCCESS


def stamped(client: Client, ns: str, pod: str) -> str | None:
    data = client.resource(resources.CONFIG_MAPS).get("bindings", namespace=ns).get("data") or {}
    value = data.get(pod)
    return value if isinstance(value, str) else None


def stamping_service(client: Client, faulty: FaultyPodAPI, stamp: Stamp) -> SchedulerService:
    return service_with(client, faulty, stamp, queue=QueueSettings(initial_backoff=0.05, max_backoff=0.2))


def test_a_prebind_write_of_another_object_is_made_before_the_binding_and_taken_back_when_it_fails(
    client: Client, ns: str, faulty: FaultyPodAPI
) -> None:
    create_gpu_nodes(client, "f-a")
    client.resource(resources.CONFIG_MAPS).create({"metadata": {"name": "bindings"}, "data": {}}, namespace=ns)
    seen: list[tuple[str, str | None]] = []

    def refuse(pod: Pod, node: str, _annotations: Mapping[str, str]) -> None:
        seen.append(("at the refused Binding", stamped(client, ns, pod.name)))
        raise errors.BadRequest("admission webhook said no", status=400)

    def look(pod: Pod) -> None:
        if len(seen) == 1:  # the attempt after the refused one
            seen.append(("before the next attempt's writes", stamped(client, ns, pod.name)))

    faulty.instead_of_bind["claimer"] = refuse
    service = stamping_service(client, faulty, Stamp(look))
    watch = PodWatch(client, ns)
    try:
        service.start()
        create_pod(client, ns, "claimer", {names.NVIDIA_GPU: "1"})
        (pod,) = watch.wait_bound(1)
    finally:
        watch.stop()
        service.stop()
    assert seen == [("at the refused Binding", "f-a"), ("before the next attempt's writes", None)]
    assert stamped(client, ns, "claimer") == pod.node_name == "f-a"


def test_a_prebind_write_that_fails_fails_the_binding_and_takes_back_the_writes_made_before_it(
    client: Client, ns: str, faulty: FaultyPodAPI
) -> None:
    create_gpu_nodes(client, "f-a")
    client.resource(resources.CONFIG_MAPS).create({"metadata": {"name": "bindings"}, "data": {}}, namespace=ns)
    seen: list[str | None] = []

    def look(pod: Pod) -> None:
        seen.append(stamped(client, ns, pod.name) if seen else "first attempt")

    stamp = Stamp(look)
    stamp.also.add("claimer")
    service = stamping_service(client, faulty, stamp)
    watch = PodWatch(client, ns)
    try:
        service.start()
        create_pod(client, ns, "claimer", {names.NVIDIA_GPU: "8"})
        (pod,) = watch.wait_bound(1)
        (event,) = wait_for_event(client, ns, "claimer", "FailedScheduling")
    finally:
        watch.stop()
        service.stop()
    assert bind_failures(service, "NotFound") == 1
    assert "cannot write configmaps" in str(event["message"]) and "no-such-map" in str(event["message"])
    # The write made before the one that failed was taken back before the next attempt.
    assert seen == ["first attempt", None]
    assert stamped(client, ns, "claimer") == pod.node_name == "f-a"
    # The failed attempt's devices were given back: the retry got all eight GPUs of f-a.
    assert all(held == {f"{ns}/claimer"} for held in holders(service, "f-a").values())
