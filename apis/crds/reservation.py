"""The `Reservation` CR (scheduling.koordinator.sh/v1alpha1, cluster-scoped): resources held on a
node for pods that do not exist yet.

The scheduler places a Reservation as it places a pod (its `template` is the pod it stands for,
device requests included) and then keeps the node's resources — CPU, memory, whole GPUs, GPU
shares, VFs — out of every other pod's reach. A pod matching one of `owners` is placed onto them
in preference and consumes them; with `allocateOnce` (the default) the first such pod ends the
Reservation (`Succeeded`). `ttl` (default 24h) and `expires` end an unused one (`Failed`, its
Ready condition `False` with reason `Expired`, as Koordinator writes it): whichever comes first,
as Koordinator's controller checks them (its manual calls them exclusive); `ttl: 0` never.

Owner matching follows Koordinator's `MatchReservationOwners`: `owners` is a disjunction; inside
one owner, `object`, `controller` and `labelSelector` are ANDed; an empty owner `{}` matches every
pod (and the CRD refuses it, `minProperties: 1`).

With `allocateOnce: false` every owner uses what the owners before it left, until it expires:
`status.currentOwners` lists them (namespace, name and UID, by UID, as Koordinator writes them)
and `status.allocated` sums their requests of the reserved resources. What is left for the next
owner is `remaining()`: reserved minus allocated, per resource, never below zero.

`allocatePolicy` says where an owner's resources come from: unset or `Aligned`, from the
Reservation first and from the node's free room for the rest; `Restricted`, the resources it
restricts (`restricted_names`: all it reserves, or those its `reservation-restricted-options`
annotation lists) only from what the Reservation has left, the others from the node.

`preAllocation: true` lets the scheduler place it over running pods (pre-allocate): pods that
match its owners (`preAllocationPolicy.mode: Default`) or carry the `is-pre-allocatable` label
(`Cluster`), one of them or, with `enableMultiple`, several, whose requests fit within what it
reserves. Their resources become its own: they are written in its `pre_allocated` record (a
Tessera annotation) and get its `reservation-allocated` annotation, so they count as using it
(`currentOwners`, `allocated`) without consuming an allocateOnce one; when they go, what they
had is held for the owners.
"""

from __future__ import annotations

import datetime
import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from apis import _fields as f
from apis._annotation import load_json
from apis.errors import AnnotationError, ValidationError
from apis.extension import names, reservationoptions
from apis.k8s import resources
from apis.k8s.core import Pod, Taint
from apis.k8s.duration import format_duration, parse_duration
from apis.k8s.labels import LabelSelector
from apis.k8s.meta import Condition, ObjectMeta

__all__ = [
    "DEFAULT_TTL_SECONDS",
    "ControllerRef",
    "ObjectRef",
    "Reservation",
    "ReservationAllocated",
    "ReservationOwner",
    "ReservationPhase",
    "allocated_from_pod",
    "pre_allocated_annotation",
    "pre_allocated_from",
    "reservation_allocated_annotation",
]

GROUP_VERSION = f"{names.SCHEDULING_DOMAIN}/v1alpha1"
KIND = "Reservation"
PLURAL = "reservations"
DEFAULT_TTL_SECONDS = 24 * 3600.0

#: Condition types and reasons, as Koordinator names them.
CONDITION_SCHEDULED = "Scheduled"
CONDITION_READY = "Ready"
REASON_SCHEDULED = "Scheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_AVAILABLE = "Available"
REASON_SUCCEEDED = "Succeeded"
REASON_EXPIRED = "Expired"

#: `spec.preAllocationPolicy.mode`, as Koordinator names them.
PRE_ALLOCATION_DEFAULT = "Default"
PRE_ALLOCATION_CLUSTER = "Cluster"


