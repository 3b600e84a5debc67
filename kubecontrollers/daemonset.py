"""The DaemonSet controller's decisions: one pod on every node that should run one.

As upstream (kube's daemon controller, for what is covered): a node should run the DaemonSet's pod
when the template's `nodeName` (if any), `nodeSelector` and required node affinity match it and
its NoSchedule and NoExecute taints are tolerated — by the template's tolerations plus the ones the
controller adds to every daemon pod (not-ready and unreachable NoExecute; disk, memory and PID
pressure, unschedulable, and network-unavailable for host-network pods, NoSchedule). A node that
should run one and has none gets a pod `NAME-xxxxx` whose required node affinity is replaced by
`matchFields metadata.name In [node]`, so the scheduler places it there (and nowhere else); a
node whose NoExecute taints or affinity no longer admit the pod has it deleted; a node with two
keeps the oldest; a failed pod is deleted and made again. Pods carry `controller-revision-hash`
(a hash of the template) and `pod-template-generation`.

`RollingUpdate` replaces pods of an older template: with `maxSurge` 0 (the default) it deletes old
pods while no more than `maxUnavailable` nodes (default 1, or a percentage of the desired nodes,
rounded up) lack an available pod — an old pod that is not available goes at once — and the next
sync creates the new ones; with `maxSurge` > 0 it creates the new pod beside the old one on up to
maxSurge nodes and deletes the old one once the new is available. `OnDelete` replaces a pod only
when someone deleted it. The status has what `kubectl get ds` and `kubectl rollout status` read.
Not covered: ControllerRevision objects (the revision is the hash), minReadySeconds, the backoff
before re-creating a failed pod (the simulated kubelet fails no daemon pod on its own).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, Final

from apis.errors import TesseraError
from apis.extension import names
from apis.k8s import core
from apis.k8s.workloads import is_pod_active, is_pod_ready, scaled_value
from kubecontrollers.kinds import DAEMON_SETS, PODS
from kubecontrollers.plan import (
    Delete,
    Obj,
    Plan,
    controlled_by,
    create_pod,
    note,
    owner_reference,
    pod_from_template,
    random_suffix,
    safe_hash,
    status_patch,
)

__all__ = ["DAEMON_TOLERATIONS", "sync_daemonset", "target_node"]

_NODE_NAME_FIELD: Final = "metadata.name"
#: Status fields written even when 0 (they are not omitempty in apps/v1).
_ALWAYS: Final = ("desiredNumberScheduled", "currentNumberScheduled", "numberMisscheduled", "numberReady")


def _toleration(key: str, effect: str) -> dict[str, str]:
    return {"key": key, "operator": "Exists", "effect": effect}


#: Added to every daemon pod (kube's AddOrUpdateDaemonPodTolerations); host-network pods also
#: tolerate network-unavailable.
DAEMON_TOLERATIONS: Final = (
    _toleration(names.TAINT_NODE_NOT_READY, names.TAINT_EFFECT_NO_EXECUTE),
    _toleration(names.TAINT_NODE_UNREACHABLE, names.TAINT_EFFECT_NO_EXECUTE),
    _toleration(names.TAINT_NODE_DISK_PRESSURE, names.TAINT_EFFECT_NO_SCHEDULE),
    _toleration(names.TAINT_NODE_MEMORY_PRESSURE, names.TAINT_EFFECT_NO_SCHEDULE),
    _toleration(names.TAINT_NODE_PID_PRESSURE, names.TAINT_EFFECT_NO_SCHEDULE),
    _toleration(names.TAINT_NODE_UNSCHEDULABLE, names.TAINT_EFFECT_NO_SCHEDULE),
)
_HOST_NETWORK_TOLERATION: Final = _toleration(names.TAINT_NODE_NETWORK_UNAVAILABLE, names.TAINT_EFFECT_NO_SCHEDULE)


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _labels(obj: Obj) -> Mapping[str, str]:
    return _meta(obj).get("labels") or {}


def target_node(pod: Obj) -> str:
    """The node a daemon pod is for: its nodeName once bound, else the node its affinity names
    (kube's GetTargetNodeName); "" when neither says."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required: list[Obj] = (affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get(
        "nodeSelectorTerms"
    ) or []
    for term in required:
        for field in term.get("matchFields") or ():
            values: list[object] = field.get("values") or []
            if field.get("key") == _NODE_NAME_FIELD and field.get("operator") == "In" and len(values) == 1:
                return str(values[0])
    return ""


