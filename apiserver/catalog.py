"""Which resources the server serves: built-in types plus those registered by CRDs.

The catalog answers "what is `/apis/G/V/R`?" for routing, discovery and OpenAPI, and tells the
registry how to treat a type (scope, subresources, field selectors, strategic-merge support).
Objects are stored per `ResourceType.storage_id` (`pods`, `devices.scheduling.koordinator.sh`),
independent of version: a CRD that serves several versions serves the same objects under each,
as a CRD with conversion strategy `None` does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from apiserver.schema.structural import SchemaError, Structural, compile_schema

__all__ = ["Catalog", "Column", "GroupInfo", "ResourceType", "sort_versions"]

#: Selectable on every type, as in Kubernetes.
META_FIELDS: Mapping[str, str] = {"metadata.name": "metadata.name", "metadata.namespace": "metadata.namespace"}
RBAC_GROUP = "rbac.authorization.k8s.io"
AUTHORIZATION_GROUP = "authorization.k8s.io"
AUTHENTICATION_GROUP = "authentication.k8s.io"
RESOURCE_GROUP = "resource.k8s.io"
ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class Column:
    """A column of `kubectl get` output (CRD additionalPrinterColumns, or built in)."""

    name: str
    type: str
    json_path: str
    priority: int = 0
    description: str = ""
    format: str = ""


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    #: Subresources served (`status`, `binding`, `eviction`).
    subresources: frozenset[str] = frozenset()
    #: Field-selector label -> dotted path into the object.
    fields: Mapping[str, str] = field(default_factory=lambda: dict(META_FIELDS))
    #: Built-in types accept strategic merge patches; custom resources do not (as Kubernetes).
    strategic_merge: bool = True
    verbs: tuple[str, ...] = ALL_VERBS
    columns: tuple[Column, ...] = ()
    #: The CRD that registered this type ("" for built-ins).
    crd_name: str = ""
    #: A custom resource's structural schema (pruning, defaulting, validation, OpenAPI).
    schema: Structural | None = field(default=None, compare=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def storage_id(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


@dataclass(frozen=True, slots=True)
class GroupInfo:
    name: str
    versions: tuple[str, ...]  # highest priority first

    @property
    def preferred(self) -> str:
        return self.versions[0]


_VERSION_RE = re.compile(r"v(\d+)(?:(alpha|beta)(\d+))?")


def _version_key(version: str) -> tuple[int, int, int, str]:
    """Kubernetes' version priority: GA > beta > alpha, higher numbers first, others last."""
    m = _VERSION_RE.fullmatch(version)
    if not m:
        return (3, 0, 0, version)
    stability = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    return (stability, -int(m.group(1)), -int(m.group(3) or 0), version)


def sort_versions(versions: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(versions), key=_version_key))


def _fields(*extra: str, **renamed: str) -> dict[str, str]:
    out = dict(META_FIELDS)
    out.update({f: f for f in extra})
    out.update(renamed)
    return out


_AGE = Column("Age", "date", ".metadata.creationTimestamp")

_INVOLVED = tuple(
    f"involvedObject.{f}" for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
)
_REGARDING = tuple(
    f"regarding.{f}" for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
)