class ReservationPhase(enum.Enum):
    PENDING = "Pending"  # not placed yet (or unschedulable for now)
    AVAILABLE = "Available"  # placed: its resources wait for an owner
    WAITING = "Waiting"  # placed, resources not ready (pre-allocation; accepted, not produced)
    SUCCEEDED = "Succeeded"  # an owner consumed it (allocateOnce)
    FAILED = "Failed"  # expired or unusable: holds nothing

    @property
    def holds_resources(self) -> bool:
        """Whether the node's resources are still set aside for this Reservation's owners."""
        return self in (ReservationPhase.AVAILABLE, ReservationPhase.WAITING)

    @property
    def terminal(self) -> bool:
        return self in (ReservationPhase.SUCCEEDED, ReservationPhase.FAILED)


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """corev1.ObjectReference, the fields owner matching and status use (empty = any)."""

    api_version: str = ""
    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> ObjectRef:
        d = f.mapping(raw, path, obj)
        return cls(
            api_version=f.string(d, "apiVersion", path, obj),
            kind=f.string(d, "kind", path, obj),
            namespace=f.string(d, "namespace", path, obj),
            name=f.string(d, "name", path, obj),
            uid=f.string(d, "uid", path, obj),
        )

    @classmethod
    def to_pod(cls, pod: Pod) -> ObjectRef:
        """An owner as Koordinator's controller lists it in `currentOwners`: namespace, name, UID."""
        return cls(namespace=pod.meta.namespace, name=pod.meta.name, uid=pod.meta.uid)

    def matches_pod(self, pod: Pod) -> bool:
        # apiVersion and kind are not compared: only pods are matched (as Koordinator does).
        return (
            (not self.uid or self.uid == pod.meta.uid)
            and (not self.name or self.name == pod.meta.name)
            and (not self.namespace or self.namespace == pod.meta.namespace)
        )

    def to_dict(self) -> dict[str, Any]:
        return f.drop_empty(
            {
                "apiVersion": self.api_version,
                "kind": self.kind,
                "namespace": self.namespace,
                "name": self.name,
                "uid": self.uid,
            }
        )


@dataclass(frozen=True, slots=True)
class ControllerRef:
    """An owner reference plus a namespace: pods whose owner (typically their controller) it is."""

    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None
    namespace: str = ""

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> ControllerRef:
        d = f.mapping(raw, path, obj)
        controller = d.get("controller")
        if controller is not None and not isinstance(controller, bool):
            raise ValidationError(f"{path}.controller", f"must be a boolean, got {controller!r}", obj=obj)
        return cls(
            api_version=f.string(d, "apiVersion", path, obj),
            kind=f.string(d, "kind", path, obj),
            name=f.string(d, "name", path, obj),
            uid=f.string(d, "uid", path, obj),
            controller=controller,
            namespace=f.string(d, "namespace", path, obj),
        )

    def matches_pod(self, pod: Pod) -> bool:
        if self.namespace and self.namespace != pod.meta.namespace:
            return False
        return any(
            (self.controller is None or ref.controller == self.controller)
            and (not self.uid or self.uid == ref.uid)
            and (not self.name or self.name == ref.name)
            and (not self.kind or self.kind == ref.kind)
            and (not self.api_version or self.api_version == ref.api_version)
            for ref in pod.meta.owner_references
        )

    def to_dict(self) -> dict[str, Any]:
        out = f.drop_empty(
            {
                "apiVersion": self.api_version,
                "kind": self.kind,
                "name": self.name,
                "uid": self.uid,
                "namespace": self.namespace,
            }
        )
        if self.controller is not None:
            out["controller"] = self.controller
        return out


