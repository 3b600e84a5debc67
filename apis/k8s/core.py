"""Read-only views of core/v1 Pods and Nodes: the fields Tessera's logic needs, parsed once.

The scheduler core, the agent's hooks and QoS, and the controller all reason about the same few
fields (requests, placement constraints, labels, annotations). Parsing them here keeps raw JSON
at the edge and gives every component the same rules: API-server defaulting of requests from
limits, Kubernetes' effective pod request (init and sidecar containers, overhead), taint
toleration and node-affinity matching. Resource lists come out with Koordinator's deprecated
device names (`kubernetes.io/gpu-core`, ...) read as the current ones (`apis.extension.deprecated`),
as Koordinator's scheduler reads them; `Node.from_dict_as_written` keeps them for the one reader
that owns those names on a Node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from apis import _fields as f
from apis.errors import ValidationError
from apis.extension import deprecated
from apis.k8s import labels as labelsel
from apis.k8s import resources
from apis.k8s.meta import Condition, ObjectMeta

__all__ = [
    "Container",
    "ContainerExtendedResourceRequest",
    "Node",
    "NodeAffinity",
    "NodeSelectorTerm",
    "Pod",
    "PodResourceClaim",
    "Taint",
    "Toleration",
    "pod_key",
]

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
#: The condition the scheduler sets on a pod it could not place (status False, reason Unschedulable).
CONDITION_POD_SCHEDULED = "PodScheduled"
_NODE_NAME_FIELD = "metadata.name"


def pod_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


@dataclass(frozen=True, slots=True)
class Container:
    name: str
    requests: resources.ResourceList = field(default_factory=dict)
    limits: resources.ResourceList = field(default_factory=dict)
    #: "Always" marks a sidecar (restartable init container).
    restart_policy: str = ""
    #: resources.claims[].name: the pod's ResourceClaims (spec.resourceClaims names) it uses.
    claims: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> Container:
        d = f.mapping(raw, path, obj)
        res = f.mapping(d.get("resources"), f"{path}.resources", obj)
        limits = resources.parse_list(res.get("limits"), field=f"{path}.resources.limits", obj=obj)
        requests = resources.parse_list(res.get("requests"), field=f"{path}.resources.requests", obj=obj)
        # kube-apiserver defaults a missing request to its limit; do the same so snapshots agree.
        # Deprecated names are read after defaulting, as Koordinator reads the stored object.
        return cls(
            name=f.string(d, "name", path, obj),
            requests=deprecated.to_current({**limits, **requests}),
            limits=deprecated.to_current(limits),
            restart_policy=f.string(d, "restartPolicy", path, obj),
            claims=tuple(
                f.string(f.mapping(c, f"{path}.resources.claims[{i}]", obj), "name", path, obj)
                for i, c in enumerate(f.items(res, "claims", f"{path}.resources", obj))
            ),
        )


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = ""  # NoSchedule | PreferNoSchedule | NoExecute

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> Taint:
        d = f.mapping(raw, path, obj)
        return cls(f.string(d, "key", path, obj), f.string(d, "value", path, obj), f.string(d, "effect", path, obj))

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # empty tolerates every effect

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' ToleratesTaint: empty key with Exists tolerates everything."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.operator in ("Equal", "") and self.value == taint.value and bool(self.key)

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> Toleration:
        d = f.mapping(raw, path, obj)
        operator = f.string(d, "operator", path, obj, "Equal")
        if operator not in ("Equal", "Exists"):
            raise ValidationError(f"{path}.operator", f"must be Equal or Exists, got {operator!r}", obj=obj)
        return cls(
            key=f.string(d, "key", path, obj),
            operator=operator,
            value=f.string(d, "value", path, obj),
            effect=f.string(d, "effect", path, obj),
        )


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Requirements ANDed together; `match_fields` support `metadata.name` only, as Kubernetes."""

    match_expressions: tuple[labelsel.Requirement, ...] = ()
    match_fields: tuple[labelsel.Requirement, ...] = ()

    def matches(self, node_labels: Mapping[str, str], node_name: str) -> bool:
        if not self.match_expressions and not self.match_fields:
            return False  # an empty term matches no objects
        fields = {_NODE_NAME_FIELD: node_name}
        return all(r.matches(node_labels) for r in self.match_expressions) and all(
            r.matches(fields) for r in self.match_fields
        )

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> NodeSelectorTerm:
        d = f.mapping(raw, path, obj)
        exprs = tuple(
            labelsel.Requirement.from_dict(e, f"{path}.matchExpressions[{i}]", obj, allow_gt_lt=True)
            for i, e in enumerate(f.items(d, "matchExpressions", path, obj))
        )
        fields = tuple(
            labelsel.Requirement.from_dict(e, f"{path}.matchFields[{i}]", obj)
            for i, e in enumerate(f.items(d, "matchFields", path, obj))
        )
        for i, req in enumerate(fields):
            if req.key != _NODE_NAME_FIELD:
                raise ValidationError(f"{path}.matchFields[{i}].key", f"only {_NODE_NAME_FIELD} is supported", obj=obj)
        return cls(exprs, fields)