BUILTINS: tuple[ResourceType, ...] = (
    ResourceType(
        "",
        "v1",
        "namespaces",
        "namespace",
        "Namespace",
        False,
        ("ns",),
        subresources=frozenset({"status"}),
        fields=_fields("status.phase"),
        verbs=tuple(v for v in ALL_VERBS if v != "deletecollection"),
        columns=(Column("Status", "string", ".status.phase"), _AGE),
    ),
    ResourceType(
        "",
        "v1",
        "nodes",
        "node",
        "Node",
        False,
        ("no",),
        subresources=frozenset({"status"}),
        fields=_fields("spec.unschedulable"),
    ),
    ResourceType(
        "",
        "v1",
        "pods",
        "pod",
        "Pod",
        True,
        ("po",),
        ("all",),
        subresources=frozenset({"status", "binding", "eviction", "log", "exec", "attach", "portforward"}),
        fields=_fields(
            "spec.nodeName",
            "spec.schedulerName",
            "spec.restartPolicy",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ),
    ),
    ResourceType("", "v1", "bindings", "binding", "Binding", True, verbs=("create",), fields=dict(META_FIELDS)),
    ResourceType(
        "",
        "v1",
        "events",
        "event",
        "Event",
        True,
        ("ev",),
        fields=_fields(*_INVOLVED, "reason", "reportingComponent", "type", source="source.component"),
    ),
    ResourceType("", "v1", "configmaps", "configmap", "ConfigMap", True, ("cm",), columns=(_AGE,)),
    ResourceType("", "v1", "secrets", "secret", "Secret", True, fields=_fields("type"), columns=(_AGE,)),
    ResourceType(
        "", "v1", "services", "service", "Service", True, ("svc",), ("all",), subresources=frozenset({"status"})
    ),
    ResourceType("", "v1", "endpoints", "endpoints", "Endpoints", True, ("ep",), columns=(_AGE,)),
    ResourceType(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "validatingwebhookconfiguration",
        "ValidatingWebhookConfiguration",
        False,
        categories=("api-extensions",),
        columns=(_AGE,),
    ),
    ResourceType(
        "coordination.k8s.io",
        "v1",
        "leases",
        "lease",
        "Lease",
        True,
        columns=(Column("Holder", "string", ".spec.holderIdentity"), _AGE),
    ),
    ResourceType(
        "events.k8s.io",
        "v1",
        "events",
        "event",
        "Event",
        True,
        ("ev",),
        fields=_fields(*_REGARDING, "reason", "reportingController", "type"),
    ),
    ResourceType("", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", True, ("sa",), columns=(_AGE,)),
    *(
        ResourceType(RBAC_GROUP, "v1", plural, plural[:-1], kind, namespaced, columns=(_AGE,))
        for plural, kind, namespaced in (
            ("roles", "Role", True),
            ("rolebindings", "RoleBinding", True),
            ("clusterroles", "ClusterRole", False),
            ("clusterrolebindings", "ClusterRoleBinding", False),
        )
    ),
    # Access reviews are answered, never stored (apiserver/authz/reviews.py).
    *(
        ResourceType(AUTHORIZATION_GROUP, "v1", plural, plural[:-1], kind, namespaced, verbs=("create",))
        for plural, kind, namespaced in (
            ("selfsubjectaccessreviews", "SelfSubjectAccessReview", False),
            ("subjectaccessreviews", "SubjectAccessReview", False),
            ("localsubjectaccessreviews", "LocalSubjectAccessReview", True),
            ("selfsubjectrulesreviews", "SelfSubjectRulesReview", False),
        )
    ),
    *(
        ResourceType(AUTHENTICATION_GROUP, "v1", plural, plural[:-1], kind, False, verbs=("create",))
        for plural, kind in (("tokenreviews", "TokenReview"), ("selfsubjectreviews", "SelfSubjectReview"))
    ),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "customresourcedefinition",
        "CustomResourceDefinition",
        False,
        ("crd", "crds"),
        ("api-extensions",),
        subresources=frozenset({"status"}),
        columns=(Column("Created At", "date", ".metadata.creationTimestamp"),),
    ),
    # Workloads (apps/v1, batch/v1) and disruption budgets (policy/v1): served with kube-apiserver's
    # defaults and validation (`workloads.py`); run by `tessera kube-controller-manager`.
    ResourceType(
        "apps",
        "v1",
        "deployments",
        "deployment",
        "Deployment",
        True,
        ("deploy",),
        ("all",),
        subresources=frozenset({"status", "scale"}),
    ),
    ResourceType(
        "apps",
        "v1",
        "replicasets",
        "replicaset",
        "ReplicaSet",
        True,
        ("rs",),
        ("all",),
        subresources=frozenset({"status", "scale"}),
    ),
    ResourceType(
        "apps",
        "v1",
        "statefulsets",
        "statefulset",
        "StatefulSet",
        True,
        ("sts",),
        ("all",),
        subresources=frozenset({"status", "scale"}),
    ),
    ResourceType(
        "apps",
        "v1",
        "daemonsets",
        "daemonset",
        "DaemonSet",
        True,
        ("ds",),
        ("all",),
        subresources=frozenset({"status"}),
    ),
    ResourceType(
        "batch",
        "v1",
        "jobs",
        "job",
        "Job",
        True,
        categories=("all",),
        subresources=frozenset({"status"}),
        fields=_fields("status.successful"),
    ),
    ResourceType(
        "batch",
        "v1",
        "cronjobs",
        "cronjob",
        "CronJob",
        True,
        ("cj",),
        ("all",),
        subresources=frozenset({"status"}),
    ),
    ResourceType(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        "PodDisruptionBudget",
        True,
        ("pdb",),
        subresources=frozenset({"status"}),
    ),
    # Dynamic Resource Allocation (resource.k8s.io/v1, `apis.dra`): served with kube-apiserver's
    # defaults and validation (`dra/`); claims generated from templates by `tessera
    # kube-controller-manager`, allocated by the scheduler, published (ResourceSlices) by drivers.
    ResourceType(RESOURCE_GROUP, "v1", "deviceclasses", "deviceclass", "DeviceClass", False, columns=(_AGE,)),
    ResourceType(
        RESOURCE_GROUP,
        "v1",
        "resourceclaims",
        "resourceclaim",
        "ResourceClaim",
        True,
        subresources=frozenset({"status"}),
    ),
    ResourceType(
        RESOURCE_GROUP,
        "v1",
        "resourceclaimtemplates",
        "resourceclaimtemplate",
        "ResourceClaimTemplate",
        True,
        columns=(_AGE,),
    ),
    ResourceType(
        RESOURCE_GROUP,
        "v1",
        "resourceslices",
        "resourceslice",
        "ResourceSlice",
        False,
        fields=_fields("spec.nodeName", "spec.driver"),
    ),
    # Stored and served so manifests that ship one (deploy/scheduler-networkpolicy.yaml) apply;
    # nothing here enforces it, as on a cluster whose network plugin ignores NetworkPolicy.
    ResourceType(
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "networkpolicy",
        "NetworkPolicy",
        True,
        ("netpol",),
        columns=(_AGE,),
    ),
)