@dataclass(frozen=True, slots=True)
class ReservationOwner:
    """One alternative of `spec.owners`: every part that is set must match."""

    object_ref: ObjectRef | None = None  # `object`
    controller: ControllerRef | None = None
    label_selector: LabelSelector | None = None

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> ReservationOwner:
        d = f.mapping(raw, path, obj)
        return cls(
            object_ref=ObjectRef.from_dict(d["object"], f"{path}.object", obj) if d.get("object") is not None else None,
            controller=(
                ControllerRef.from_dict(d["controller"], f"{path}.controller", obj)
                if d.get("controller") is not None
                else None
            ),
            label_selector=(
                LabelSelector.from_dict(d["labelSelector"], f"{path}.labelSelector", obj)
                if d.get("labelSelector") is not None
                else None
            ),
        )

    def matches(self, pod: Pod) -> bool:
        return (
            (self.object_ref is None or self.object_ref.matches_pod(pod))
            and (self.controller is None or self.controller.matches_pod(pod))
            and (self.label_selector is None or self.label_selector.matches(pod.meta.labels))
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.object_ref is not None:
            out["object"] = self.object_ref.to_dict()
        if self.controller is not None:
            out["controller"] = self.controller.to_dict()
        if self.label_selector is not None:
            out["labelSelector"] = self.label_selector.to_dict()
        return out


@dataclass(frozen=True, slots=True)
class Reservation:
    meta: ObjectMeta
    #: The pod template as written (`metadata` + `spec`): the scheduler places it as a pod.
    template: Mapping[str, Any] = field(default_factory=dict)
    owners: tuple[ReservationOwner, ...] = ()
    #: Seconds after creation it expires; None: never (`ttl: 0`, even with `expires`).
    ttl_seconds: float | None = DEFAULT_TTL_SECONDS
    expires: str = ""
    allocate_once: bool = True
    allocate_policy: str = ""
    #: No new owner may use it (unless its reservation-affinity tolerates
    #: `node.kubernetes.io/unschedulable`); it is placed and holds all the same.
    unschedulable: bool = False
    #: `spec.taints`: an owner with a reservation-affinity must tolerate them.
    taints: tuple[Taint, ...] = ()
    #: `spec.preAllocation`: it may be placed over running pods, taking their resources over.
    pre_allocation: bool = False
    #: `spec.preAllocationPolicy`: which pods (`Default`: its owners; `Cluster`: those labelled
    #: pre-allocatable) and whether several may be taken over (`enableMultiple`).
    pre_allocation_mode: str = PRE_ALLOCATION_DEFAULT
    pre_allocate_multiple: bool = False
    #: The pods it was placed over (Tessera's `pre-allocated` annotation): they use it without
    #: consuming it.
    pre_allocated: tuple[ObjectRef, ...] = ()
    phase: ReservationPhase = ReservationPhase.PENDING
    node_name: str = ""
    conditions: tuple[Condition, ...] = ()
    current_owners: tuple[ObjectRef, ...] = ()
    allocatable: resources.ResourceList = field(default_factory=dict)
    allocated: resources.ResourceList = field(default_factory=dict)
    #: Memos of `reserve_pod()`, `reserved()` and `restricted_names()`, derived from the fields
    #: above (never state; see PodInfo's).
    _reserve: Pod | None = field(default=None, init=False, repr=False, compare=False)
    _reserved: Mapping[str, int] | None = field(default=None, init=False, repr=False, compare=False)
    _restricted: tuple[str, ...] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def uid(self) -> str:
        return self.meta.uid

    @classmethod
    def from_dict(cls, raw: object) -> Reservation:
        d = f.mapping(raw, "reservation")
        meta = ObjectMeta.from_dict(d.get("metadata"))
        obj = f"reservation {meta.key}"
        spec = f.mapping(d.get("spec"), "spec", obj)
        status = f.mapping(d.get("status"), "status", obj)
        template = f.mapping(spec.get("template"), "spec.template", obj)
        if not template or not isinstance(template.get("spec"), Mapping):
            raise ValidationError("spec.template", "is required and must hold a pod spec", obj=obj)
        owners = tuple(
            ReservationOwner.from_dict(o, f"spec.owners[{i}]", obj)
            for i, o in enumerate(f.items(spec, "owners", "spec", obj))
        )
        if not owners:
            raise ValidationError("spec.owners", "must name at least one owner", obj=obj)
        for i, owner in enumerate(owners):
            if owner == ReservationOwner():
                raise ValidationError(f"spec.owners[{i}]", "must set object, controller or labelSelector", obj=obj)
        ttl_text = f.string(spec, "ttl", "spec", obj)
        ttl: float | None = DEFAULT_TTL_SECONDS
        if ttl_text:
            try:
                ttl = parse_duration(ttl_text)
            except ValueError as e:
                raise ValidationError("spec.ttl", str(e), obj=obj) from None
            ttl = ttl or None
        expires = f.string(spec, "expires", "spec", obj)
        if expires:
            _parse_time(expires, "spec.expires", obj)
        phase_text = f.string(status, "phase", "status", obj, ReservationPhase.PENDING.value)
        try:
            phase = ReservationPhase(phase_text)
        except ValueError:
            raise ValidationError("status.phase", f"unknown phase {phase_text!r}", obj=obj) from None
        allocate_policy = f.string(spec, "allocatePolicy", "spec", obj)
        if allocate_policy not in ("", "Aligned", "Restricted"):
            raise ValidationError(
                "spec.allocatePolicy", f"must be Aligned or Restricted, got {allocate_policy!r}", obj=obj
            )
        taints = tuple(
            Taint.from_dict(t, f"spec.taints[{i}]", obj) for i, t in enumerate(f.items(spec, "taints", "spec", obj))
        )
        policy = f.mapping(spec.get("preAllocationPolicy"), "spec.preAllocationPolicy", obj)
        mode = f.string(policy, "mode", "spec.preAllocationPolicy", obj, PRE_ALLOCATION_DEFAULT)
        if mode not in (PRE_ALLOCATION_DEFAULT, PRE_ALLOCATION_CLUSTER):
            raise ValidationError("spec.preAllocationPolicy.mode", f"must be Default or Cluster, got {mode!r}", obj=obj)
        reservation = cls(
            meta=meta,
            template=template,
            owners=owners,
            ttl_seconds=ttl,
            expires=expires,
            allocate_once=f.boolean(spec, "allocateOnce", "spec", obj, True),
            allocate_policy=allocate_policy,
            unschedulable=f.boolean(spec, "unschedulable", "spec", obj),
            taints=taints,
            pre_allocation=f.boolean(spec, "preAllocation", "spec", obj),
            pre_allocation_mode=mode,
            pre_allocate_multiple=f.boolean(policy, "enableMultiple", "spec.preAllocationPolicy", obj),
            pre_allocated=pre_allocated_from(meta.annotations, obj=obj),
            phase=phase,
            node_name=f.string(status, "nodeName", "status", obj),
            conditions=tuple(
                Condition.from_dict(c, f"status.conditions[{i}]", obj)
                for i, c in enumerate(f.items(status, "conditions", "status", obj))
            ),
            current_owners=tuple(
                ObjectRef.from_dict(o, f"status.currentOwners[{i}]", obj)
                for i, o in enumerate(f.items(status, "currentOwners", "status", obj))
            ),
            allocatable=resources.parse_list(status.get("allocatable"), field="status.allocatable", obj=obj),
            allocated=resources.parse_list(status.get("allocated"), field="status.allocated", obj=obj),
        )
        reservation.reserve_pod()  # a template that is no valid pod is refused here, not in the scheduler
        reservation.restricted_names()  # and so is a Restricted one's malformed options annotation
        return reservation

    # --- what the scheduler needs --------------------------------------------------------------

    def reserve_pod(self) -> Pod:
        """The pod this Reservation stands for, as Koordinator's `NewReservePod` builds it.

        Name and UID are the Reservation's, the namespace the template's (or `default`), the
        Reservation's labels and annotations override the template's, the priority defaults to the
        highest (a Reservation is never a preemption victim), and `spec.nodeName` is the placement
        once made.
        """
        if self._reserve is not None:
            return self._reserve
        pod = self._build_reserve_pod()
        object.__setattr__(self, "_reserve", pod)  # a memo on a frozen value: see the field
        return pod

    def _build_reserve_pod(self) -> Pod:
        meta = dict(f.mapping(self.template.get("metadata"), "spec.template.metadata", f"reservation {self.name}"))
        labels = {**f.string_map(meta, "labels", "spec.template.metadata"), **self.meta.labels}
        annotations = {**f.string_map(meta, "annotations", "spec.template.metadata"), **self.meta.annotations}
        spec = dict(self.template["spec"])
        if self.node_name:
            spec["nodeName"] = self.node_name
        spec.setdefault("priority", 2**31 - 1)
        raw = {
            "metadata": {
                "name": self.name,
                "namespace": str(meta.get("namespace") or "default"),
                "uid": self.uid,
                "labels": labels,
                "annotations": annotations,
                "creationTimestamp": self.meta.creation_timestamp,
            },
            "spec": spec,
        }
        try:
            return Pod.from_dict(raw)
        except ValidationError as e:
            raise ValidationError(f"spec.template.{e.field}", e.reason, obj=f"reservation {self.name}") from None

    def reserved(self) -> Mapping[str, int]:
        """What it reserves: its reserve pod's requests (`status.allocatable` once placed)."""
        if self._reserved is None:
            reserved = {k: v for k, v in self.reserve_pod().requests().items() if v}
            object.__setattr__(self, "_reserved", reserved)  # a memo on a frozen value: see the field
            return reserved
        return self._reserved

    def restricted_names(self) -> tuple[str, ...]:
        """The reserved resources an owner may take only from this Reservation (sorted): those of
        a Restricted one (see `reservationoptions.restricted_names`); none otherwise. Raises
        ValidationError for a malformed `reservation-restricted-options` annotation."""
        if self.allocate_policy != "Restricted":
            return ()
        if self._restricted is not None:
            return self._restricted
        try:
            restricted = reservationoptions.restricted_names(self.meta.annotations, sorted(self.reserved()))
        except AnnotationError as e:
            raise ValidationError(f"metadata.annotations[{e.key}]", e.reason, obj=f"reservation {self.name}") from None
        object.__setattr__(self, "_restricted", restricted)  # a memo on a frozen value: see the field
        return restricted

    def counted_names(self) -> tuple[str, ...]:
        """The resources an owner's requests are counted against (Koordinator's `ResourceNames`):
        the restricted ones of a Restricted Reservation, else all it reserves."""
        return self.restricted_names() or tuple(sorted(self.reserved()))

    def allocated_by(self, owners: Iterable[Mapping[str, int]]) -> dict[str, int]:
        """What owners with these requests take from it: their sum over `counted_names()`."""
        counted = self.counted_names()
        out: dict[str, int] = {}
        for requests in owners:
            for name in counted:
                if requests.get(name):
                    out[name] = out.get(name, 0) + requests[name]
        return out

    def remaining(self, allocated: Mapping[str, int]) -> dict[str, int]:
        """What it still holds for its owners: reserved minus `allocated`, never below zero."""
        return {k: v - allocated.get(k, 0) for k, v in self.reserved().items() if v > allocated.get(k, 0)}

    @property
    def order(self) -> int | None:
        """Its `reservation-order` label (lowest first), None when it has none that counts."""
        return reservationoptions.order_of(self.meta.labels)

    def is_pre_allocated(self, pod: Pod) -> bool:
        """Whether `pod` is one of the running pods it was placed over (see `pre_allocated`)."""
        return any(ref.uid == pod.meta.uid and ref.matches_pod(pod) for ref in self.pre_allocated)

    def pre_allocated_uids(self) -> frozenset[str]:
        return frozenset(ref.uid for ref in self.pre_allocated)

    def matches_owner(self, pod: Pod) -> bool:
        """Whether `pod` may use this Reservation's resources (owners, and the pod's own opt-out)."""
        if pod.meta.labels.get(names.LABEL_RESERVATION_IGNORED) == "true":
            return False
        return any(owner.matches(pod) for owner in self.owners)

    def expiry(self) -> datetime.datetime | None:
        """When this Reservation stops holding resources if unused; None: never."""
        if self.ttl_seconds is None:
            return None  # Koordinator: `ttl: 0` disables expiration, `expires` included
        candidates = []
        if self.expires:
            candidates.append(_parse_time(self.expires, "spec.expires", f"reservation {self.name}"))
        if self.meta.creation_timestamp:
            created = _parse_time(
                self.meta.creation_timestamp, "metadata.creationTimestamp", f"reservation {self.name}"
            )
            candidates.append(created + datetime.timedelta(seconds=self.ttl_seconds))
        return min(candidates) if candidates else None

    def expired(self, now: datetime.datetime) -> bool:
        at = self.expiry()
        return at is not None and now >= at

    @property
    def is_expired(self) -> bool:
        """Failed because it expired (Ready False, reason Expired), as opposed to failed otherwise."""
        return self.phase is ReservationPhase.FAILED and any(
            c.type == CONDITION_READY and c.status == "False" and c.reason == REASON_EXPIRED for c in self.conditions
        )

    def to_dict(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "template": dict(self.template),
            "owners": [o.to_dict() for o in self.owners],
            "allocateOnce": self.allocate_once,
        }
        if self.expires:
            spec["expires"] = self.expires
        spec["ttl"] = format_duration(self.ttl_seconds) if self.ttl_seconds is not None else "0s"
        if self.allocate_policy:
            spec["allocatePolicy"] = self.allocate_policy
        if self.unschedulable:
            spec["unschedulable"] = True
        if self.pre_allocation:
            spec["preAllocation"] = True
        if self.pre_allocation_mode != PRE_ALLOCATION_DEFAULT or self.pre_allocate_multiple:
            policy: dict[str, Any] = {"mode": self.pre_allocation_mode}
            if self.pre_allocate_multiple:
                policy["enableMultiple"] = True
            spec["preAllocationPolicy"] = policy
        if self.taints:
            spec["taints"] = [f.drop_empty({"key": t.key, "value": t.value, "effect": t.effect}) for t in self.taints]
        status: dict[str, Any] = {"phase": self.phase.value}
        if self.node_name:
            status["nodeName"] = self.node_name
        if self.conditions:
            status["conditions"] = [c.to_dict() for c in self.conditions]
        if self.current_owners:
            status["currentOwners"] = [o.to_dict() for o in self.current_owners]
        if self.allocatable:
            status["allocatable"] = resources.format_list(self.allocatable)
        if self.allocated:
            status["allocated"] = resources.format_list(self.allocated)
        return {
            "apiVersion": GROUP_VERSION,
            "kind": KIND,
            "metadata": self.meta.to_dict(),
            "spec": spec,
            "status": status,
        }


def pre_allocated_annotation(pods: Iterable[Pod]) -> str:
    """Tessera's `pre-allocated` annotation for a Reservation placed over `pods` (by UID)."""
    refs = sorted((ObjectRef.to_pod(p) for p in pods), key=lambda r: r.uid)
    return json.dumps([r.to_dict() for r in refs], separators=(",", ":"))


def pre_allocated_from(annotations: Mapping[str, str], *, obj: str = "") -> tuple[ObjectRef, ...]:
    """The pods a Reservation was placed over, from its `pre-allocated` annotation. Malformed: a
    ValidationError (the Reservation is Invalid, saying why, rather than counted wrongly)."""
    raw = annotations.get(names.ANNOTATION_PRE_ALLOCATED)
    if not raw:
        return ()
    key = names.ANNOTATION_PRE_ALLOCATED
    try:
        data = load_json(key, raw, obj, expect=list, shape='a list of {"namespace", "name", "uid"}')
    except AnnotationError as e:
        raise ValidationError(f"metadata.annotations[{key}]", e.reason, obj=obj) from None
    refs = tuple(ObjectRef.from_dict(item, f"metadata.annotations[{key}][{i}]", obj) for i, item in enumerate(data))
    if any(not r.uid for r in refs):
        raise ValidationError(f"metadata.annotations[{key}]", "every pod must have a uid", obj=obj)
    return refs


def _parse_time(text: str, path: str, obj: str) -> datetime.datetime:
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValidationError(path, f"{text!r} is not an RFC 3339 time", obj=obj) from None


# --- the pod side: `scheduling.koordinator.sh/reservation-allocated` ----------------------------


@dataclass(frozen=True, slots=True)
class ReservationAllocated:
    """Which Reservation a pod was placed onto (the pod's annotation)."""

    name: str
    uid: str


def reservation_allocated_annotation(reservation: Reservation) -> str:
    return json.dumps({"name": reservation.name, "uid": reservation.uid}, separators=(",", ":"))


def allocated_from_pod(pod: Pod) -> ReservationAllocated | None:
    """The Reservation `pod` consumed, or None. A malformed annotation is an AnnotationError."""
    raw = pod.meta.annotations.get(names.ANNOTATION_RESERVATION_ALLOCATED)
    if not raw:
        return None
    key, obj = names.ANNOTATION_RESERVATION_ALLOCATED, f"pod {pod.meta.key}"
    data = load_json(key, raw, obj, expect=dict, shape='an object {"name": ..., "uid": ...}')
    if not isinstance(data.get("name"), str) or not data["name"]:
        raise AnnotationError(key, "name must be a non-empty string", obj=obj)
    return ReservationAllocated(name=data["name"], uid=str(data.get("uid") or ""))
