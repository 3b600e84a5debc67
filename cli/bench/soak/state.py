"""What the invariants look at: the API server's objects at one moment, and what the soak itself knows.

The API server's objects (pods, nodes, Device CRs, ElasticQuotas, Reservations, PodMigrationJobs)
are parsed into `apis` types once, by `observe.read_state`; the rest is the soak's own record, which
no component can vouch for: which creates the API server acknowledged (and the uid it gave), which
pods the soak deleted, when it sent each create, since when it has seen each GPU unhealthy and each
node lost, and which pods it saw where the node lifecycle controller may evict them. Every invariant
is a pure function of one `ClusterState`, so each can be tested on a hand-built bad state.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from apis.crds.device import Device
from apis.crds.elasticquota import ElasticQuota
from apis.crds.podmigrationjob import PodMigrationJob
from apis.crds.reservation import Reservation
from apis.extension import names
from apis.k8s.core import Node, Pod

__all__ = ["LIFECYCLE_TAINTS", "ClusterState", "GPUKey", "Reclaimed", "Stretch", "created_at"]

#: (node, GPU minor).
GPUKey = tuple[str, int]
#: The node lifecycle controller's taints: a node with one is judged lost (or not ready).
LIFECYCLE_TAINTS: Final = frozenset({names.TAINT_NODE_UNREACHABLE, names.TAINT_NODE_NOT_READY})


#: From when to when (wall clock) a quota was seen in every check over its runtime; None: still.
Stretch = tuple[float, float | None]


@dataclass(frozen=True, slots=True)
class Reclaimed:
    """A pod the quota controller's reclaim evicted, as its `ReclaimedByQuota` Event says."""

    pod: str
    #: The quota's name (quota names are cluster-wide).
    quota: str
    #: When (wall clock, whole seconds: the Event's first timestamp).
    at: float


@dataclass(frozen=True, slots=True)
class ClusterState:
    #: Wall-clock seconds (time.time()) when the objects were read.
    now: float
    pods: tuple[Pod, ...] = ()
    nodes: tuple[Node, ...] = ()
    devices: tuple[Device, ...] = ()
    quotas: tuple[ElasticQuota, ...] = ()
    #: Deployments, ReplicaSets and Jobs as the API serves them (raw: `apis.k8s.workloads` judges dicts).
    deployments: tuple[Mapping[str, Any], ...] = ()
    replicasets: tuple[Mapping[str, Any], ...] = ()
    jobs: tuple[Mapping[str, Any], ...] = ()
    #: Reservations listed after the pods, and listed before them: one that holds resources in
    #: both held them all the while the pods were listed (a phase never goes back to Available),
    #: which is what judging devices beside the pods needs (`holdings.reservation_holdings`).
    reservations: tuple[Reservation, ...] = ()
    reservations_before: tuple[Reservation, ...] = ()
    migrations: tuple[PodMigrationJob, ...] = ()
    #: Pod key → uid, for every create the API server answered with success.
    acknowledged: Mapping[str, str] = field(default_factory=dict)
    #: Pod keys the soak deleted or tried to (a failed delete may still have happened).
    deleted: frozenset[str] = frozenset()
    #: Pod key → wall-clock time the soak sent its create (creationTimestamp has only seconds).
    created: Mapping[str, float] = field(default_factory=dict)
    #: GPUs the soak has seen unhealthy in their Device CR, since when (wall clock), this stretch.
    unhealthy_since: Mapping[GPUKey, float] = field(default_factory=dict)
    #: Nodes the soak has seen tainted unreachable or not-ready (the node lifecycle controller
    #: judged them lost), since when (wall clock), this stretch.
    lost_since: Mapping[str, float] = field(default_factory=dict)
    #: Pods the soak has seen bound to such a node while it had the NoExecute taint: the node
    #: lifecycle controller may evict (delete) them, so their going is no loss.
    evictable: frozenset[str] = frozenset()
    #: Pods quota reclaim evicted (their going is no loss either; the quota family judges it).
    reclaimed: tuple[Reclaimed, ...] = ()
    #: Per leaf quota, the stretches of checks that saw it over its runtime computed from scratch
    #: (`kube.quotas.QuotaManager` over the listed quotas, pods and nodes), oldest first.
    overuse: Mapping[str, tuple[Stretch, ...]] = field(default_factory=dict)

    def devices_by_node(self) -> dict[str, Device]:
        return {d.node_name: d for d in self.devices}


def created_at(pod: Pod, state: ClusterState) -> float:
    """When the pod was created: the soak's own record, else its creationTimestamp (0 if none)."""
    if pod.key in state.created:
        return state.created[pod.key]
    try:
        stamp = datetime.datetime.fromisoformat(pod.meta.creation_timestamp.replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    return stamp.timestamp()
