"""Informers for nodes, pods, Device CRs and PodDisruptionBudgets, wired into the cache and the
scheduling queue.

What each change means to the scheduler, in one place:

- **assigned pods** (any scheduler's, and ours after binding) go into the cache, which accounts
  their devices from their records (its holdings sources, `scheduler.cache.holdings`) — so pods
  bound before a restart or by another scheduler hold their GPUs. A pod this scheduler assumed is
  confirmed by the same call.
- **pending pods** with one of our profiles' `schedulerName` go into the queue. They never touch
  the cache: the only pending pods it holds are the ones we assumed ourselves, and a pending
  pod's record (say, left by a binding that failed) accounts for nothing.
- **deletions** (and pods reaching Succeeded/Failed, which the field selector turns into
  deletions) leave the cache and the queue; an assigned pod leaving frees room, so pods it may
  help are moved out of the unschedulable queue, as are those a node or Device change may help.
- **every pod** is told to the frameworks (`Framework.pod_added`, …), so gang scheduling counts
  a gang's members before any is scheduled; a new gang member moves the pods waiting for it.
  The plugins' handlers of pods (`Handle.feeds.pods`: quota charges, what is wrong with a gang)
  run after these, on the same informer (`scheduler.service.feeds`); what else a plugin
  watches (PodGroups, ElasticQuotas, Reservations, ...) is its own feed, run there too.

- **PodDisruptionBudgets** go into the cache (`ClusterCache.budgets`), for preemption, which
  spares the pods they protect. They are not waited for at start: until the informer syncs,
  preemption sees no budget (kube-scheduler does not wait for them either).

Bad input never stops anything and is said where users look: a pod or Device CR that does not
parse gets a Warning Event naming the field (the informer keeps the last good version); an
assigned pod whose record of what it holds cannot be read (or was removed) gets an
`InvalidDeviceAllocation` one too, saying what the cache does about it: it keeps counting the
pod's last valid allocation, or — first seen that way, as after a restart — treats the node's
devices of the types the pod asks for as possibly in use. A change to an assigned pod's record
moves the pods DeviceShare rejected (a fix may free a node). A device that holdings bypassing
the scheduler over-commit is reported by the `OvercommitReporter`.

Handlers run on the informers' dispatcher threads and take the cache lock only for the cache
call itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from apis.crds.device import Device
from apis.errors import TesseraError
from apis.extension import names
from apis.k8s.core import Node, Pod
from apis.k8s.policy import PodDisruptionBudget
from kube import Client, EventRecorder, Informer, ObjectReference, resources
from scheduler.cache import ClusterCache, PodInfo
from scheduler.framework import Framework
from scheduler.framework.events import (
    ASSIGNED_POD_DELETED,
    ASSIGNED_POD_RECORD_CHANGED,
    DEVICE_ADDED,
    DEVICE_CHANGED,
    NODE_ADDED,
    NODE_CHANGED,
    POD_ADDED,
)
from scheduler.service.overcommit import OvercommitReporter
from scheduler.service.queue import SchedulingQueue
from scheduler.service.reporter import FailureReporter
from scheduler.service.unserved import UnservedNames

__all__ = ["ClusterFeed"]

log = logging.getLogger(__name__)

#: Terminal pods hold nothing; the server turns a pod that stops matching into a DELETED event.
NON_TERMINAL_PODS = "status.phase!=Succeeded,status.phase!=Failed"
REASON_INVALID_OBJECT = "FailedParsing"
REASON_INVALID_ALLOCATION = "InvalidDeviceAllocation"
#: Device entries Koordinator's schema admits but Tessera cannot allocate (`Device.ignored`).
REASON_DEVICES_IGNORED = "DevicesIgnored"
#: A Device's `gpu-partitions` annotation, or some of its partitions, cannot be used.
REASON_INVALID_GPU_PARTITIONS = "InvalidGPUPartitions"


class ClusterFeed:
    """Owns the three informers (one list and one watch each); `start()`, `wait_for_sync()`, `stop()`."""

    def __init__(
        self,
        client: Client,
        *,
        lock: threading.RLock,
        cache: ClusterCache,
        queue: SchedulingQueue,
        profiles: frozenset[str],
        recorder: EventRecorder,
        reporter: FailureReporter,
        frameworks: Mapping[str, Framework] | None = None,
        unserved: UnservedNames | None = None,
    ) -> None:
        """`unserved` is told of pending pods whose schedulerName no profile serves."""
        self._lock = lock
        self._unserved = unserved
        self._frameworks = tuple((frameworks or {}).values())
        self._cache = cache
        self._queue = queue
        self._profiles = profiles
        self._recorder = recorder
        self._reporter = reporter
        self.pods: Informer[Pod] = Informer(
            client, resources.PODS, parse=self._parse_pod, field_selector=NON_TERMINAL_PODS
        )
        self.nodes: Informer[Node] = Informer(client, resources.NODES, parse=Node.from_dict)
        self.devices: Informer[Device] = Informer(client, names.DEVICES, parse=self._parse_device)
        self.overcommits = OvercommitReporter(recorder, pods=self.pods.store.get, nodes=self.nodes.store.get)
        self.nodes.add_handlers(self._node_added, self._node_updated, self._node_deleted)
        self.devices.add_handlers(self._device_added, self._device_updated, self._device_deleted)
        self.pods.add_handlers(self._pod_added, self._pod_updated, self._pod_deleted)
        self.budgets: Informer[PodDisruptionBudget] = Informer(
            client, resources.POD_DISRUPTION_BUDGETS, parse=PodDisruptionBudget.from_dict
        )
        self.budgets.add_handlers(
            self._budget_changed, lambda _old, new: self._budget_changed(new), self._budget_deleted
        )

    def start(self) -> None:
        """Start the node and Device informers; pods follow once those have synced (`wait_for_sync`),
        so bound pods are accounted against the devices they name from the first moment."""
        self.nodes.start()
        self.devices.start()
        self.budgets.start()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Wait for nodes and Devices, start the pod informer, wait for it. False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for informer in (self.nodes, self.devices, self.pods):
            if not informer.started:
                informer.start()
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not informer.wait_for_sync(remaining):
                return False
        return True

    @property
    def synced(self) -> bool:
        return self.pods.has_synced and self.nodes.has_synced and self.devices.has_synced

    def stop(self) -> None:
        for informer in (self.pods, self.devices, self.nodes, self.budgets):
            if informer.started:
                informer.stop()

    def pod(self, namespace: str, name: str) -> Pod | None:
        return self.pods.store.get(f"{namespace}/{name}")

    # --- parsing: bad objects are skipped by the informer, and said on the object ---------------------
    def _parse_pod(self, raw: dict[str, Any]) -> Pod:
        try:
            return Pod.from_dict(raw)
        except TesseraError as e:
            spec = _mapping(raw, "spec")
            if spec.get("nodeName") or spec.get("schedulerName") in self._profiles:
                self._warn_raw(raw, "Pod", "v1", f"the scheduler cannot read this pod: {e}")
            raise

    def _parse_device(self, raw: dict[str, Any]) -> Device:
        try:
            return Device.from_dict(raw)
        except TesseraError as e:
            self._warn_raw(
                raw,
                names.DEVICES.kind,
                names.DEVICES.api_version,
                f"the scheduler cannot read this Device; it keeps using the last valid version: {e}",
            )
            raise

    def _warn_raw(self, raw: Mapping[str, Any], kind: str, api_version: str, message: str) -> None:
        meta = _mapping(raw, "metadata")
        ref = ObjectReference(
            kind,
            str(meta.get("name", "")),
            str(meta.get("namespace", "")),
            str(meta.get("uid", "")),
            api_version,
        )
        self._recorder.warning(ref, REASON_INVALID_OBJECT, message)

    # --- nodes and devices ------------------------------------------------------------------------------
    def _node_added(self, node: Node) -> None:
        with self._lock:
            self._cache.add_node(node)
        self._queue.move(NODE_ADDED)

    def _node_updated(self, old: Node, new: Node) -> None:
        with self._lock:
            self._cache.update_node(new)
        if _node_schedulable_view(old) != _node_schedulable_view(new):
            self._queue.move(NODE_CHANGED)

    def _node_deleted(self, node: Node) -> None:
        with self._lock:
            self._cache.remove_node(node.name)

    def _device_added(self, device: Device) -> None:
        with self._lock:
            self._cache.add_device(device)
            self._check_overcommits(device.node_name)
        self._warn_ignored(device)
        self._queue.move(DEVICE_ADDED)

    def _device_updated(self, old: Device, new: Device) -> None:
        with self._lock:
            self._cache.update_device(new)
            self._check_overcommits(new.node_name)
        if old.ignored != new.ignored or old.partition_problems != new.partition_problems:
            self._warn_ignored(new)
        if (
            old.devices != new.devices
            or old.gpu_partitions != new.gpu_partitions
            or old.partition_policy is not new.partition_policy
        ):
            self._queue.move(DEVICE_CHANGED)

    def _warn_ignored(self, device: Device) -> None:
        """One warning Event per change of what the scheduler leaves out of a Device (entries,
        GPU partitions)."""
        if device.ignored:
            message = f"the scheduler allocates none of these entries: {'; '.join(device.ignored)}"
            self._recorder.warning(ObjectReference.of(device), REASON_DEVICES_IGNORED, message)
        if device.partition_problems:
            message = f"GPU partitions not used: {'; '.join(device.partition_problems)}"
            self._recorder.warning(ObjectReference.of(device), REASON_INVALID_GPU_PARTITIONS, message)

    def _device_deleted(self, device: Device) -> None:
        with self._lock:
            self._cache.remove_device(device.node_name)
            self._check_overcommits(device.node_name)

    def _check_overcommits(self, node: str, cause: Pod | None = None) -> None:
        """Report over-committed devices of the node that are new (lock held)."""
        self.overcommits.check(node, self._cache.overcommits(node), cause=cause)

    # --- PodDisruptionBudgets ----------------------------------------------------------------------
    def _budget_changed(self, budget: PodDisruptionBudget) -> None:
        with self._lock:
            self._cache.budgets.update(budget)

    def _budget_deleted(self, budget: PodDisruptionBudget) -> None:
        with self._lock:
            self._cache.budgets.remove(budget.key)

    # --- the sets of pods plugins count ---------------------------------------------------------
    def _tell_frameworks(self, pod: Pod) -> bool:
        """Count the pod in the plugins' sets (gangs); True when it belongs to one."""
        member = False
        with self._lock:
            for framework in self._frameworks:
                framework.pod_added(pod)
                member = member or framework.queue_group(pod) is not None
        return member

    # --- pods ---------------------------------------------------------------------------------------
    def _pod_added(self, pod: Pod) -> None:
        self._pod_changed(None, pod)

    def _pod_updated(self, old: Pod, new: Pod) -> None:
        self._pod_changed(old, new)

    def _pod_changed(self, old: Pod | None, pod: Pod) -> None:
        uid = pod.uid or pod.key
        if self._unserved is not None:
            if pod.node_name or pod.is_deleting or pod.scheduler_name in self._profiles:
                self._unserved.forget(uid)
            else:
                self._unserved.waiting(uid, ObjectReference.of(pod), pod.scheduler_name)
        if self._tell_frameworks(pod) and old is None:
            self._queue.move(POD_ADDED)  # a new member may complete its gang
        if pod.node_name:
            with self._lock:
                self._cache.add_pod(pod)
                info = self._cache.pod_info(uid)
                unknown = self._cache.devices_unknown(uid)
                self._check_overcommits(pod.node_name, pod)
            if self._queue.done(uid) is not None:
                self._reporter.forget(uid)
            holdings = self._cache.holdings
            edited = old is None or holdings.records(old) != holdings.records(pod)
            if info is not None and info.allocation_error and edited:
                self._recorder.warning(
                    ObjectReference.of(pod),
                    REASON_INVALID_ALLOCATION,
                    _invalid_allocation(info, pod.node_name, unknown=unknown),
                )
            if old is not None and old.node_name and edited:
                self._queue.move(ASSIGNED_POD_RECORD_CHANGED)
        elif pod.is_deleting:
            self._queue.delete(uid)
        elif pod.scheduler_name in self._profiles:
            if pod.nominated_node_name:
                self._keep_nomination(pod)
            self._queue.add(pod)

    def _keep_nomination(self, pod: Pod) -> None:
        """A pending pod nominated by preemption (by us before a restart, or by the replica we
        took over from) keeps its room on that node. One we nominated ourselves is left as it
        is: it holds its victims' devices, which the API does not say."""
        with self._lock:
            nominator = self._cache.nominator
            if nominator.node_of(pod.uid or pod.key) is None:
                nominator.nominate(PodInfo.of(pod), pod.nominated_node_name)

    def _pod_deleted(self, pod: Pod) -> None:
        uid = pod.uid or pod.key
        if self._unserved is not None:
            self._unserved.forget(uid)
        with self._lock:
            node = self._cache.pod_node(uid)  # bound, or assumed by us and being bound
            self._cache.remove_pod(pod)
            for framework in self._frameworks:
                framework.pod_deleted(pod)
            if node is not None:
                self._check_overcommits(node)
        self._queue.delete(uid)
        self._reporter.forget(uid)
        if node is not None:
            self._queue.move(ASSIGNED_POD_DELETED)


def _invalid_allocation(info: PodInfo, node: str, *, unknown: bool) -> str:
    """The InvalidDeviceAllocation message: the annotation's problem, and what the scheduler does."""
    if not info.allocations and not unknown:
        return f"{info.allocation_error}; the pod asks for no devices, so it holds none"
    if info.allocations:
        held = ", ".join(f"{t.value} {a.minor}" for t, allocs in info.allocations.items() for a in allocs)
        return (
            f"{info.allocation_error}; the scheduler keeps counting its last valid allocation ({held}) "
            "until the annotation is fixed or the pod is deleted"
        )
    return (
        f"{info.allocation_error}; the scheduler does not know which devices this pod uses, so it gives out "
        f"no device of the types the pod asks for on node {node} until the annotation is fixed or the pod is deleted"
    )


def _node_schedulable_view(node: Node) -> tuple[object, ...]:
    """What of a Node can change whether pods fit (not its heartbeat or resourceVersion)."""
    return (node.allocatable, node.labels, node.taints, node.unschedulable, node.ready)


def _mapping(raw: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = raw.get(key)
    return value if isinstance(value, dict) else {}