@dataclass(frozen=True, slots=True)
class NodeAffinity:
    #: Terms ORed together; None means no requirement (every node passes).
    required: tuple[NodeSelectorTerm, ...] | None = None
    #: (weight 1..100, term) pairs for scoring.
    preferred: tuple[tuple[int, NodeSelectorTerm], ...] = ()

    def required_matches(self, node_labels: Mapping[str, str], node_name: str) -> bool:
        if self.required is None:
            return True
        return any(term.matches(node_labels, node_name) for term in self.required)

    @classmethod
    def excluding(cls, affinity: NodeAffinity | None, node_name: str) -> NodeAffinity:
        """`affinity` (None: none) narrowed so that it never matches the node `node_name`: a
        `matchFields metadata.name NotIn` requirement ANDed into every required term.

        For a pod's replacement during a migration, which must land somewhere else than the
        node being freed; preferred terms are kept as they are."""
        avoid = labelsel.Requirement(_NODE_NAME_FIELD, labelsel.Operator.NOT_IN, (node_name,))
        if affinity is None or affinity.required is None:
            return cls((NodeSelectorTerm(match_fields=(avoid,)),), affinity.preferred if affinity else ())
        terms = tuple(
            dataclasses.replace(t, match_fields=(*t.match_fields, avoid))
            if t.match_expressions or t.match_fields
            else t
            for t in affinity.required  # an empty term matches nothing, and must stay so
        )
        return cls(terms, affinity.preferred)

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> NodeAffinity:
        d = f.mapping(raw, path, obj)
        required = None
        req_raw = d.get("requiredDuringSchedulingIgnoredDuringExecution")
        if req_raw is not None:
            rpath = f"{path}.requiredDuringSchedulingIgnoredDuringExecution"
            rd = f.mapping(req_raw, rpath, obj)
            required = tuple(
                NodeSelectorTerm.from_dict(t, f"{rpath}.nodeSelectorTerms[{i}]", obj)
                for i, t in enumerate(f.items(rd, "nodeSelectorTerms", rpath, obj))
            )
        preferred = []
        ppath = f"{path}.preferredDuringSchedulingIgnoredDuringExecution"
        for i, p in enumerate(f.items(d, "preferredDuringSchedulingIgnoredDuringExecution", path, obj)):
            pd = f.mapping(p, f"{ppath}[{i}]", obj)
            weight = f.integer(pd, "weight", f"{ppath}[{i}]", obj, 0) or 0
            if not 1 <= weight <= 100:
                raise ValidationError(f"{ppath}[{i}].weight", f"must be in 1..100, got {weight}", obj=obj)
            preferred.append(
                (weight, NodeSelectorTerm.from_dict(pd.get("preference"), f"{ppath}[{i}].preference", obj))
            )
        return cls(required, tuple(preferred))


