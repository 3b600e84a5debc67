"""What would the scheduler do with these pods on this cluster? No cluster needed.

`tessera what-if -f snapshot.yaml` feeds Nodes, Device CRs, PodGroups, ElasticQuotas, Reservations,
PodDisruptionBudgets, Dynamic Resource Allocation's DeviceClasses, ResourceSlices, ResourceClaims
and ResourceClaimTemplates, and Pods (as
`kubectl get -o yaml` writes them, `List` kinds included) to the same core the live scheduler
runs: Reservations placed already (Available, with a node) hold their resources for their owners,
pending ones are placed first (as the live scheduler would, with the status it would write:
`reservations` in the report), pods that already have `spec.nodeName` are loaded as running (an
owner's `reservation-allocated` annotation consumes its Reservation), then every other pod is
scheduled in the order given — except that a gang's members are scheduled one after another,
where its first member is — each placement committed before the next. The result per pod is its
node (or none), the annotations the scheduler would write — and for two or more GPUs, whether
NVLink joins them all (as the node's Device says) and which of the node's GPU partitions they
are, if one — and for a pod that fits nowhere the reason
per node, and where preemption would make room and whom it would evict (`preemption`; nothing is
evicted: the snapshot's pods stay for the pods after it).

Pods with ResourceClaims are placed by the DynamicResources plugin as live; a pod's claim from a
template the snapshot has no claim for is made as the resourceclaim controller would make it
(`<pod>-<claim>`, owned by the pod), and the result names each claim's devices (`claims`).

Gangs are all or nothing, as live: members wait at Permit until their group is complete; what
still waits when the snapshot is done waits forever (its time is up), so every member of an
unsatisfied Strict gang ends with no node and a reason naming the gang. `report` adds one line
per gang (min, placed, satisfied, and why not) and, when the snapshot has ElasticQuotas, one per
quota (request, runtime and used after placement).
A pod whose `schedulerName` no profile serves is not placed, as the live scheduler would leave
it alone: the result says so (a pod that names no scheduler has `default-scheduler`; serve it
with a config that has that profile, like `tessera up`'s `DATA_DIR/scheduler/config.yaml`).

Pure: the caller parses YAML into dicts; this module turns them into objects and results.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from apis.crds.device import Device, DeviceType
from apis.crds.elasticquota import ElasticQuota
from apis.crds.podgroup import PodGroup
from apis.crds.reservation import CONDITION_SCHEDULED, Reservation
from apis.dra import DEVICE_CLASSES, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS, RESOURCE_SLICES
from apis.dra.claim import DeviceClass, ResourceClaim
from apis.dra.slice import ResourceSlice
from apis.errors import AnnotationError, ValidationError
from apis.extension import allocation, names
from apis.extension.partitions import NodePartitions
from apis.k8s import resources
from apis.k8s.core import Node, Pod
from apis.k8s.meta import ObjectMeta, OwnerReference, now_rfc3339
from apis.k8s.policy import PodDisruptionBudget
from scheduler.core import Outcome, Scheduler
from scheduler.core import gangs as core_gangs
from scheduler.framework.preemption import Preemption
from scheduler.framework.status import Code, Shortfall
from scheduler.plugins.coscheduling import GangSummary

__all__ = [
    "GangResult",
    "QuotaReport",
    "ReservationResult",
    "Snapshot",
    "WhatIfReport",
    "WhatIfResult",
    "load",
    "parse_objects",
    "quota_reports",
    "report",
    "run",
]

_LIST_KINDS = frozenset(
    {
        "List",
        "NodeList",
        "PodList",
        "DeviceList",
        f"{names.POD_GROUPS.kind}List",
        f"{names.ELASTIC_QUOTAS.kind}List",
        f"{names.RESERVATIONS.kind}List",
        "PodDisruptionBudgetList",
        *(f"{r.kind}List" for r in (DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_SLICES)),
    }
)
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Snapshot:
    nodes: tuple[Node, ...] = ()
    devices: tuple[Device, ...] = ()
    pods: tuple[Pod, ...] = ()
    pod_groups: tuple[PodGroup, ...] = ()
    quotas: tuple[ElasticQuota, ...] = ()
    reservations: tuple[Reservation, ...] = ()
    #: PodDisruptionBudgets: preemption spares the pods they protect, as the live scheduler does.
    budgets: tuple[PodDisruptionBudget, ...] = ()
    #: Dynamic Resource Allocation (`resource.k8s.io/v1`).
    device_classes: tuple[DeviceClass, ...] = ()
    resource_slices: tuple[ResourceSlice, ...] = ()
    resource_claims: tuple[ResourceClaim, ...] = ()
    #: ResourceClaimTemplates: `namespace/name` -> the claim spec they make.
    claim_templates: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    #: `kind` of every object skipped (Namespaces, Services, ...), for a warning.
    ignored: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WhatIfResult:
    pod: str
    node: str | None
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: node -> reasons it was rejected (only for pods that fit nowhere)
    reasons: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: kube-scheduler's one-line summary, for pods that fit nowhere
    message: str = ""
    #: nodes that missed by resources alone, closest first, with what they lack
    nearest: tuple[tuple[str, tuple[Shortfall, ...]], ...] = ()
    #: For a pod given two or more GPUs: whether NVLink joins every two of them; else None.
    nvlink: bool | None = None
    #: For a pod given whole GPUs that are one of the node's GPU partitions: that partition and
    #: where the table came from (`[0,1,2,3] (built-in table for H100, Honor)`); else "".
    partition: str = ""
    #: why the pod was not scheduled at all (no profile serves its schedulerName)
    reason: str = ""
    #: For a pod that fits nowhere: where preemption would make room, and whom it would evict
    #: (nothing is evicted in what-if; the pods stay where they are for the next pods).
    preemption: Preemption | None = None
    #: For a pod with ResourceClaims: claim `namespace/name` -> its devices (`driver/pool/device`).
    claims: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "pod": self.pod,
            "node": self.node,
            "annotations": dict(self.annotations),
            "reasons": {node: list(r) for node, r in self.reasons.items()},
        }
        if self.message:
            out["message"] = self.message
        if self.nearest:
            out["nearest"] = {node: [str(s) for s in shortfalls] for node, shortfalls in self.nearest}
        if self.nvlink is not None:
            out["nvlink"] = self.nvlink
        if self.partition:
            out["partition"] = self.partition
        if self.reason:
            out["reason"] = self.reason
        if self.claims:
            out["claims"] = {key: list(devices) for key, devices in self.claims.items()}
        if self.preemption is not None:
            out["preemption"] = {
                "node": self.preemption.node,
                "plugin": self.preemption.plugin,
                "victims": [v.key for v in self.preemption.victims],
            }
        return out


@dataclass(frozen=True, slots=True)
class GangResult:
    """One gang after the snapshot: how many members were placed of the min it needs."""

    name: str
    min: int
    placed: int
    satisfied: bool
    reason: str = ""

    @classmethod
    def of(cls, summary: GangSummary) -> GangResult:
        return cls(summary.name, summary.min_available, summary.bound, summary.satisfied, summary.reason)

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "min": self.min,
            "placed": self.placed,
            "satisfied": self.satisfied,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class ReservationResult:
    """One Reservation of the snapshot after what-if: its phase and node, and why not placed."""

    name: str
    phase: str
    node: str = ""
    message: str = ""
    #: What it holds for its owners (placed ones), as Kubernetes strings.
    allocatable: Mapping[str, str] = field(default_factory=dict)
    #: The running pods it was placed over (pre-allocation: their resources are its own), `ns/name`.
    pre_allocated: tuple[str, ...] = ()

    @classmethod
    def of(cls, reservation: Reservation) -> ReservationResult:
        scheduled = next((c for c in reservation.conditions if c.type == CONDITION_SCHEDULED), None)
        message = scheduled.message if scheduled is not None and scheduled.status == "False" else ""
        phase = "Expired" if reservation.is_expired else reservation.phase.value
        allocatable = resources.format_list(reservation.allocatable)
        over = tuple(f"{r.namespace}/{r.name}" for r in reservation.pre_allocated)
        return cls(reservation.name, phase, reservation.node_name, message, allocatable, over)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"name": self.name, "phase": self.phase, "node": self.node or None}
        if self.message:
            out["message"] = self.message
        if self.allocatable:
            out["allocatable"] = dict(self.allocatable)
        if self.pre_allocated:
            out["preAllocated"] = list(self.pre_allocated)
        return out


@dataclass(frozen=True, slots=True)
class WhatIfReport:
    results: tuple[WhatIfResult, ...]
    gangs: tuple[GangResult, ...] = ()
    #: One per ElasticQuota of the snapshot; the JSON has `quotas` only when the snapshot had some.
    quotas: tuple[QuotaReport, ...] = ()
    #: One per Reservation of the snapshot; the JSON has `reservations` only when it had some.
    reservations: tuple[ReservationResult, ...] = ()

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "results": [r.to_dict() for r in self.results],
            "gangs": [g.to_dict() for g in self.gangs],
        }
        if self.quotas:
            out["quotas"] = [q.to_dict() for q in self.quotas]
        if self.reservations:
            out["reservations"] = [r.to_dict() for r in self.reservations]
        return out


def parse_objects(docs: Iterable[object], *, source: str = "snapshot") -> Snapshot:
    """Nodes, Devices and Pods from parsed YAML/JSON documents, in order. Raises
    ValidationError naming the document that is not a valid object."""
    nodes: list[Node] = []
    devices: list[Device] = []
    pods: list[Pod] = []
    groups: list[PodGroup] = []
    quotas: list[ElasticQuota] = []
    reservations: list[Reservation] = []
    budgets: list[PodDisruptionBudget] = []
    classes: list[DeviceClass] = []
    slices: list[ResourceSlice] = []
    claims: list[ResourceClaim] = []
    templates: dict[str, Mapping[str, object]] = {}
    ignored: list[str] = []

    def visit(doc: object, where: str) -> None:
        if doc is None:
            return
        if not isinstance(doc, Mapping):
            raise ValidationError(where, f"expected a Kubernetes object, got {type(doc).__name__}")
        kind = doc.get("kind")
        if kind in _LIST_KINDS:
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise ValidationError(f"{where}.items", "expected a list")
            for i, item in enumerate(items):
                visit(item, f"{where}.items[{i}]")
        elif kind == "Node":
            nodes.append(_parse(Node.from_dict, doc, where))
        elif kind == names.DEVICES.kind:
            devices.append(_parse(Device.from_dict, doc, where))
        elif kind == "Pod":
            pods.append(_parse(Pod.from_dict, doc, where))
        elif kind == names.POD_GROUPS.kind:
            groups.append(_parse(PodGroup.from_dict, doc, where))
        elif kind == names.ELASTIC_QUOTAS.kind:
            quotas.append(_parse(ElasticQuota.from_dict, doc, where))
        elif kind == names.RESERVATIONS.kind:
            reservations.append(_parse(Reservation.from_dict, doc, where))
        elif kind == "PodDisruptionBudget":
            budgets.append(_parse(PodDisruptionBudget.from_dict, doc, where))
        elif kind == DEVICE_CLASSES.kind:
            classes.append(_parse(DeviceClass.from_dict, doc, where))
        elif kind == RESOURCE_SLICES.kind:
            slices.append(_parse(ResourceSlice.from_dict, doc, where))
        elif kind == RESOURCE_CLAIMS.kind:
            claims.append(_parse(ResourceClaim.from_dict, doc, where))
        elif kind == RESOURCE_CLAIM_TEMPLATES.kind:
            template = _parse(_claim_template, doc, where)
            templates[template[0]] = template[1]
        else:
            ignored.append(str(kind))

    for i, doc in enumerate(docs):
        visit(doc, f"{source}[{i}]")
    return Snapshot(
        tuple(nodes),
        tuple(devices),
        tuple(pods),
        tuple(groups),
        tuple(quotas),
        tuple(reservations),
        tuple(budgets),
        tuple(classes),
        tuple(slices),
        tuple(claims),
        templates,
        tuple(ignored),
    )


def _claim_template(raw: object) -> tuple[str, Mapping[str, object]]:
    """A ResourceClaimTemplate: its `namespace/name` and the claim spec it makes (checked by
    parsing a claim of it: a bad spec is named at load, not when a pod needs it)."""
    doc = raw if isinstance(raw, Mapping) else {}
    meta = ObjectMeta.from_dict(doc.get("metadata"))
    spec = doc.get("spec")
    inner = spec.get("spec") if isinstance(spec, Mapping) else None
    body = dict(inner) if isinstance(inner, Mapping) else {}
    ResourceClaim.from_dict({"metadata": {"name": meta.name, "namespace": meta.namespace or "default"}, "spec": body})
    return f"{meta.namespace or 'default'}/{meta.name}", body


def _parse(parser: Callable[[object], _T], doc: Mapping[str, object], where: str) -> _T:
    meta = doc.get("metadata")
    if not isinstance(meta, Mapping) or not meta.get("name"):
        # As the API server would answer: an object needs a name (a pod without one named "default/").
        raise ValidationError(f"{where}: metadata.name", f"Required value: a {doc.get('kind')} needs a name")
    try:
        return parser(doc)
    except ValidationError as e:
        raise ValidationError(f"{where}: {e.field}", e.reason, obj=e.obj) from None


def run(snapshot: Snapshot, scheduler: Scheduler) -> list[WhatIfResult]:
    """Load the snapshot into the scheduler's cache and schedule its pending pods."""
    return list(report(snapshot, scheduler).results)


