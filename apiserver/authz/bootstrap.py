"""kube-apiserver's bootstrap RBAC policy: the ClusterRoles and bindings every cluster starts with.

`cluster-admin` (everything) bound to group `system:masters` (the admin token's user);
`system:discovery` and `system:public-info-viewer` (discovery, OpenAPI, version, health) and
`system:basic-user` (SelfSubjectAccessReview: `kubectl auth can-i`; SelfSubjectReview:
`kubectl auth whoami`) bound to every authenticated user; `system:monitoring` (health and
`/metrics`) bound to group `system:monitoring`; and, unbound, `system:auth-delegator` (create
TokenReviews and SubjectAccessReviews: what a component that authenticates its own endpoints
through the API server needs, as deploy/ binds it to Tessera's components).

Created at start when missing. Like kube-apiserver's reconciliation, a role or binding annotated
`rbac.authorization.kubernetes.io/autoupdate: "true"` gets back the rules (subjects) of this
policy it lost, nothing else changes, so a data directory of an older version gains the new rules;
set the annotation to "false" to keep one as changed. They can be looked at (`kubectl get
clusterrole cluster-admin -o yaml`) and, as in a cluster, changed at one's peril.
"""

from __future__ import annotations

import copy
from typing import Any

from apiserver.catalog import AUTHENTICATION_GROUP, AUTHORIZATION_GROUP, RBAC_GROUP, ResourceType
from apiserver.registry import Registry
from apiserver.selectors import ObjectFilter

__all__ = ["CLUSTER_ROLES", "ensure_policy"]

_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
_ANNOTATIONS = {"rbac.authorization.kubernetes.io/autoupdate": "true"}
_DISCOVERY_URLS = ["/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*", "/version", "/version/"]
_HEALTH_URLS = ["/healthz", "/livez", "/readyz", "/version", "/version/"]
_MONITORING_URLS = [
    "/healthz",
    "/healthz/*",
    "/livez",
    "/livez/*",
    "/readyz",
    "/readyz/*",
    "/metrics",
    "/metrics/slis",
]

#: The bootstrap ClusterRoles by name (deploy/ binds `system:auth-delegator`).
CLUSTER_ROLES: dict[str, list[dict[str, Any]]] = {
    "cluster-admin": [
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
        {"nonResourceURLs": ["*"], "verbs": ["*"]},
    ],
    "system:discovery": [{"nonResourceURLs": _DISCOVERY_URLS, "verbs": ["get"]}],
    "system:public-info-viewer": [{"nonResourceURLs": _HEALTH_URLS, "verbs": ["get"]}],
    "system:basic-user": [
        {
            "apiGroups": [AUTHORIZATION_GROUP],
            "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
            "verbs": ["create"],
        },
        {"apiGroups": [AUTHENTICATION_GROUP], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
    ],
    "system:auth-delegator": [
        {"apiGroups": [AUTHENTICATION_GROUP], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": [AUTHORIZATION_GROUP], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
    ],
    "system:monitoring": [{"nonResourceURLs": _MONITORING_URLS, "verbs": ["get"]}],
}
_BINDINGS = {
    "cluster-admin": "system:masters",
    "system:discovery": "system:authenticated",
    "system:public-info-viewer": "system:authenticated",
    "system:basic-user": "system:authenticated",
    "system:monitoring": "system:monitoring",
}


def _meta(name: str) -> dict[str, Any]:
    return {"name": name, "labels": dict(_LABELS), "annotations": dict(_ANNOTATIONS)}


def _subjects(group: str) -> list[dict[str, Any]]:
    return [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": group}]


def _autoupdate(obj: dict[str, Any]) -> bool:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get("rbac.authorization.kubernetes.io/autoupdate", "")).lower() == "true"


async def _ensure(registry: Registry, rt: ResourceType, desired: dict[str, dict[str, Any]], field: str) -> None:
    """Create what is missing; give an autoupdated object back the `field` entries it lacks."""
    present = {e.obj["metadata"]["name"]: e.obj for e in registry.snapshot(rt, ObjectFilter())}
    for name, body in desired.items():
        stored = present.get(name)
        if stored is None:
            await registry.create(rt, "", {"metadata": _meta(name), **body})
            continue
        have = list(stored.get(field) or [])
        missing = [entry for entry in body[field] if entry not in have]
        if missing and _autoupdate(stored):
            updated = copy.deepcopy(stored)
            updated[field] = have + missing
            await registry.update(rt, "", name, updated)


async def ensure_policy(registry: Registry) -> None:
    roles = registry.catalog.lookup(RBAC_GROUP, "v1", "clusterroles")
    bindings = registry.catalog.lookup(RBAC_GROUP, "v1", "clusterrolebindings")
    assert roles is not None and bindings is not None
    await _ensure(registry, roles, {name: {"rules": rules} for name, rules in CLUSTER_ROLES.items()}, "rules")
    desired = {
        name: {"roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name}, "subjects": _subjects(group)}
        for name, group in _BINDINGS.items()
    }
    await _ensure(registry, bindings, desired, "subjects")
