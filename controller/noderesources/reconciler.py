"""The node device resources reconciler: Device CR → Node allocatable, capacity and GPU labels.

Key: a node name (the Device CR is named after its node). Level-driven: each reconcile reads the
Node and the Device from the informer caches, computes what the Node should carry
(`desired.from_device`), compares (`plan.plan`) and writes only the difference:

- resources with a merge patch of `nodes/NAME/status` that names only the managed resources, so
  what kubelet owns (cpu, memory, pods, other extended resources) is never touched, and a
  kubelet that overwrites the status is simply corrected on the next Node event;
- labels with a merge patch of the Node itself (status writes cannot change metadata).

Nothing is written when nothing differs (a Node event caused by our own write reconciles to a
no-op). A small increase may wait (see `plan`); urgent changes are written at once and carry any
waiting increase with them. A Device CR that does not parse, or whose healthy GPUs do not say
what they offer, leaves the Node as it is and is reported once (Event `MalformedDevice` on the
Node and on the Device) until it changes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

from apis.crds.device import Device
from apis.errors import ConfigError, ValidationError
from apis.extension import names
from apis.k8s.core import Node
from controller.noderesources import desired, plan
from controller.noderesources.metrics import NodeResourcesMetrics
from controller.runtime import Controller, ControllerOptions, Malformed, Manager, PermanentError, Result, tolerant
from controller.runtime.written import WrittenVersions
from kube import errors
from kube.cache import Store
from kube.events import ObjectReference
from kube.logs import V
from kube.patch import labels_patch
from kube.resources import NODES, Patch

__all__ = ["NAME", "REASON_MALFORMED_DEVICE", "NodeResourcesReconciler", "NodeResourcesSettings", "add_to_manager"]

log = logging.getLogger(__name__)

NAME = "noderesources"
REASON_MALFORMED_DEVICE = "MalformedDevice"


@dataclass(frozen=True, slots=True)
class NodeResourcesSettings:
    #: An increase smaller than this fraction of the current amount may wait (Koordinator's
    #: `resourceDiffThreshold`, 0.1). 0: write every change at once.
    diff_threshold: float = 0.1
    #: The longest a small increase waits, in seconds (Koordinator's `updateTimeThresholdSeconds`).
    max_delay: float = 300.0
    workers: int = 4

    def validate(self) -> None:
        if not 0 <= self.diff_threshold < 1:
            raise ConfigError(f"--resource-diff-threshold {self.diff_threshold}: must be in [0, 1)")
        if self.max_delay < 0:
            raise ConfigError(f"--resource-max-delay {self.max_delay}: must be >= 0 seconds")
        if self.workers < 1:
            raise ConfigError(f"--node-resources-workers {self.workers}: must be at least 1")


class NodeWriter(Protocol):
    """Where Node writes go: `kube.ResourceAPI` for nodes (a recording fake in unit tests)."""

    def patch(
        self, name: str, patch: Patch, *, namespace: str = "", patch_type: str = ..., subresource: str = ""
    ) -> dict[str, Any]: ...


class NodeResourcesReconciler:
    def __init__(
        self,
        nodes: Store[Node],
        devices: Store[Device | Malformed],
        api: NodeWriter,
        *,
        settings: NodeResourcesSettings,
        metrics: NodeResourcesMetrics,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        settings.validate()
        self._nodes = nodes
        self._devices = devices
        self._api = api
        self._threshold = Fraction(str(settings.diff_threshold))
        self._max_delay = settings.max_delay
        self._metrics = metrics
        self._clock = clock
        self._deferred: dict[str, float] = {}  # node -> when a small increase started waiting
        self._written = WrittenVersions()  # the resourceVersion our last write to each node returned
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return NAME

    def reference(self, key: str) -> ObjectReference:
        node = self._nodes.get(key)
        return ObjectReference.of(node) if node is not None else ObjectReference("Node", key, api_version="v1")

    def reconcile(self, key: str) -> Result:
        node = self._nodes.get(key)
        if node is None:
            self._forget(key)
            return Result()  # nothing to write to; the Node's creation will bring the key back
        if self._written.behind(key, node.meta.resource_version):
            # Our last write has not reached the cache yet; its watch event brings the key back.
            log.log(V(5), "Cache behind our last write", extra={"node": key})
            return Result()
        device = self._devices.get(key)
        if isinstance(device, Malformed):
            raise PermanentError(
                f"{device.error}; the node's device resources are left as they are",
                reason=REASON_MALFORMED_DEVICE,
                about=(ObjectReference.of(node), device.reference),
            )
        try:
            wanted = desired.from_device(device)
        except ValidationError as e:
            assert device is not None  # from_device(None) cannot fail
            raise PermanentError(
                f"{e}; the node's device resources are left as they are",
                reason=REASON_MALFORMED_DEVICE,
                about=(ObjectReference.of(node), ObjectReference.of(device)),
            ) from e
        changes = plan.plan(plan.Observed.of(node), wanted, threshold=self._threshold)
        if changes.empty:
            self._settle(key)
            return Result()
        if not changes.urgent:
            wait = self._wait_left(key)
            if wait > 0:
                log.log(V(4), "Small increase waits", extra={"node": key, "changes": changes.describe(), "wait": wait})
                return Result(requeue_after=wait)
        self._write(key, changes)
        self._settle(key)
        log.log(
            V(2),
            "Updated node device resources",
            extra={
                "node": key,
                "changes": changes.describe(),
                "healthyGPUs": wanted.healthy_gpus,
                "healthyRDMA": wanted.healthy_rdma,
            },
        )
        return Result()

    def _write(self, key: str, changes: plan.Plan) -> None:
        status = changes.status_patch()
        written: dict[str, Any] | None = None
        try:
            if status is not None:
                written = self._api.patch(key, status, subresource="status")
                self._metrics.status_writes.inc()
            if changes.labels:
                written = self._api.patch(key, labels_patch(changes.labels))
                self._metrics.label_writes.inc()
        except errors.NotFound:
            log.log(V(4), "Node deleted meanwhile", extra={"node": key})
        if written is not None:
            self._written.record(key, written)

    def _wait_left(self, key: str) -> float:
        """Seconds a small increase of `key` may still wait (counted from when it first waited)."""
        now = self._clock()
        with self._lock:
            since = self._deferred.get(key)
            if since is None:
                self._deferred[key] = since = now
                self._metrics.deferred.inc()
        return since + self._max_delay - now

    def _settle(self, key: str) -> None:
        with self._lock:
            self._deferred.pop(key, None)

    def _forget(self, key: str) -> None:
        """The Node is gone: drop all bookkeeping about it."""
        with self._lock:
            self._deferred.pop(key, None)
        self._written.forget(key)


def add_to_manager(manager: Manager, settings: NodeResourcesSettings) -> Controller:
    """Wire the reconciler into `manager`: Node and Device informers, and what each event queues."""
    # As written: read in current names, a Node carrying only `kubernetes.io/gpu-core` (published by
    # Koordinator before v1.2) would seem to carry `koordinator.sh/gpu-core`, which the reconciler
    # would then never write, or remove again and again without effect.
    nodes = manager.informers.informer(NODES, parse=Node.from_dict_as_written)
    devices = manager.informers.informer(names.DEVICES, parse=tolerant(Device.from_dict, names.DEVICES))
    reconciler = NodeResourcesReconciler(
        nodes.store,
        devices.store,
        manager.client.resource(NODES),
        settings=settings,
        metrics=NodeResourcesMetrics(manager.metrics.registry),
    )
    controller = manager.add(reconciler, ControllerOptions(workers=settings.workers))
    controller.watch(nodes, keys=lambda node: [node.name], changed=_managed_part_changed)
    controller.watch(devices, keys=_device_node)
    return controller


def _device_node(device: Device | Malformed) -> list[str]:
    return [device.name if isinstance(device, Malformed) else device.node_name]


def _managed_part_changed(old: Node, new: Node) -> bool:
    """Node updates that matter: kubelet heartbeats and other status churn do not queue the node."""
    return plan.Observed.of(old) != plan.Observed.of(new)