def report(snapshot: Snapshot, scheduler: Scheduler, *, now: str = "") -> WhatIfReport:
    """`run`, plus one line per gang and per quota. Results come in the snapshot's order.

    The snapshot's ElasticQuotas and every pod (pending or placed) go to the scheduler's quota
    manager first, so each quota's runtime is shared by the demand of the whole snapshot.
    `now` (RFC 3339, default the current time) stamps the conditions of placed Reservations."""
    pending, placed = load(snapshot, scheduler, now=now)
    devices = {device.node_name: device for device in snapshot.devices}
    # By position in `pending` (a snapshot may list one pod twice); a pod held at Permit is
    # decided later, named by its key.
    outcomes: dict[int, Outcome] = {}
    held: dict[str, int] = {}
    # A pod no profile serves is left alone, as live.
    not_served = {
        i: WhatIfResult(pod.key, None, reason=f"schedulerName {pod.scheduler_name} is not served by this scheduler")
        for i, pod in enumerate(pending)
        if scheduler.framework_for(pod) is None
    }

    def record(decided: list[Outcome]) -> None:
        for outcome in decided:
            outcomes[held.pop(outcome.pod)] = outcome

    for i in scheduler.queue_order(pending):
        if i in not_served:
            continue
        outcome = outcomes[i] = scheduler.schedule_one(pending[i])
        if outcome.status.code is Code.WAIT:
            held[outcome.pod] = i
        record(scheduler.resolve_waiting())
    # The snapshot is done: whatever still waits at Permit waits in vain.
    record(scheduler.resolve_waiting(now=math.inf))
    results = tuple(
        not_served.get(i)
        or _result(outcomes[i], core_gangs.gang_of(scheduler.frameworks, pod), devices, _partitions(scheduler))
        for i, pod in enumerate(pending)
    )
    found = core_gangs.gangs(scheduler.frameworks)
    gangs = tuple(GangResult.of(g) for g in found if g.created)
    return WhatIfReport(results, gangs, tuple(quota_reports(snapshot, scheduler)), placed)


