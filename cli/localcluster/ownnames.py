"""`tessera up`'s own names for what it applies from deploy/, so the Helm chart installs beside it.

`tessera up` runs its components with deploy/'s RBAC (identities.py) and registers the
controller's webhook from deploy/controller-webhook.yaml (webhook.py). The Helm chart renders the
same objects under the same names, and `helm install` refuses to take over objects it did not
make. Marking ours as Helm's would be worse: `helm uninstall` would then delete what tessera up's
components run on. So tessera up applies them under names of its own — `tessera-up:NAME` for RBAC
(the colon form of kube's own `system:` roles; LOCAL_ROLES are named so too), `tessera-up-NAME`
for the webhook's Service, Endpoints and configuration, whose names must be DNS names — labelled
`app.kubernetes.io/managed-by: tessera-up`. Rules, subjects and webhook rules stay deploy's, so
the components keep exactly deploy's rights whatever a release of the chart adds or removes.

It creates no ServiceAccounts: its components authenticate with static tokens
(identities.ensure_tokens), which need no ServiceAccount object, so a release installed into
`tessera-system` creates (and on uninstall deletes) its own.

Runs before this one applied deploy's names themselves; `retire_deploy_names` removes what they
left in a kept data directory (else `helm install` would still refuse, and the old webhook
configuration would point at a port nothing serves), and only that: an object a person or a
tool applied carries Helm's or kubectl's mark, or another manager's label, and is left alone.
`prune` removes RBAC objects with tessera up's label that it applies no more (a role an earlier
version had), so no component keeps a right deploy/ no longer gives it.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable, Mapping
from typing import Any, Final

from apis.extension.names import (
    ANNOTATION_HELM_RELEASE_NAME,
    ANNOTATION_KUBECTL_LAST_APPLIED,
    LABEL_MANAGED_BY,
    GroupVersionResource,
)
from kube import errors
from kube.client import Client
from kube.resources import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    ENDPOINTS,
    ROLE_BINDINGS,
    ROLES,
    SERVICE_ACCOUNTS,
    SERVICES,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
)

__all__ = ["MANAGER", "own", "own_name", "own_object", "prune", "retire_deploy_names"]

log = logging.getLogger(__name__)

#: The `app.kubernetes.io/managed-by` of everything tessera up applies.
MANAGER: Final = "tessera-up"
_RBAC_PREFIX: Final = "tessera-up:"
_PREFIX: Final = "tessera-up-"
_PART_OF: Final = "app.kubernetes.io/part-of"
_RESOURCES: Final[Mapping[str, GroupVersionResource]] = {
    r.kind: r
    for r in (
        SERVICE_ACCOUNTS,
        ROLES,
        ROLE_BINDINGS,
        CLUSTER_ROLES,
        CLUSTER_ROLE_BINDINGS,
        SERVICES,
        ENDPOINTS,
        VALIDATING_WEBHOOK_CONFIGURATIONS,
    )
}
_RBAC_KINDS: Final = frozenset({"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"})


def own_name(kind: str, name: str) -> str:
    """The name tessera up gives deploy's object `name` of `kind`."""
    return f"{_RBAC_PREFIX}{name}" if kind in _RBAC_KINDS else f"{_PREFIX}{name}"


def own_object(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of deploy's object `doc` under tessera up's name, labelled as tessera up's."""
    out = copy.deepcopy(dict(doc))
    meta = out["metadata"]
    meta["name"] = own_name(str(out["kind"]), str(meta["name"]))
    meta["labels"] = {**(meta.get("labels") or {}), LABEL_MANAGED_BY: MANAGER}
    return out


def own(docs: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """deploy's objects as tessera up applies them: RBAC objects renamed (bindings pointing at the
    renamed roles), Namespaces as they are, ServiceAccounts left out (see the module docstring)."""
    docs = list(docs)
    roles = {(d["kind"], d["metadata"]["name"]) for d in docs if d.get("kind") in ("Role", "ClusterRole")}
    out = []
    for doc in docs:
        kind = str(doc.get("kind"))
        if kind == "ServiceAccount":
            continue
        if kind not in _RBAC_KINDS:
            out.append(copy.deepcopy(dict(doc)))
            continue
        owned = own_object(doc)
        ref = owned.get("roleRef")
        if isinstance(ref, dict) and (ref.get("kind"), ref.get("name")) in roles:
            ref["name"] = own_name(str(ref["kind"]), str(ref["name"]))
        out.append(owned)
    return out


def prune(client: Client, applied: Iterable[Mapping[str, Any]]) -> list[str]:
    """Delete the RBAC objects labelled as tessera up's that are not among `applied` (all of what
    it applies now); `Kind namespace/name` of each deleted."""
    kept = {(str(d.get("kind")), str((d.get("metadata") or {}).get("name"))) for d in applied}
    pruned = []
    for kind in sorted(_RBAC_KINDS):
        api = client.resource(_RESOURCES[kind])
        for obj in api.list_all(label_selector=f"{LABEL_MANAGED_BY}={MANAGER}").items:
            meta = obj.get("metadata") or {}
            if (kind, meta.get("name")) in kept:
                continue
            namespace = str(meta.get("namespace") or "")
            try:
                api.delete(str(meta["name"]), namespace=namespace, uid=str(meta.get("uid") or ""))
            except errors.NotFound:
                continue
            log.info("Removed what tessera up applies no more", extra={"kind": kind, "object": meta["name"]})
            pruned.append(f"{kind} {namespace + '/' if namespace else ''}{meta['name']}")
    return pruned


def _left_by_an_earlier_up(obj: Mapping[str, Any]) -> bool:
    """Whether `obj` (under one of deploy's names) is what a tessera up before own names applied:
    deploy's labels and nothing else's — no Helm release, no `kubectl apply`, no manager label."""
    meta = obj.get("metadata") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    return (
        labels.get(_PART_OF) == "tessera"
        and LABEL_MANAGED_BY not in labels
        and ANNOTATION_HELM_RELEASE_NAME not in annotations
        and ANNOTATION_KUBECTL_LAST_APPLIED not in annotations
    )


def retire_deploy_names(client: Client, docs: Iterable[Mapping[str, Any]]) -> list[str]:
    """Delete what an earlier tessera up applied under the names of `docs` (deploy's objects, and
    the Endpoints of each Service); `Kind namespace/name` of each deleted. Idempotent."""
    wanted: list[tuple[str, str, str]] = []
    for doc in docs:
        kind, meta = str(doc.get("kind")), doc.get("metadata") or {}
        if kind not in _RESOURCES:
            continue
        namespace = str(meta.get("namespace") or "") if _RESOURCES[kind].namespaced else ""
        wanted.append((kind, namespace, str(meta["name"])))
        if kind == "Service":
            wanted.append(("Endpoints", namespace, str(meta["name"])))
    retired = []
    for kind, namespace, name in wanted:
        api = client.resource(_RESOURCES[kind])
        try:
            obj = api.get(name, namespace=namespace)
            if not _left_by_an_earlier_up(obj):
                continue
            uid = str((obj.get("metadata") or {}).get("uid") or "")
            api.delete(name, namespace=namespace, uid=uid)
        except errors.NotFound:
            continue
        log.info("Removed what an earlier tessera up applied under deploy's name", extra={"kind": kind, "object": name})
        retired.append(f"{kind} {namespace + '/' if namespace else ''}{name}")
    return retired
