"""The read side of the live scheduler, shared by the gRPC API and the diagnostics HTTP server.

Answers questions about the cache, the queue and the profiles — explain a pod, dry-run one,
list devices and pending pods, dump a node — as plain values, taking the cache lock only while
reading (a cycle holds it for about a millisecond). The servers turn the values into protobuf
messages or JSON; `tessera explain` renders them for people.

A dry run goes through the real cycle up to PreBind (so it returns the annotations the scheduler
would write, what the pod would hold among them) on a private identity, and undoes its
reservation before releasing the lock: nothing is ever left reserved and no cycle sees it.
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from apis.crds.device import DeviceType
from apis.errors import TesseraError, ValidationError
from apis.extension.allocation import DeviceAllocation
from apis.k8s import resources
from apis.k8s.core import Pod
from kube import errors
from scheduler.cache import ClusterCache, DeviceUsage, PodInfo
from scheduler.core import gangs
from scheduler.framework import CycleState, Framework, Status
from scheduler.plugins.coscheduling import GangSummary
from scheduler.service.explain import Evaluation, evaluate
from scheduler.service.queue import PendingPod, SchedulingQueue

__all__ = ["DryRun", "Explanation", "Inspector", "PodState", "device_summary", "parse_pod_json", "usage_json"]

#: Looks a pod up by namespace and name (None when unknown): the informer's copy, or the API
#: server's (which raises TesseraError when the pod cannot be parsed, kube.APIError when unreachable).
PodLookup = Callable[[str, str], Pod | None]


class PodState:
    """What `Explanation.state` can say."""

    BOUND = "bound"
    PENDING = "pending"
    NOT_OURS = "not-ours"
    FINISHED = "finished"
    NOT_FOUND = "not-found"
    INVALID = "invalid"


@dataclass(frozen=True, slots=True)
class Explanation:
    pod: str
    state: str
    profile: str = ""
    #: The node of a bound (or being bound) pod.
    node: str = ""
    #: What the queue knows (None when the pod is not queued here).
    queued: PendingPod | None = None
    #: The last attempt's message: the queue's, else the pod's PodScheduled=False message.
    last_attempt: str = ""
    #: Every Filter on every node, now (for pending pods).
    evaluation: Evaluation | None = None
    #: Devices a bound pod holds.
    devices: Mapping[DeviceType, tuple[DeviceAllocation, ...]] = field(default_factory=dict)
    #: A sentence for states without an evaluation (not ours, finished, unreadable annotation).
    detail: str = ""
    #: Plugins whose cluster events move the pod out of the unschedulable queue.
    waiting_for: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DryRun:
    profile: str
    node: str | None
    status: Status
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: node -> every rejection (only when the pod fits nowhere).
    evaluation: Evaluation | None = None
    feasible_nodes: int = 0


class Inspector:
    def __init__(
        self,
        *,
        lock: threading.RLock,
        cache: ClusterCache,
        frameworks: Mapping[str, Framework],
        queue: SchedulingQueue,
        lookup: PodLookup,
        fetch: PodLookup,
        is_leader: Callable[[], bool],
    ) -> None:
        self._lock = lock
        self._cache = cache
        self._frameworks = frameworks
        self._default = next(iter(frameworks.values()))
        self._queue = queue
        self._lookup = lookup
        self._fetch = fetch
        self.is_leader = is_leader

    @property
    def profiles(self) -> tuple[str, ...]:
        return tuple(self._frameworks)

    # --- explain ------------------------------------------------------------------------------------
    def explain(self, namespace: str, name: str) -> Explanation:
        """Why the pod is where it is, or why it is not scheduled yet."""
        key = f"{namespace}/{name}"
        pod = self._lookup(namespace, name)
        if pod is None:
            # Not in the informer's cache: finished, not there yet, gone, or unparseable. Ask.
            try:
                pod = self._fetch(namespace, name)
            except errors.APIError as e:  # before its base class, TesseraError
                return Explanation(key, PodState.NOT_FOUND, detail=f"cannot read the pod from the API server: {e}")
            except TesseraError as e:
                return Explanation(key, PodState.INVALID, detail=f"the scheduler cannot read this pod: {e}")
            if pod is None:
                return Explanation(key, PodState.NOT_FOUND, detail=f"pod {key} does not exist")
        if pod.is_terminal:
            return Explanation(key, PodState.FINISHED, pod.scheduler_name, pod.node_name, detail=f"phase {pod.phase}")
        uid = pod.uid or pod.key
        framework = self._frameworks.get(pod.scheduler_name)
        queued = self._queue.get(uid)
        with self._lock:
            node = self._cache.pod_node(uid)
            info = self._cache.pod_info(uid)
            unknown = self._cache.devices_unknown(uid)
            if node is None and framework is not None and queued is not None:
                evaluation = evaluate(framework, self._cache, pod)
            else:
                evaluation = None
            member_of = gangs.gang_of(self._frameworks, pod)
            nominated = self._cache.nominator.node_of(uid) or pod.nominated_node_name
            stale = self._cache.holdings.carried(pod)
        if pod.node_name or (node is not None and queued is None):
            return self._bound(key, pod, node or pod.node_name, info, unknown=unknown)
        if framework is None:
            detail = f"spec.schedulerName is {pod.scheduler_name!r}; this scheduler serves " + ", ".join(
                repr(p) for p in self._frameworks
            )
            return Explanation(key, PodState.NOT_OURS, pod.scheduler_name, detail=detail)
        last = queued.message if queued is not None and queued.message else pod.pending_message
        waiting_for = tuple(sorted(queued.plugins)) if queued is not None else ()
        return Explanation(
            key,
            PodState.PENDING,
            pod.scheduler_name,
            node=node or "",
            queued=queued,
            last_attempt=last,
            evaluation=evaluation,
            detail="; ".join(
                part for part in (_nominated(nominated), _gang_state(member_of), _stale_records(stale)) if part
            ),
            waiting_for=waiting_for,
        )

    def _bound(self, key: str, pod: Pod, node: str, info: PodInfo | None, *, unknown: bool) -> Explanation:
        detail = ""
        devices: Mapping[DeviceType, tuple[DeviceAllocation, ...]] = {}
        if info is not None and info.allocation_error:
            devices = info.allocations
            if devices:
                detail = f"{info.allocation_error}; the scheduler keeps counting its last valid allocation (below)"
            elif unknown:
                detail = (
                    f"{info.allocation_error}; which devices it uses is unknown, so no device of the types it asks "
                    f"for is given out on {node} until the annotation is fixed or the pod is deleted"
                )
            else:
                detail = f"{info.allocation_error}; it asks for no devices"
        elif info is not None:
            devices = info.allocations
        else:  # bound, as the API says, but not in the cache (yet): what its records say
            held = self._cache.holdings.info(pod)
            devices, detail = held.allocations, held.allocation_error
        return Explanation(key, PodState.BOUND, pod.scheduler_name, node, devices=devices, detail=detail)

    # --- dry run ------------------------------------------------------------------------------------
    def dry_run(self, pod: Pod, *, profile: str = "") -> DryRun:
        """Where the pod would go now and the annotations it would get; nothing stays reserved.

        Raises KeyError for an unknown profile.
        """
        framework = self._frameworks[profile] if profile else self._frameworks.get(pod.scheduler_name, self._default)
        probe = dataclasses.replace(pod, meta=dataclasses.replace(pod.meta, uid=f"dry-run-{uuid.uuid4()}"))
        info = PodInfo.of(probe)
        state = CycleState(dry_run=True)
        with self._lock:
            result = framework.schedule(state, info)
            if result.node is None:
                evaluation = evaluate(framework, self._cache, probe)
                return DryRun(framework.profile, None, result.status, evaluation=evaluation)
            self._cache.assume(info, result.node)
            try:
                status = framework.run_reserve(state, info, result.node)
                patch_annotations: dict[str, str] = {}
                if status.is_success:
                    status, writes = framework.run_pre_bind(state, info, result.node)
                    patch_annotations = writes.set_annotations
            finally:
                framework.run_unreserve(state, info, result.node)
                self._cache.forget(info.ident)
        if not status.is_success:
            return DryRun(framework.profile, None, status)
        return DryRun(framework.profile, result.node, status, patch_annotations, None, result.feasible_nodes)

    # --- gangs --------------------------------------------------------------------------------------
    def gangs(self) -> list[dict[str, Any]]:
        """Every gang the scheduler knows (`/apis/v1/plugins/Coscheduling/gangs`)."""
        with self._lock:
            return [g.to_dict() for g in gangs.gangs(self._frameworks)]

    def gangs_waiting(self) -> int:
        """Gangs with members held at Permit, not yet allowed."""
        with self._lock:
            return sum(1 for g in gangs.gangs(self._frameworks) if g.waiting and not g.satisfied)

    def gang(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            found = gangs.gang(self._frameworks, f"{namespace}/{name}")
        return found.to_dict() if found is not None else None

    # --- devices, nodes, the queue -------------------------------------------------------------------
    def node_devices(self, node: str = "") -> dict[str, tuple[DeviceUsage, ...]]:
        """node -> its devices (every node with a Device CR when `node` is empty)."""
        with self._lock:
            names_ = [node] if node else [n.name for n in self._cache.nodes()]
            out = {name: self._cache.device_usage(name) for name in names_}
        return {name: usage for name, usage in out.items() if usage or node}

    def pending(self, namespace: str = "") -> list[PendingPod]:
        pods = self._queue.pending()
        return [p for p in pods if not namespace or p.key.startswith(f"{namespace}/")]

    def node_info(self, node: str) -> dict[str, Any] | None:
        """A JSON view of what the scheduler knows of one node (Koordinator's `/apis/v1/nodes/:name`)."""
        with self._lock:
            info = self._cache.node(node)
            if info is None:
                return None
            pods = []
            for ident, pod in sorted(info.pods.items(), key=lambda kv: kv[1].key):
                entry: dict[str, Any] = {
                    "pod": pod.key,
                    "uid": ident,
                    "assumed": self._cache.is_assumed(ident),
                    "requests": resources.format_list(pod.requests),
                }
                if pod.allocations:
                    entry["devices"] = _allocations_json(pod.allocations)
                if pod.allocation_error:
                    entry["allocationError"] = pod.allocation_error
                pods.append(entry)
            reserved = [
                {
                    "reservation": held.name,
                    "uid": held.uid,
                    "requests": resources.format_list(held.pod.requests),
                    "devices": _allocations_json(held.allocations),
                }
                for held in self._cache.reservations_on(node)
            ]
            node_obj = info.node
            assert node_obj is not None
            usage = self._cache.device_usage(node)
            return {
                "name": node,
                "allocatable": resources.format_list(info.allocatable),
                "requested": resources.format_list(info.requested),
                "unschedulable": node_obj.unschedulable,
                "taints": [str(t) for t in node_obj.taints],
                "labels": dict(node_obj.labels),
                "generation": info.generation,
                "pods": pods,
                "reservations": reserved,
                "devices": [usage_json(u) for u in usage],
            }

    def device_summaries(self, node: str = "") -> dict[str, dict[str, Any]]:
        """Koordinator's DeviceShare `NodeDeviceSummary` per node (one node when `node` is given)."""
        return {name: device_summary(usage) for name, usage in self.node_devices(node).items()}

    def overcommitted_devices(self) -> dict[str, int]:
        """node -> over-committed devices (nodes with none left out), for metrics."""
        with self._lock:
            return self._cache.overcommitted_devices()

    def cache_sizes(self) -> tuple[int, int, int]:
        """(bound pods, assumed pods, nodes), for metrics."""
        with self._lock:
            pods = self._cache.pods()
            assumed = sum(1 for p in pods if self._cache.is_assumed(p.ident))
            return len(pods) - assumed, assumed, len(self._cache.nodes())


def parse_pod_json(doc: object) -> Pod:
    """A pod from Kubernetes JSON (the dry run's input). Raises TesseraError naming the field."""
    pod = Pod.from_dict(doc)
    if not pod.meta.name:
        raise ValidationError("metadata.name", "required")
    return pod


def usage_json(u: DeviceUsage) -> dict[str, Any]:
    return {
        "type": u.type.value,
        "minor": u.minor,
        "id": u.id,
        "healthy": u.healthy,
        "pcie": u.pcie,
        "numa": u.numa,
        "total": resources.format_list(u.total),
        "free": resources.format_list(u.free),
        "used": resources.format_list(u.used),
        "holders": [{"pod": h.pod, "resources": resources.format_list(h.resources)} for h in u.holders],
        "overcommitted": u.overcommitted,
    }


def device_summary(usage: tuple[DeviceUsage, ...]) -> dict[str, Any]:
    """Koordinator's NodeDeviceSummary: totals, per-device detail, and which pod holds what."""
    total: dict[str, int] = {}
    free: dict[str, int] = {}
    used: dict[str, int] = {}
    detail: dict[str, dict[str, dict[str, dict[str, str]]]] = {"total": {}, "free": {}, "used": {}}
    allocate_set: dict[str, dict[str, dict[str, dict[str, str]]]] = {}
    for u in usage:
        dtype = u.type.value
        for sums, amounts, kind in ((total, u.total, "total"), (free, u.free, "free"), (used, u.used, "used")):
            for name, amount in amounts.items():
                sums[name] = sums.get(name, 0) + amount
            detail[kind].setdefault(dtype, {})[str(u.minor)] = resources.format_list(amounts)
        for holder in u.holders:
            allocate_set.setdefault(dtype, {}).setdefault(holder.pod, {})[str(u.minor)] = resources.format_list(
                holder.resources
            )
    return {
        "deviceTotal": resources.format_list(total),
        "deviceFree": resources.format_list(free),
        "deviceUsed": resources.format_list(used),
        "deviceTotalDetail": detail["total"],
        "deviceFreeDetail": detail["free"],
        "deviceUsedDetail": detail["used"],
        "allocateSet": allocate_set,
    }


def _allocations_json(allocs: Mapping[DeviceType, tuple[DeviceAllocation, ...]]) -> dict[str, Any]:
    return {
        t.value: [{"minor": a.minor, "resources": resources.format_list(a.resources)} for a in entries]
        for t, entries in allocs.items()
    }


def _nominated(node: str) -> str:
    """A successful preemption, seen from the preemptor: where its room is being made."""
    if not node:
        return ""
    return f"nominated to node {node} by preemption: its victims are being deleted, the room is kept for it"


def _gang_state(gang: GangSummary | None) -> str:
    """`gang team/train: 3 of 4 members waiting at Permit, 0 bound, min 4; member … unschedulable: …`."""
    if gang is None:
        return ""
    return f"{gang.state}; {gang.reason}" if gang.reason else gang.state


def _stale_records(annotations: frozenset[str]) -> str:
    """A pending pod carrying a record of what it holds (`Holdings.carried`) from an earlier attempt."""
    if not annotations:
        return ""
    short = ", ".join(sorted(key.rpartition("/")[2] for key in annotations))
    return (
        f"the pod carries a {short} annotation from an earlier attempt; it holds no devices "
        "and is replaced (or removed) before the pod is bound"
    )