@dataclass(frozen=True, slots=True)
class PodResourceClaim:
    """A `spec.resourceClaims[]` entry: the pod's name for a ResourceClaim it uses, which is either
    an existing claim (`resource_claim_name`) or one generated from a template
    (`resource_claim_template_name`; the resourceclaim controller records the generated claim's
    name in the pod's `status.resourceClaimStatuses`)."""

    name: str
    resource_claim_name: str = ""
    resource_claim_template_name: str = ""

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> PodResourceClaim:
        d = f.mapping(raw, path, obj)
        return cls(
            name=f.string(d, "name", path, obj),
            resource_claim_name=f.string(d, "resourceClaimName", path, obj),
            resource_claim_template_name=f.string(d, "resourceClaimTemplateName", path, obj),
        )


@dataclass(frozen=True, slots=True)
class ContainerExtendedResourceRequest:
    """One entry of a pod's `status.extendedResourceClaimStatus.requestMappings`: the request of
    the scheduler's claim that serves a container's extended resource."""

    container_name: str
    resource_name: str
    request_name: str

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> ContainerExtendedResourceRequest:
        d = f.mapping(raw, path, obj)
        return cls(
            container_name=f.string(d, "containerName", path, obj),
            resource_name=f.string(d, "resourceName", path, obj),
            request_name=f.string(d, "requestName", path, obj),
        )

    def to_dict(self) -> dict[str, str]:
        return {
            "containerName": self.container_name,
            "resourceName": self.resource_name,
            "requestName": self.request_name,
        }