def load(snapshot: Snapshot, scheduler: Scheduler, *, now: str = "") -> tuple[list[Pod], tuple[ReservationResult, ...]]:
    """Put the snapshot into the scheduler — quotas (with every pod's demand), nodes, Devices,
    PodGroups, placed Reservations, placed pods — then place its pending Reservations; return its
    pending pods (no node, not finished) in order, and every Reservation as it ends up.
    What-if schedules the pods; `tessera deschedule` plans room for them."""
    cache = scheduler.cache
    if snapshot.quotas:
        scheduler.quotas.set_quotas(snapshot.quotas)
        for pod in snapshot.pods:
            scheduler.quotas.update_pod(pod)
    for node in snapshot.nodes:
        cache.add_node(node)
    for device in snapshot.devices:
        cache.add_device(device)
    for group in snapshot.pod_groups:
        scheduler.observe_pod_group(group)
    for budget in snapshot.budgets:
        cache.budgets.update(budget)
    for klass in snapshot.device_classes:
        scheduler.feeds.deliver(DEVICE_CLASSES, klass)
    for s in snapshot.resource_slices:
        scheduler.feeds.deliver(RESOURCE_SLICES, s)
    for claim in snapshot.resource_claims:
        scheduler.feeds.deliver(RESOURCE_CLAIMS, claim)
    waiting = []
    for reservation in snapshot.reservations:
        if reservation.node_name or reservation.phase.terminal:
            cache.add_reservation(reservation)
        else:
            waiting.append(reservation)
    pending = []
    known = {c.key for c in snapshot.resource_claims}
    for listed in snapshot.pods:
        pod = listed
        if not pod.node_name and not pod.is_terminal:
            pod = _with_template_claims(pod, snapshot.claim_templates, known, scheduler)
        if pod.node_name:
            cache.add_pod(pod)
        elif not pod.is_terminal:
            pending.append(pod)
        scheduler.observe_pod(pod)
    after = {r.uid or r.name: r for r in snapshot.reservations}
    stamp = now or now_rfc3339()
    for reservation in waiting:
        after[reservation.uid or reservation.name] = scheduler.place_reservation(reservation, now=stamp)[1]
    return pending, tuple(ReservationResult.of(r) for r in after.values())