def _with_daemon_tolerations(spec: dict[str, Any]) -> None:
    tolerations = list(spec.get("tolerations") or ())
    wanted = [*DAEMON_TOLERATIONS, *((_HOST_NETWORK_TOLERATION,) if spec.get("hostNetwork") else ())]
    for toleration in wanted:
        if not any(t.get("key") == toleration["key"] and t.get("effect") == toleration["effect"] for t in tolerations):
            tolerations.append(dict(toleration))
    spec["tolerations"] = tolerations


def _pinned_affinity(spec: dict[str, Any], node: str) -> None:
    """The template's required node affinity replaced by `metadata.name In [node]` (preferred kept),
    as kube's ReplaceDaemonSetPodNodeNameNodeAffinity."""
    affinity = dict(spec.get("affinity") or {})
    node_affinity = dict(affinity.get("nodeAffinity") or {})
    pin = {"key": _NODE_NAME_FIELD, "operator": "In", "values": [node]}
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [{"matchFields": [pin]}]}
    affinity["nodeAffinity"] = node_affinity
    spec["affinity"] = affinity


def _fits(template: Obj, node: core.Node) -> tuple[bool, bool]:
    """(should run, should continue running) of the template's pod on `node`."""
    spec = dict(template.get("spec") or {})
    _with_daemon_tolerations(spec)
    try:
        pod = core.Pod.from_dict({"metadata": {"name": "daemon", "namespace": "x"}, "spec": spec})
    except TesseraError:
        return False, False  # the API server validated the template: a parse failure matches no node
    if pod.node_name and pod.node_name != node.name:
        return False, False
    labels = node.labels
    if any(labels.get(k) != v for k, v in pod.node_selector.items()):
        return False, False
    if pod.node_affinity is not None and not pod.node_affinity.required_matches(labels, node.name):
        return False, False

    def tolerated(effect: str) -> bool:
        return all(any(t.tolerates(taint) for t in pod.tolerations) for taint in node.taints if taint.effect == effect)

    keeps = tolerated(names.TAINT_EFFECT_NO_EXECUTE)
    return keeps and tolerated(names.TAINT_EFFECT_NO_SCHEDULE), keeps


def _created(pod: Obj) -> str:
    return str(_meta(pod).get("creationTimestamp") or "")


def _available(pod: Obj) -> bool:
    return is_pod_active(pod) and is_pod_ready(pod)


def _delete(ds: Obj, pod: Obj) -> Delete:
    meta = _meta(pod)
    told = note(ds, DAEMON_SETS, "SuccessfulDelete", f"Deleted pod: {meta['name']}")
    return Delete(PODS, str(meta.get("namespace", "")), str(meta["name"]), str(meta["uid"]), note=told)