@dataclass(frozen=True, slots=True)
class Pod:
    meta: ObjectMeta
    scheduler_name: str = "default-scheduler"
    node_name: str = ""
    priority: int = 0
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    overhead: resources.ResourceList = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    node_affinity: NodeAffinity | None = None
    tolerations: tuple[Toleration, ...] = ()
    host_network: bool = False
    #: spec.restartPolicy (Always, OnFailure, Never), as the API server defaults it.
    restart_policy: str = "Always"
    phase: str = "Pending"
    conditions: tuple[Condition, ...] = ()
    pod_ip: str = ""
    #: status.qosClass as kubelet/apiserver wrote it ("" when absent; see apis.extension.qos).
    status_qos_class: str = ""
    #: container name -> runtime id (`containerd://…`), from status.containerStatuses.
    container_ids: Mapping[str, str] = field(default_factory=dict)
    #: status.nominatedNodeName: where preemption made room for this pending pod.
    nominated_node_name: str = ""
    #: spec.preemptionPolicy: "Never" keeps the pod from preempting others ("" is the default,
    #: PreemptLowerPriority).
    preemption_policy: str = ""
    #: spec.resourceClaims: the Dynamic Resource Allocation claims the pod uses.
    resource_claims: tuple[PodResourceClaim, ...] = ()
    #: status.resourceClaimStatuses: pod claim name -> the claim generated for its template
    #: (None: the controller decided none is needed).
    resource_claim_statuses: Mapping[str, str | None] = field(default_factory=dict)
    #: status.extendedResourceClaimStatus: the claim the scheduler made for the pod's extended
    #: resources served through DRA ("" when none), and which (container, resource) each of its
    #: requests serves.
    extended_resource_claim: str = ""
    extended_resource_requests: tuple[ContainerExtendedResourceRequest, ...] = ()

    @property
    def key(self) -> str:
        return self.meta.key

    def claim_name(self, claim: PodResourceClaim) -> str | None:
        """The ResourceClaim's name for one of the pod's claims (kube's resourceclaim.Name): the
        claim it names, or the one generated for its template; "" when a template's claim is not
        made yet (the pod must wait), None when the controller decided none is needed."""
        if claim.resource_claim_name:
            return claim.resource_claim_name
        if claim.name not in self.resource_claim_statuses:
            return ""
        return self.resource_claim_statuses[claim.name]

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def namespace(self) -> str:
        return self.meta.namespace

    @property
    def uid(self) -> str:
        return self.meta.uid

    @property
    def labels(self) -> Mapping[str, str]:
        return self.meta.labels

    @property
    def annotations(self) -> Mapping[str, str]:
        return self.meta.annotations

    @property
    def is_terminal(self) -> bool:
        """Succeeded or Failed: the pod holds no resources any more."""
        return self.phase in TERMINAL_PHASES

    @property
    def is_deleting(self) -> bool:
        return bool(self.meta.deletion_timestamp)

    @property
    def pending_message(self) -> str:
        """Why the scheduler has not placed it: the message of its `PodScheduled=False` condition
        (`0/3 nodes are available: …`); '' when it has none."""
        for condition in self.conditions:
            if condition.type == CONDITION_POD_SCHEDULED and condition.status == "False":
                return condition.message
        return ""

    def requests(self) -> dict[str, int]:
        """The pod's effective request, as kube-scheduler computes it.

        Sum of app containers plus sidecars, or the peak during init (each regular init container
        plus the sidecars started before it), whichever is larger per resource; plus overhead.
        """
        total = resources.sum_of(c.requests for c in self.containers)
        sidecars: dict[str, int] = {}
        init_peak: dict[str, int] = {}
        for c in self.init_containers:
            if c.restart_policy == "Always":
                sidecars = resources.add(sidecars, c.requests)
                init_peak = resources.max_of(init_peak, sidecars)
            else:
                init_peak = resources.max_of(init_peak, resources.add(c.requests, sidecars))
        total = resources.max_of(resources.add(total, sidecars), init_peak)
        return resources.add(total, self.overhead)

    @classmethod
    def from_dict(cls, raw: object) -> Pod:
        d = f.mapping(raw, "pod")
        meta = ObjectMeta.from_dict(d.get("metadata"))
        if not meta.namespace:
            meta = _with_namespace(meta, "default")
        obj = f"pod {meta.key}"
        spec = f.mapping(d.get("spec"), "spec", obj)
        status = f.mapping(d.get("status"), "status", obj)
        affinity = f.mapping(spec.get("affinity"), "spec.affinity", obj)
        node_affinity = (
            NodeAffinity.from_dict(affinity["nodeAffinity"], "spec.affinity.nodeAffinity", obj)
            if affinity.get("nodeAffinity") is not None
            else None
        )
        container_ids = {}
        for i, cs in enumerate(f.items(status, "containerStatuses", "status", obj)):
            csd = f.mapping(cs, f"status.containerStatuses[{i}]", obj)
            cid = f.string(csd, "containerID", f"status.containerStatuses[{i}]", obj)
            if cid:
                container_ids[f.string(csd, "name", f"status.containerStatuses[{i}]", obj)] = cid
        return cls(
            meta=meta,
            scheduler_name=f.string(spec, "schedulerName", "spec", obj, "default-scheduler"),
            nominated_node_name=f.string(status, "nominatedNodeName", "status", obj),
            preemption_policy=f.string(spec, "preemptionPolicy", "spec", obj),
            node_name=f.string(spec, "nodeName", "spec", obj),
            priority=f.integer(spec, "priority", "spec", obj, 0) or 0,
            containers=tuple(
                Container.from_dict(c, f"spec.containers[{i}]", obj)
                for i, c in enumerate(f.items(spec, "containers", "spec", obj))
            ),
            init_containers=tuple(
                Container.from_dict(c, f"spec.initContainers[{i}]", obj)
                for i, c in enumerate(f.items(spec, "initContainers", "spec", obj))
            ),
            overhead=deprecated.to_current(resources.parse_list(spec.get("overhead"), field="spec.overhead", obj=obj)),
            node_selector=f.string_map(spec, "nodeSelector", "spec", obj),
            node_affinity=node_affinity,
            tolerations=tuple(
                Toleration.from_dict(t, f"spec.tolerations[{i}]", obj)
                for i, t in enumerate(f.items(spec, "tolerations", "spec", obj))
            ),
            host_network=f.boolean(spec, "hostNetwork", "spec", obj),
            restart_policy=str(spec.get("restartPolicy") or "Always"),
            phase=f.string(status, "phase", "status", obj, "Pending"),
            conditions=_pod_conditions(status, obj),
            pod_ip=f.string(status, "podIP", "status", obj),
            status_qos_class=f.string(status, "qosClass", "status", obj),
            container_ids=container_ids,
            resource_claims=tuple(
                PodResourceClaim.from_dict(c, f"spec.resourceClaims[{i}]", obj)
                for i, c in enumerate(f.items(spec, "resourceClaims", "spec", obj))
            ),
            resource_claim_statuses=_claim_statuses(status, obj),
            **_extended_claim(status, obj),
        )


