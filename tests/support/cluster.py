"""A live cluster's objects for tests, through a real API server: unique names, namespaces, GPU
nodes (the Node and its Device CR), pods asking for resources, and watches to wait on them (never
a sleep): `PodWatch.wait_for(predicate)` wakes on every pod event; `wait_for_event` on Events.

Tests share API servers (a session's, a module's), so every object a test makes has a name of
its own: `unique("gpu")` is `gpu-` and eight hex digits.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from apis.crds.device import Device
from apis.extension import names
from apis.extension.names import GroupVersionResource
from apis.k8s.core import Pod
from cli.bench.scheduler_e2e import check_allocations
from cli.launchers.scheduler import node_manifest, pod_manifest
from kube import Client, Informer, crds, raw, resources
from scheduler.simulation.cluster import NodeShape, gpu_node

__all__ = [
    "GPU_HALF",
    "GPU_QUARTER",
    "PodWatch",
    "Watch",
    "assert_no_device_shared_beyond_capacity",
    "condition",
    "create_gpu_nodes",
    "create_namespace",
    "create_pod",
    "unique",
    "wait_for_event",
]

T = TypeVar("T")

GPU_HALF = {names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50"}
GPU_QUARTER = {names.GPU_CORE: "25", names.GPU_MEMORY_RATIO: "25"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_namespace(client: Client, name: str | None = None) -> str:
    name = name or unique("t")
    client.resource(resources.NAMESPACES).create({"metadata": {"name": name}})
    return name


def create_gpu_nodes(client: Client, *node_names: str, shape: NodeShape | None = None) -> list[Device]:
    """Nodes with 8 GPUs (2 NUMA × 2 PCIe switches) and their Device CRs, as agent and controller make them."""
    devices = []
    for name in node_names:
        node, device = gpu_node(name, shape or NodeShape())
        client.resource(resources.NODES).create(node_manifest(node))
        devices.append(crds.devices(client).create(device))
    return devices


def create_pod(
    client: Client,
    namespace: str,
    name: str,
    requests: Mapping[str, str],
    *,
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    node_name: str = "",
    priority: int | None = None,
) -> None:
    """A pod asking for 1 CPU, 1Gi and `requests`, for the tessera scheduler."""
    manifest = pod_manifest(
        name,
        {names.CPU: "1", names.MEMORY: "1Gi", **requests},
        namespace=namespace,
        annotations=annotations,
        labels=labels,
        node_name=node_name,
        priority=priority,
    )
    client.resource(resources.PODS).create(manifest, namespace=namespace)


class Watch(Generic[T]):
    """An informer on one namespace; `wait_for` blocks until a predicate over its objects holds."""

    def __init__(self, client: Client, gvr: GroupVersionResource, namespace: str, parse: Callable[[Any], T]) -> None:
        self._cond = threading.Condition()
        self.informer: Informer[T] = Informer(client, gvr, parse=parse, namespace=namespace)
        self.informer.add_handlers(self._changed, lambda _o, _n: self._changed(None), self._changed)
        self.informer.start()
        assert self.informer.wait_for_sync(30), "the informer did not sync"

    def _changed(self, _obj: T | None) -> None:
        with self._cond:
            self._cond.notify_all()

    def objects(self) -> list[T]:
        return self.informer.store.list()

    def wait_for(self, predicate: Callable[[list[T]], bool], what: str, timeout: float = 90.0) -> list[T]:
        """The objects once `predicate(objects)` holds; fails after `timeout` (a bound, never a measurement)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                objects = self.objects()
                if predicate(objects):
                    return objects
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"timed out waiting for {what}; have: {self.describe(objects)}")
                self._cond.wait(remaining)

    def describe(self, objects: list[T]) -> str:
        return f"{len(objects)} objects"

    def stop(self) -> None:
        self.informer.stop()


class PodWatch(Watch[Pod]):
    def __init__(self, client: Client, namespace: str) -> None:
        super().__init__(client, resources.PODS, namespace, Pod.from_dict)

    def pods(self) -> list[Pod]:
        return sorted(self.objects(), key=lambda p: p.name)

    def pod(self, name: str) -> Pod:
        found = [p for p in self.pods() if p.name == name]
        assert found, f"no pod {name}"
        return found[0]

    def describe(self, objects: list[Pod]) -> str:
        return ", ".join(f"{p.name}:{p.node_name or 'pending'}" for p in sorted(objects, key=lambda p: p.name))

    def wait_bound(self, count: int, timeout: float = 90.0) -> list[Pod]:
        return self.wait_for(lambda pods: sum(1 for p in pods if p.node_name) >= count, f"{count} bound pods", timeout)


def wait_for_event(
    client: Client, namespace: str, name: str, reason: str, message: str | None = None
) -> list[dict[str, Any]]:
    """Events of `reason` about object `name` (with `message`, when given), once there is one."""
    watch: Watch[dict[str, Any]] = Watch(client, resources.EVENTS, namespace, raw)
    try:

        def about(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [e for e in events if e["involvedObject"].get("name") == name and e.get("reason") == reason]

        def found(events: list[dict[str, Any]]) -> bool:
            return any(message is None or e.get("message") == message for e in about(events))

        return about(watch.wait_for(found, f"a {reason} event about {name}"))
    finally:
        watch.stop()


def assert_no_device_shared_beyond_capacity(client: Client, pods: list[Pod]) -> None:
    """Every bound pod's annotation names devices of its node's Device CR, none over-committed."""
    assert check_allocations(crds.devices(client).list(), pods) == 0


def condition(pod: Pod, kind: str = "PodScheduled") -> tuple[str, str, str] | None:
    for c in pod.conditions:
        if c.type == kind:
            return c.status, c.reason, c.message
    return None
