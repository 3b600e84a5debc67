"""The node lifecycle controller's decisions: a node whose kubelet went silent is marked, tainted,
and its pods evicted once they stop tolerating it (kube-controller-manager's nodelifecycle).

**Heartbeats.** A kubelet renews its Lease in `kube-node-lease` (every 10 s) and posts the Node's
Ready condition (its `lastHeartbeatTime`). The controller notes when *it* saw either change, on its
own clock (upstream's probe timestamp), so clocks need not agree and a restarted controller gives
every node a full grace. Time during which the controller could not read the API server does not
count against the nodes either (`reachable_since`): after an API server restart every kubelet gets
a whole grace to renew before its node is judged, rather than all nodes being judged lost at once.

**Marking.** After `grace_s` (`--node-monitor-grace-period`, upstream 40 s) without a heartbeat,
the node's Ready condition (and its pressure conditions) become Unknown, reason `NodeStatusUnknown`,
and the Ready condition of every pod on it False. The kubelet, once back, posts Ready True again.

**Taints** follow the Ready condition: False → `node.kubernetes.io/not-ready`, Unknown →
`node.kubernetes.io/unreachable`, each as NoSchedule (the scheduler places nothing there) and
NoExecute (with `timeAdded`); Ready True clears both. As upstream in clusters of at most 50 nodes:
when every node of a zone (region/zone labels) is unhealthy (full disruption: more likely the
control plane's network than every machine) no NoExecute taint is kept there; when at least 3 and
55 % are (partial disruption) none is added.

**Eviction** (upstream's taint manager): a pod on a node with NoExecute taints is deleted at once
if it does not tolerate one of them, else at the taints' earliest `timeAdded` plus the smallest
`tolerationSeconds` among the tolerations it uses (none: never). The API server gives every pod
300 s for both taints unless it says otherwise (apiserver/pods.py, DefaultTolerationSeconds).
A deleted pod of a node that is gone stays Terminating until its kubelet comes back.

Not covered: the eviction rate limits (`--node-eviction-rate`, 0.1 nodes/s; the secondary rate of
clusters above 50 nodes), other conditions' taints (memory or disk pressure), and the pod garbage
collector that force-deletes pods of deleted nodes.
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from apis.extension import names
from apis.k8s.meta import now_rfc3339
from kube.events import WARNING
from kube.resources import NODES, STRATEGIC_MERGE_PATCH
from kubecontrollers.kinds import PODS
from kubecontrollers.plan import Delete, Obj, Patch, Plan, note

__all__ = [
    "LARGE_CLUSTER_SIZE",
    "Probe",
    "ZoneState",
    "eviction_time",
    "observe",
    "sync_nodes",
    "zone_state",
]

#: Upstream's defaults: `--unhealthy-zone-threshold` and `--large-cluster-size-threshold`.
UNHEALTHY_ZONE_THRESHOLD: Final = 0.55
LARGE_CLUSTER_SIZE: Final = 50
_LIFECYCLE_TAINTS: Final = (names.TAINT_NODE_NOT_READY, names.TAINT_NODE_UNREACHABLE)
_TAINT_OF_STATUS: Final = {"False": names.TAINT_NODE_NOT_READY, "Unknown": names.TAINT_NODE_UNREACHABLE}
_PRESSURE: Final = ("MemoryPressure", "DiskPressure", "PIDPressure")
_UNKNOWN_MESSAGE: Final = "Kubelet stopped posting node status."
_ZONE_LABELS: Final = ("topology.kubernetes.io/region", "topology.kubernetes.io/zone")


@dataclass(frozen=True, slots=True)
class Probe:
    """A node's heartbeat as last seen (Lease renewTime, Ready lastHeartbeatTime) and when the
    controller saw it change (its own clock)."""

    heartbeat: tuple[str, str]
    seen_at: float


class ZoneState(enum.Enum):
    NORMAL = "Normal"
    PARTIAL_DISRUPTION = "PartialDisruption"
    FULL_DISRUPTION = "FullDisruption"


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _name(obj: Obj) -> str:
    return str(_meta(obj).get("name", ""))


def _condition(obj: Obj, kind: str) -> Obj | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if isinstance(c, Mapping) and c.get("type") == kind:
            return c
    return None


def _heartbeat(node: Obj, lease: Obj | None) -> tuple[str, str]:
    renewed = str(((lease or {}).get("spec") or {}).get("renewTime") or "")
    ready = _condition(node, "Ready")
    return renewed, str((ready or {}).get("lastHeartbeatTime") or "")


def observe(
    probes: Mapping[str, Probe], nodes: Iterable[Obj], leases: Mapping[str, Obj], now: float
) -> dict[str, Probe]:
    """The probes after one look at `nodes` and their `leases` (by node name) at `now` (the
    controller's clock): a heartbeat that changed, or a node seen for the first time, is fresh."""
    out: dict[str, Probe] = {}
    for node in nodes:
        name = _name(node)
        beat = _heartbeat(node, leases.get(name))
        old = probes.get(name)
        out[name] = old if old is not None and old.heartbeat == beat else Probe(beat, now)
    return out


def zone_state(ready: Sequence[str | None]) -> ZoneState:
    """The state of a zone from its nodes' Ready statuses (None: not reported yet, counted healthy)."""
    unhealthy = sum(1 for r in ready if r in ("False", "Unknown"))
    healthy = len(ready) - unhealthy
    if healthy == 0 and unhealthy > 0:
        return ZoneState.FULL_DISRUPTION
    if unhealthy > 2 and unhealthy / len(ready) >= UNHEALTHY_ZONE_THRESHOLD:
        return ZoneState.PARTIAL_DISRUPTION
    return ZoneState.NORMAL


def _zone(node: Obj) -> str:
    labels = _meta(node).get("labels") or {}
    return ":".join(str(labels.get(k, "")) for k in _ZONE_LABELS)


def _seconds(stamp: object) -> float | None:
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _tolerates(toleration: Obj, taint: Obj) -> bool:
    """Kubernetes' ToleratesTaint on raw objects (`apis.k8s.core.Toleration` has no seconds)."""
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if toleration.get("key") and toleration.get("key") != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and bool(toleration.get("key")) and toleration.get("value", "") == taint.get("value", "")


def eviction_time(pod: Obj, taints: Sequence[Obj], now: float) -> float | None:
    """When the taint manager deletes `pod` from a node with the NoExecute `taints` (wall clock;
    `now` when at once, None: never)."""
    if not taints:
        return None
    tolerations = [t for t in (pod.get("spec") or {}).get("tolerations") or () if isinstance(t, Mapping)]
    used: list[Obj] = []
    for taint in taints:
        matching = [t for t in tolerations if _tolerates(t, taint)]
        if not matching:
            return now
        used += matching
    seconds = [float(t["tolerationSeconds"]) for t in used if isinstance(t.get("tolerationSeconds"), int | float)]
    if not seconds:
        return None
    if min(seconds) <= 0:
        return now
    added = [s for t in taints if (s := _seconds(t.get("timeAdded"))) is not None]
    return (min(added) if added else now) + min(seconds)


def _desired_taints(node: Obj, ready: str | None, zone: ZoneState, now: str) -> list[dict[str, Any]]:
    """The node's taints with the lifecycle ones as `ready` and the zone's state say."""
    current = [dict(t) for t in (node.get("spec") or {}).get("taints") or () if isinstance(t, Mapping)]
    kept = [t for t in current if t.get("key") not in _LIFECYCLE_TAINTS]
    key = _TAINT_OF_STATUS.get(ready or "")
    if key is None:
        return kept
    existing = {(t.get("key"), t.get("effect")): t for t in current}
    out = [*kept, existing.get((key, names.TAINT_EFFECT_NO_SCHEDULE)) or _taint(key, names.TAINT_EFFECT_NO_SCHEDULE)]
    no_execute = existing.get((key, names.TAINT_EFFECT_NO_EXECUTE))
    if zone is ZoneState.NORMAL and no_execute is None:
        no_execute = {**_taint(key, names.TAINT_EFFECT_NO_EXECUTE), "timeAdded": now}
    if zone is not ZoneState.FULL_DISRUPTION and no_execute is not None:
        out.append(no_execute)
    return out


def _taint(key: str, effect: str) -> dict[str, Any]:
    return {"key": key, "effect": effect}


def _mark_unknown(node: Obj, now: str) -> Patch:
    """Ready and the pressure conditions the kubelet posted become Unknown (merged by type)."""
    conditions = [
        {
            "type": kind,
            "status": "Unknown",
            "reason": "NodeStatusUnknown",
            "message": _UNKNOWN_MESSAGE,
            "lastTransitionTime": now,
        }
        for kind in ("Ready", *_PRESSURE)
        if kind == "Ready" or (_condition(node, kind) or {}).get("status") not in (None, "Unknown")
    ]
    told = note(node, NODES, "NodeNotReady", f"Node {_name(node)} status is now: NodeNotReady", WARNING)
    return Patch(
        NODES,
        "",
        _name(node),
        {"status": {"conditions": conditions}},
        subresource="status",
        patch_type=STRATEGIC_MERGE_PATCH,
        note=told,
    )


def _pod_not_ready(pod: Obj, now: str) -> Patch:
    meta = _meta(pod)
    body = {"status": {"conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": now}]}}
    return Patch(
        PODS,
        str(meta.get("namespace", "")),
        str(meta.get("name", "")),
        body,
        subresource="status",
        patch_type=STRATEGIC_MERGE_PATCH,
    )