def _with_template_claims(
    pod: Pod, templates: Mapping[str, Mapping[str, object]], known: set[str], scheduler: Scheduler
) -> Pod:
    """The pending pod with a claim made for each of its templates the snapshot has no claim
    for, as the resourceclaim controller makes them (named `<pod>-<claim>`, owned by the pod,
    recorded in the pod's status); a template the snapshot lacks leaves the pod waiting."""
    statuses = dict(pod.resource_claim_statuses)
    for pod_claim in pod.resource_claims:
        template = pod_claim.resource_claim_template_name
        if not template or pod_claim.name in statuses:
            continue
        spec = templates.get(f"{pod.namespace}/{template}")
        if spec is None:
            continue
        name = f"{pod.name}-{pod_claim.name}"
        if f"{pod.namespace}/{name}" not in known:
            meta = {"name": name, "namespace": pod.namespace, "uid": f"{pod.uid or pod.key}/{pod_claim.name}"}
            claim = ResourceClaim.from_dict({"metadata": meta, "spec": dict(spec)})
            owner = OwnerReference("v1", "Pod", pod.name, pod.uid, controller=True)
            claim = dataclasses.replace(claim, meta=dataclasses.replace(claim.meta, owner_references=(owner,)))
            scheduler.feeds.deliver(RESOURCE_CLAIMS, claim)
            known.add(claim.key)
        statuses[pod_claim.name] = name
    return dataclasses.replace(pod, resource_claim_statuses=statuses) if statuses else pod