class Catalog:
    """The served types. Mutated only on the event loop (CRD create/update/delete)."""

    def __init__(self, builtins: Iterable[ResourceType] = BUILTINS) -> None:
        self._builtin = {(r.group, r.version, r.plural): r for r in builtins}
        self._custom: dict[str, tuple[ResourceType, ...]] = {}  # CRD name -> its served versions
        self._index: dict[tuple[str, str, str], ResourceType] = {}
        #: Bumped on every change, so discovery and OpenAPI documents can be cached per generation.
        self.generation = 0
        self._rebuild()

    def _rebuild(self) -> None:
        index = dict(self._builtin)
        for types in self._custom.values():
            for rt in types:
                index[(rt.group, rt.version, rt.plural)] = rt
        self._index = index
        self.generation += 1

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._index.get((group, version, plural))

    def all(self) -> list[ResourceType]:
        return list(self._index.values())

    def groups(self) -> list[GroupInfo]:
        """API groups (without the legacy core group), in discovery order: built-ins first."""
        versions: dict[str, list[str]] = {}
        for group, version, _ in self._index:
            if group:
                versions.setdefault(group, []).append(version)
        return [GroupInfo(g, sort_versions(v)) for g, v in versions.items()]

    def resources(self, group: str, version: str) -> list[ResourceType]:
        return [rt for (g, v, _), rt in self._index.items() if g == group and v == version]

    def storage_ids(self) -> set[str]:
        return {rt.storage_id for rt in self._index.values()}

    def is_builtin(self, group: str, plural: str) -> bool:
        return any(g == group and p == plural for g, _, p in self._builtin)

    def register_crd(self, name: str, types: tuple[ResourceType, ...]) -> None:
        """(Re)register the versions a CRD serves; replaces what the same CRD registered before."""
        self._custom[name] = types
        self._rebuild()

    def unregister_crd(self, name: str) -> tuple[ResourceType, ...]:
        types = self._custom.pop(name, ())
        self._rebuild()
        return types

    def crd_types(self, name: str) -> tuple[ResourceType, ...]:
        return self._custom.get(name, ())


def types_from_crd(crd: Mapping[str, Any]) -> tuple[ResourceType, ...]:
    """The ResourceTypes a (validated) CustomResourceDefinition serves, one per served version."""
    spec = crd["spec"]
    names = spec["names"]
    name = crd["metadata"]["name"]
    out = []
    for v in spec["versions"]:
        if not isinstance(v, dict) or not v.get("served", True):
            continue
        columns = tuple(
            Column(
                c["name"],
                str(c.get("type", "string")),
                c["jsonPath"],
                c.get("priority", 0) if isinstance(c.get("priority"), int) else 0,
                str(c.get("description", "")),
                str(c.get("format", "")),
            )
            for c in v.get("additionalPrinterColumns") or ()
            if isinstance(c, dict) and isinstance(c.get("name"), str) and isinstance(c.get("jsonPath"), str)
        ) or (_AGE,)
        out.append(
            ResourceType(
                group=spec["group"],
                version=v["name"],
                plural=names["plural"],
                singular=names.get("singular") or names["kind"].lower(),
                kind=names["kind"],
                namespaced=spec["scope"] == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=frozenset({"status"}) if "status" in (v.get("subresources") or {}) else frozenset(),
                strategic_merge=False,
                columns=columns,
                crd_name=name,
                schema=version_schema(v),
            )
        )
    return tuple(out)


def version_schema(version: Mapping[str, Any]) -> Structural | None:
    """The compiled schema of one CRD version; None when it has none (CRDs are checked on
    write, so only a CRD stored before schemas were enforced can fail here)."""
    raw = (version.get("schema") or {}).get("openAPIV3Schema")
    if raw is None:
        return None
    try:
        return compile_schema(raw)
    except SchemaError:
        return None