def sync_daemonset(ds: Obj, nodes: Sequence[Obj], pods: Sequence[Obj], *, rng: random.Random | None = None) -> Plan:
    """What `ds` needs, given every node and the pods of its namespace."""
    plan = Plan()
    meta, spec = _meta(ds), ds.get("spec") or {}
    if meta.get("deletionTimestamp"):
        return plan
    name, namespace = str(meta["name"]), str(meta.get("namespace", ""))
    template = spec.get("template") or {}
    revision = safe_hash(template)
    generation = str(meta.get("generation", 1))
    owned = [p for p in pods if controlled_by(p, meta["uid"]) and not _meta(p).get("deletionTimestamp")]
    by_node: dict[str, list[Obj]] = {}
    for pod in owned:
        by_node.setdefault(target_node(pod), []).append(pod)
    strategy = spec.get("updateStrategy") or {}
    rolling = strategy.get("type", "RollingUpdate") == "RollingUpdate"
    rolling_update = strategy.get("rollingUpdate") or {}
    ref = owner_reference(ds, DAEMON_SETS)
    should_run: list[str] = []
    creates: list[str] = []
    old_on: dict[str, Obj] = {}  # node -> its one old-revision pod
    new_on: dict[str, Obj] = {}
    misscheduled = 0
    for raw_node in sorted(nodes, key=lambda n: str(_meta(n).get("name", ""))):
        try:
            node = core.Node.from_dict(raw_node)
        except TesseraError:
            continue
        run, keep = _fits(template, node)
        here = sorted(by_node.pop(node.name, ()), key=_created)
        failed = [p for p in here if (p.get("status") or {}).get("phase") == "Failed"]
        plan.actions += [_delete(ds, p) for p in failed]
        here = [p for p in here if p not in failed]
        if not keep:
            plan.actions += [_delete(ds, p) for p in here]
            continue
        if not run:  # may stay where it runs, but is not wanted there
            misscheduled += bool(here)
            continue
        should_run.append(node.name)
        new = [p for p in here if _labels(p).get(names.LABEL_CONTROLLER_REVISION_HASH) == revision]
        old = [p for p in here if p not in new]
        if not here:
            creates.append(node.name)
            continue
        if new:
            new_on[node.name] = new[0]
            plan.actions += [_delete(ds, p) for p in new[1:]]  # duplicates: the oldest stays
            if old and _available(new[0]):
                plan.actions += [_delete(ds, p) for p in old]  # a surge pod is up: the old one goes
        else:
            old_on[node.name] = old[0]
            plan.actions += [_delete(ds, p) for p in old[1:]]
    for stray in by_node.values():  # pods for nodes that are gone
        plan.actions += [_delete(ds, p) for p in stray if p.get("spec", {}).get("nodeName")]
    desired = len(should_run)
    if rolling and old_on:
        surge = _scaled(rolling_update.get("maxSurge", 0), desired, round_up=True)
        unavailable_budget = max(_scaled(rolling_update.get("maxUnavailable", 1), desired, round_up=True), 0)
        if surge > 0:
            surging = sum(1 for n in new_on if n in old_on)
            for node_name in list(old_on)[: max(0, surge - surging)]:
                if node_name not in new_on:
                    creates.append(node_name)
        else:
            unavailable = sum(
                1 for n in should_run if not any(_available(p) for p in (new_on.get(n), old_on.get(n)) if p is not None)
            )
            for pod in old_on.values():
                if not _available(pod):
                    plan.actions.append(_delete(ds, pod))
                elif unavailable < unavailable_budget:
                    plan.actions.append(_delete(ds, pod))
                    unavailable += 1
    labels = {names.LABEL_CONTROLLER_REVISION_HASH: revision, names.LABEL_POD_TEMPLATE_GENERATION: generation}
    for node_name in creates:
        body = pod_from_template(
            template, namespace=namespace, name=f"{name}-{random_suffix(rng)}", owner=ref, labels=labels
        )
        _with_daemon_tolerations(body["spec"])
        _pinned_affinity(body["spec"], node_name)
        told = note(ds, DAEMON_SETS, "SuccessfulCreate", f"Created pod: {body['metadata']['name']}")
        plan.actions.append(create_pod(body, told))
    scheduled = [p for n in should_run for p in (new_on.get(n), old_on.get(n)) if p is not None]
    available = sum(1 for n in should_run if any(_available(p) for p in (new_on.get(n), old_on.get(n)) if p))
    status: dict[str, Any] = {
        "observedGeneration": meta.get("generation", 1),
        "desiredNumberScheduled": desired,
        "currentNumberScheduled": sum(1 for n in should_run if n in new_on or n in old_on),
        "numberMisscheduled": misscheduled,
        "numberReady": sum(1 for p in scheduled if is_pod_ready(p)),
        "updatedNumberScheduled": len([n for n in should_run if n in new_on]),
        "numberAvailable": available,
        "numberUnavailable": desired - available,
    }
    status = {k: v for k, v in status.items() if v or k in _ALWAYS}
    write = status_patch(ds, DAEMON_SETS, status)
    if write is not None:
        plan.actions.append(write)
    return plan


def _scaled(value: object, total: int, *, round_up: bool) -> int:
    try:
        return scaled_value(value, total, round_up=round_up)
    except TesseraError:
        return 0