def _claims_written(outcome: Outcome) -> dict[str, tuple[str, ...]]:
    """Claim -> devices, from the claims' status writes PreBind asked for (allocated now or before)."""
    out: dict[str, tuple[str, ...]] = {}
    for write in outcome.writes.objects:
        status = write.patch.get("status") if write.resource == RESOURCE_CLAIMS else None
        allocation = status.get("allocation") if isinstance(status, Mapping) else None
        if isinstance(allocation, Mapping):
            results = (allocation.get("devices") or {}).get("results") or []
            out[f"{write.namespace}/{write.name}"] = tuple(
                f"{r['driver']}/{r['pool']}/{r['device']}" for r in results if isinstance(r, Mapping)
            )
        elif isinstance(status, Mapping):
            out[f"{write.namespace}/{write.name}"] = ("(allocated before)",)
    return out


def _partitions(scheduler: Scheduler) -> Callable[[str], NodePartitions | None]:
    def of(node: str) -> NodePartitions | None:
        info = scheduler.cache.node(node)
        return info.devices.partitions if info is not None else None

    return of


def _result(
    outcome: Outcome,
    gang: GangSummary | None,
    devices: Mapping[str, Device],
    partitions_of: Callable[[str], NodePartitions | None],
) -> WhatIfResult:
    if outcome.scheduled:
        device = devices.get(outcome.node or "")
        nvlink = _nvlinked(outcome.annotations, device) if device is not None else None
        partition = _partition(outcome.annotations, partitions_of(outcome.node or ""))
        claims = _claims_written(outcome)
        return WhatIfResult(
            outcome.pod,
            outcome.node,
            dict(outcome.annotations),
            nvlink=nvlink,
            partition=partition,
            claims=claims,
        )
    diagnosis = outcome.diagnosis
    message = outcome.status.message
    if gang is not None and f"gang {gang.name}" not in message:
        message = f"gang {gang.name} not satisfied ({gang.bound} of min {gang.min_available} placed): {message}"
    return WhatIfResult(
        pod=outcome.pod,
        node=None,
        reasons={node: tuple(reasons) for node, reasons in diagnosis.reasons_by_node().items()},
        message=message,
        nearest=tuple(diagnosis.nearest()),
        preemption=outcome.preemption,
    )


