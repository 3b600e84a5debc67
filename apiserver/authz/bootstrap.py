"""kube-apiserver's bootstrap RBAC policy: the ClusterRoles and bindings every cluster starts with.

`cluster-admin` (everything) bound to group `system:masters` (the admin token's user);
`system:discovery` and `system:public-info-viewer` (discovery, OpenAPI, version, health) and
`system:basic-user` (SelfSubjectAccessReview: `kubectl auth can-i`) bound to every
authenticated user. Created at start when missing and then left alone, so they can be looked at
(`kubectl get clusterrole cluster-admin -o yaml`) and, as in a cluster, changed at one's peril.
"""

from __future__ import annotations

from typing import Any

from apiserver.catalog import AUTHORIZATION_GROUP, RBAC_GROUP
from apiserver.registry import Registry
from apiserver.selectors import ObjectFilter

__all__ = ["ensure_policy"]

_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
_ANNOTATIONS = {"rbac.authorization.kubernetes.io/autoupdate": "true"}
_DISCOVERY_URLS = ["/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*", "/version", "/version/"]
_HEALTH_URLS = ["/healthz", "/livez", "/readyz", "/version", "/version/"]

_ROLES: dict[str, list[dict[str, Any]]] = {
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
        }
    ],
}
_BINDINGS = {
    "cluster-admin": "system:masters",
    "system:discovery": "system:authenticated",
    "system:public-info-viewer": "system:authenticated",
    "system:basic-user": "system:authenticated",
}


def _meta(name: str) -> dict[str, Any]:
    return {"name": name, "labels": dict(_LABELS), "annotations": dict(_ANNOTATIONS)}


async def ensure_policy(registry: Registry) -> None:
    roles = registry.catalog.lookup(RBAC_GROUP, "v1", "clusterroles")
    bindings = registry.catalog.lookup(RBAC_GROUP, "v1", "clusterrolebindings")
    assert roles is not None and bindings is not None
    present = {e.obj["metadata"]["name"] for e in registry.snapshot(roles, ObjectFilter())}
    for name, rules in _ROLES.items():
        if name not in present:
            await registry.create(roles, "", {"metadata": _meta(name), "rules": rules})
    present = {e.obj["metadata"]["name"] for e in registry.snapshot(bindings, ObjectFilter())}
    for name, group in _BINDINGS.items():
        if name not in present:
            binding = {
                "metadata": _meta(name),
                "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
                "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": group}],
            }
            await registry.create(bindings, "", binding)
