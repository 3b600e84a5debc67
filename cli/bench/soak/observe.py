"""The soak's own record (what it created, deleted, saw bound, saw unhealthy) and reading the
API server's objects into a `ClusterState`.

`Record` is shared by the workload, the bound watch and the checker (threads), so every change
holds its lock. Times are wall-clock seconds (`time.time()`), comparable with creationTimestamps.
"""

from __future__ import annotations

import datetime
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from apis.crds.device import Device, DeviceType
from apis.crds.elasticquota import ElasticQuota
from apis.crds.podmigrationjob import PodMigrationJob
from apis.crds.reservation import Reservation
from apis.errors import TesseraError
from apis.extension import names
from apis.k8s.core import Node, Pod
from cli.bench.soak.invariants.quotas import over_runtime
from cli.bench.soak.state import LIFECYCLE_TAINTS, ClusterState, GPUKey, Reclaimed, Stretch
from kube import resources
from kube.client import Client
from kube.informer import Informer

__all__ = ["BoundWatch", "Record", "read_state"]

log = logging.getLogger(__name__)
T = TypeVar("T")
#: The quota controller's Event on a pod it evicted (controller/quotas/reconciler.py).
_RECLAIMED_REASON = "ReclaimedByQuota"
_RECLAIMED_QUOTA = re.compile(r"quota [^/\s]+/(\S+) used ")
#: Overuse stretches older than this are forgotten.
_KEEP_OVERUSE_S = 3600.0


class Record:
    """See the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.acknowledged: dict[str, str] = {}
        self.deleted: set[str] = set()
        self.created: dict[str, float] = {}
        self.bound_at: dict[str, float] = {}
        self.unhealthy_since: dict[GPUKey, float] = {}
        self.lost_since: dict[str, float] = {}
        self.evictable: set[str] = set()
        #: Times a node was seen lost (a new stretch each time), and pods seen where they may be
        #: evicted that the watch then saw go without the soak having deleted them.
        self.nodes_seen_lost = 0
        self.evicted = 0
        #: Pods that may wait for their quota: their create → bound says more of the quota than of
        #: the scheduler, so it is left out of the latency.
        self.may_wait: set[str] = set()
        #: Per leaf quota, the stretches of checks that saw it over its from-scratch runtime.
        self.overuse: dict[str, list[Stretch]] = {}
        #: Pod key → its eviction by quota reclaim, as its Event says.
        self.reclaimed: dict[str, Reclaimed] = {}

    def sending_create(self, key: str, *, may_wait: bool = False) -> None:
        with self._lock:
            self.created[key] = time.time()
            if may_wait:
                self.may_wait.add(key)

    def acknowledge(self, key: str, uid: str) -> None:
        with self._lock:
            self.acknowledged[key] = uid

    def deleting(self, key: str) -> None:
        with self._lock:
            self.deleted.add(key)

    def saw_bound(self, key: str) -> None:
        with self._lock:
            self.bound_at.setdefault(key, time.time())

    def saw_devices(self, devices: Iterable[Device], now: float) -> None:
        """Keep `unhealthy_since`: a GPU's first sighting unhealthy, until it is seen healthy."""
        with self._lock:
            for device in devices:
                for gpu in device.of_type(DeviceType.GPU):
                    key = (device.node_name, gpu.minor)
                    if gpu.health:
                        self.unhealthy_since.pop(key, None)
                    else:
                        self.unhealthy_since.setdefault(key, now)

    def saw_nodes(self, nodes: Iterable[Node], pods: Iterable[Pod], now: float) -> None:
        """Keep `lost_since` (a node's first sighting with a lifecycle taint, until seen without
        one) and `evictable` (pods seen on a node with a lifecycle NoExecute taint)."""
        lost = {n.name: n for n in nodes if any(t.key in LIFECYCLE_TAINTS for t in n.taints)}
        no_execute = {
            name
            for name, n in lost.items()
            if any(t.key in LIFECYCLE_TAINTS and t.effect == names.TAINT_EFFECT_NO_EXECUTE for t in n.taints)
        }
        with self._lock:
            for name in [n for n in self.lost_since if n not in lost]:
                del self.lost_since[name]
            for name in lost:
                if name not in self.lost_since:
                    self.lost_since[name] = now
                    self.nodes_seen_lost += 1
            self.evictable.update(p.key for p in pods if p.node_name in no_execute)

    def saw_overuse(self, over: Iterable[str], now: float) -> None:
        """Keep `overuse`: a stretch opens at the first check that sees a quota over its runtime
        and closes at the first that does not."""
        seen = set(over)
        with self._lock:
            for quota, stretches in self.overuse.items():
                if stretches[-1][1] is None and quota not in seen:
                    stretches[-1] = (stretches[-1][0], now)
                self.overuse[quota] = [s for s in stretches if s[1] is None or s[1] > now - _KEEP_OVERUSE_S]
            for quota in seen:
                stretches = self.overuse.setdefault(quota, [])
                if not stretches or stretches[-1][1] is not None:
                    stretches.append((now, None))

    def saw_reclaimed(self, evictions: Iterable[Reclaimed]) -> None:
        with self._lock:
            for eviction in evictions:
                self.reclaimed.setdefault(eviction.pod, eviction)

    def saw_gone(self, key: str) -> None:
        """A pod went: counted as evicted when it was seen on a lost node (with the NoExecute taint)
        and the soak had not deleted it by then (a Job deleted meanwhile would count too)."""
        with self._lock:
            if key in self.evictable and key not in self.deleted:
                self.evicted += 1

    def create_to_bound_s(self) -> list[float]:
        """Seconds from sending each create to first seeing the pod bound (not `may_wait` pods)."""
        with self._lock:
            return [
                at - self.created[key]
                for key, at in self.bound_at.items()
                if key in self.created and key not in self.may_wait
            ]

    def acknowledged_now(self) -> dict[str, str]:
        with self._lock:
            return dict(self.acknowledged)

    def state(self, now: float, acknowledged: dict[str, str], **objects: Any) -> ClusterState:
        """The state with the API server's `objects` as listed at `now`. `acknowledged` must be
        taken (`acknowledged_now`) before they were listed, and the rest of the record is taken
        now, after: a pod created while they were listed would otherwise count as lost (it is
        acknowledged, not listed), and one deleted meanwhile likewise (listed as gone, not yet
        recorded as deleted)."""
        with self._lock:
            return ClusterState(
                now=now,
                acknowledged=acknowledged,
                deleted=frozenset(self.deleted),
                created=dict(self.created),
                unhealthy_since=dict(self.unhealthy_since),
                lost_since=dict(self.lost_since),
                evictable=frozenset(self.evictable),
                reclaimed=tuple(self.reclaimed.values()),
                overuse={q: tuple(s) for q, s in self.overuse.items() if s},
                **objects,
            )