def _extended_claim(status: f.JSON, obj: str) -> dict[str, Any]:
    path = "status.extendedResourceClaimStatus"
    d = f.mapping(status.get("extendedResourceClaimStatus"), path, obj)
    if not d:
        return {}
    mappings = tuple(
        ContainerExtendedResourceRequest.from_dict(m, f"{path}.requestMappings[{i}]", obj)
        for i, m in enumerate(f.items(d, "requestMappings", path, obj))
    )
    return {
        "extended_resource_claim": f.string(d, "resourceClaimName", path, obj),
        "extended_resource_requests": mappings,
    }


def _claim_statuses(status: f.JSON, obj: str) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for i, entry in enumerate(f.items(status, "resourceClaimStatuses", "status", obj)):
        path = f"status.resourceClaimStatuses[{i}]"
        d = f.mapping(entry, path, obj)
        out[f.string(d, "name", path, obj)] = f.string(d, "resourceClaimName", path, obj) or None
    return out


def _pod_conditions(status: f.JSON, obj: str) -> tuple[Condition, ...]:
    out = []
    for i, c in enumerate(f.items(status, "conditions", "status", obj)):
        path = f"status.conditions[{i}]"
        cd = f.mapping(c, path, obj)
        out.append(
            Condition(
                type=f.string(cd, "type", path, obj),
                status=f.string(cd, "status", path, obj),
                reason=f.string(cd, "reason", path, obj),
                message=f.string(cd, "message", path, obj),
                last_transition_time=f.string(cd, "lastTransitionTime", path, obj),
            )
        )
    return tuple(out)


def _with_namespace(meta: ObjectMeta, namespace: str) -> ObjectMeta:
    return dataclasses.replace(meta, namespace=namespace)


@dataclass(frozen=True, slots=True)
class Node:
    meta: ObjectMeta
    allocatable: resources.ResourceList = field(default_factory=dict)
    capacity: resources.ResourceList = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    #: False only when a Ready condition exists and is not True (bare snapshot nodes count as ready).
    ready: bool = True

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def labels(self) -> Mapping[str, str]:
        return self.meta.labels

    @classmethod
    def from_dict(cls, raw: object) -> Node:
        """Parse, with deprecated device names in allocatable and capacity read as the current ones."""
        return cls._parse(raw, current_names=True)

    @classmethod
    def from_dict_as_written(cls, raw: object) -> Node:
        """Parse, keeping allocatable and capacity as the object spells them: for the controller,
        which publishes the device resources under the current names and must see which of them
        the Node really carries (not a deprecated spelling read as one)."""
        return cls._parse(raw, current_names=False)

    @classmethod
    def _parse(cls, raw: object, *, current_names: bool) -> Node:
        d = f.mapping(raw, "node")
        meta = ObjectMeta.from_dict(d.get("metadata"))
        obj = f"node {meta.name}"
        spec = f.mapping(d.get("spec"), "spec", obj)
        status = f.mapping(d.get("status"), "status", obj)
        ready = True
        for i, c in enumerate(f.items(status, "conditions", "status", obj)):
            cd = f.mapping(c, f"status.conditions[{i}]", obj)
            if cd.get("type") == "Ready":
                ready = cd.get("status") == "True"
        capacity: resources.ResourceList = resources.parse_list(
            status.get("capacity"), field="status.capacity", obj=obj
        )
        allocatable: resources.ResourceList = resources.parse_list(
            status.get("allocatable"), field="status.allocatable", obj=obj
        )
        if current_names:
            capacity, allocatable = deprecated.to_current(capacity), deprecated.to_current(allocatable)
        return cls(
            meta=meta,
            allocatable=allocatable if "allocatable" in status else capacity,
            capacity=capacity,
            taints=tuple(
                Taint.from_dict(t, f"spec.taints[{i}]", obj) for i, t in enumerate(f.items(spec, "taints", "spec", obj))
            ),
            unschedulable=f.boolean(spec, "unschedulable", "spec", obj),
            ready=ready,
        )