def _evict(pod: Obj) -> Delete:
    meta = _meta(pod)
    key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    told = note(pod, PODS, "TaintManagerEviction", f"Marking for deletion Pod {key}")
    return Delete(PODS, str(meta.get("namespace", "")), str(meta.get("name", "")), str(meta.get("uid", "")), note=told)


def sync_nodes(
    nodes: Sequence[Obj],
    pods_by_node: Mapping[str, Sequence[Obj]],
    probes: Mapping[str, Probe],
    *,
    now: float,
    reachable_since: float,
    grace_s: float,
    wall: float,
) -> Plan:
    """One pass over every node: see the module docstring.

    `probes` (from `observe`) and `now`, `reachable_since` are on the controller's clock; `wall` is
    the wall clock, for taints' `timeAdded` and tolerations. The plan asks to look again when the
    next node's grace or pod's toleration runs out.
    """
    plan = Plan()
    stamp = now_rfc3339()
    ready: dict[str, str | None] = {}
    marks: dict[str, Patch] = {}
    for node in nodes:
        name = _name(node)
        probe = probes.get(name)
        fresh_from = max(probe.seen_at if probe is not None else now, reachable_since)
        if now - fresh_from > grace_s:
            ready[name] = "Unknown"
            if (_condition(node, "Ready") or {}).get("status") != "Unknown":
                marks[name] = _mark_unknown(node, stamp)
        else:
            ready[name] = str(c["status"]) if (c := _condition(node, "Ready")) is not None else None
            plan.later(fresh_from + grace_s - now + 0.01)
    zones: dict[str, list[str | None]] = {}
    for node in nodes:
        zones.setdefault(_zone(node), []).append(ready[_name(node)])
    states = {zone: zone_state(statuses) for zone, statuses in zones.items()}
    for node in nodes:
        name = _name(node)
        taints = _desired_taints(node, ready[name], states[_zone(node)], stamp)
        if taints != list((node.get("spec") or {}).get("taints") or ()):
            # Guarded by the resourceVersion read (someone's `kubectl taint` meanwhile is not
            # overwritten), so before the status write, which changes it.
            rv = _meta(node).get("resourceVersion")
            body = {"metadata": {"resourceVersion": rv}, "spec": {"taints": taints or None}}
            plan.actions.append(Patch(NODES, "", name, body))
        if name in marks:
            plan.actions.append(marks[name])
        plan.actions += _pod_actions(pods_by_node.get(name, ()), ready[name], taints, plan, wall=wall, stamp=stamp)
    return plan


def _pod_actions(
    pods: Iterable[Obj], ready: str | None, taints: Sequence[Obj], plan: Plan, *, wall: float, stamp: str
) -> list[Patch | Delete]:
    no_execute = [t for t in taints if t.get("effect") == names.TAINT_EFFECT_NO_EXECUTE]
    out: list[Patch | Delete] = []
    for pod in pods:
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") or _meta(pod).get("deletionTimestamp"):
            continue
        if ready not in (None, "True") and (_condition(pod, "Ready") or {}).get("status") == "True":
            out.append(_pod_not_ready(pod, stamp))
        when = eviction_time(pod, no_execute, wall)
        if when is None:
            continue
        if when <= wall:
            out.append(_evict(pod))
        else:
            plan.later(when - wall)
    return out