def _partition(annotations: Mapping[str, str], node: NodePartitions | None) -> str:
    """The node's partition the pod's whole GPUs are, described; "" when they are none."""
    if node is None or node.table is None:
        return ""
    try:
        gpus = allocation.from_pod_annotations(annotations).get(DeviceType.GPU, ())
    except AnnotationError:
        return ""
    if not gpus or any(g.resources.get(names.GPU_CORE, 0) < 100 for g in gpus):
        return ""  # a share: placed as without partitions
    return node.describe(g.minor for g in gpus)


def _nvlinked(annotations: Mapping[str, str], device: Device) -> bool | None:
    """Whether NVLink joins every two of the pod's GPUs; None for fewer than two."""
    try:
        gpus = allocation.from_pod_annotations(annotations).get(DeviceType.GPU, ())
    except AnnotationError:
        return None  # the scheduler wrote it: cannot happen; the table shows it unreadable anyway
    if len(gpus) < 2:
        return None
    return device.nvlinked(g.minor for g in gpus)


@dataclass(frozen=True, slots=True)
class QuotaReport:
    """One ElasticQuota after what-if: quantities per resource, as Kubernetes strings; min and max
    in the names quotas count (`apis.extension.quotacount`), as runtime, request and used are;
    used includes the quotas below it, as `status.used` does."""

    name: str
    namespace: str
    parent: str
    min: resources.ResourceList
    max: resources.ResourceList
    request: resources.ResourceList
    runtime: resources.ResourceList
    used: resources.ResourceList

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "namespace": self.namespace,
            "parent": self.parent,
            **{key: resources.format_list(getattr(self, key)) for key in ("min", "max", "request", "runtime", "used")},
        }


def quota_reports(snapshot: Snapshot, scheduler: Scheduler) -> list[QuotaReport]:
    """Each of the snapshot's quotas after `run`: request, runtime and used (after placement)."""
    manager = scheduler.quotas
    specs = manager.specs()
    out = []
    for quota in snapshot.quotas:
        name = quota.meta.name
        spec = specs.get(name)
        out.append(
            QuotaReport(
                name=name,
                namespace=quota.meta.namespace,
                parent=spec.parent if spec is not None else "",
                min=spec.min if spec is not None else quota.min,
                max=spec.max if spec is not None else quota.max,
                request=manager.request(name),
                runtime=manager.runtime(name),
                used=manager.subtree_used(name),
            )
        )
    return out