def _parsed(items: Iterable[object], parse: Callable[[object], T], what: str) -> tuple[T, ...]:
    out = []
    for raw in items:
        try:
            out.append(parse(raw))
        except TesseraError as e:  # a component wrote something malformed: say so, judge the rest
            log.warning("Skipping an object that does not parse", extra={"kind": what, "error": str(e)})
    return tuple(out)


def read_state(client: Client, record: Record) -> ClusterState:
    """Everything the invariants need, listed from the API server now. Raises kube's APIError
    (or OSError) while it does not answer: the caller skips that check."""
    acknowledged = record.acknowledged_now()  # before the list: see Record.state
    now = time.time()
    reservations_api = client.resource(names.RESERVATIONS)
    # Reservations around the pods: see ClusterState.reservations_before.
    reservations_before = _parsed(reservations_api.list_all().items, Reservation.from_dict, "reservation")
    pods = _parsed(client.resource(resources.PODS).list_all().items, Pod.from_dict, "pod")
    reservations = _parsed(reservations_api.list_all().items, Reservation.from_dict, "reservation")
    nodes = _parsed(client.resource(resources.NODES).list_all().items, Node.from_dict, "node")
    devices = _parsed(client.resource(names.DEVICES).list_all().items, Device.from_dict, "device")
    quotas = _parsed(client.resource(names.ELASTIC_QUOTAS).list_all().items, ElasticQuota.from_dict, "quota")
    workloads = {
        "deployments": tuple(client.resource(resources.DEPLOYMENTS).list_all().items),
        "replicasets": tuple(client.resource(resources.REPLICA_SETS).list_all().items),
        "jobs": tuple(client.resource(resources.JOBS).list_all().items),
        "reservations": reservations,
        "reservations_before": reservations_before,
        "migrations": _parsed(
            client.resource(names.POD_MIGRATION_JOBS).list_all().items, PodMigrationJob.from_dict, "podmigrationjob"
        ),
    }
    record.saw_devices(devices, now)
    record.saw_nodes(nodes, pods, now)
    record.saw_overuse(over_runtime(quotas, nodes, pods), now)
    events = client.resource(resources.EVENTS).list_all(field_selector=f"reason={_RECLAIMED_REASON}").items
    record.saw_reclaimed(_reclaimed(events))
    return record.state(now, acknowledged, pods=pods, nodes=nodes, devices=devices, quotas=quotas, **workloads)


def _reclaimed(events: Iterable[dict[str, Any]]) -> list[Reclaimed]:
    """The evictions the quota controller's `ReclaimedByQuota` Events tell of."""
    out = []
    for event in events:
        found = _RECLAIMED_QUOTA.search(str(event.get("message", "")))
        about = event.get("involvedObject") or {}
        stamp = str(event.get("firstTimestamp") or event.get("eventTime") or event.get("lastTimestamp") or "")
        try:
            at = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        except ValueError:
            continue
        if found is not None:
            out.append(Reclaimed(f"{about.get('namespace', '')}/{about.get('name', '')}", found.group(1), at))
    return out


class BoundWatch:
    """An informer on every pod that records when each is first seen bound (for create → bound)
    and which pods went (for the evictions count).
    It rides out API server restarts (kube.informer re-watches or relists)."""

    def __init__(self, client: Client, record: Record) -> None:
        self._informer: Informer[Pod] = Informer(client, resources.PODS, parse=Pod.from_dict)
        self._informer.add_handlers(
            on_add=self._seen,
            on_update=lambda _old, new: self._seen(new),
            on_delete=lambda pod: record.saw_gone(pod.key),
        )
        self._record = record

    def _seen(self, pod: Pod) -> None:
        if pod.node_name:
            self._record.saw_bound(pod.key)

    def start(self) -> None:
        self._informer.start()

    def stop(self) -> None:
        self._informer.stop()
