"""The garbage collector's decisions: dependents follow their owners as the delete asked.

Owners are the workload kinds (`kinds.OWNER_KINDS`) and pods, dependents the workloads' pods, a
Deployment's ReplicaSets, a CronJob's Jobs and the ResourceClaims generated for a pod
(`kinds.COLLECTED_OWNER_KINDS`), linked by ownerReferences. As kube's garbage collector, for what
is covered:

- **Background** (the owner is gone): a dependent whose every owner is gone is deleted (after the
  owners' absence is confirmed with the API server, not only the cache); one with other owners
  left loses the dangling references.
- **Foreground** (the owner has `deletionTimestamp` and the `foregroundDeletion` finalizer): its
  dependents are deleted (a dependent with dependents of its own in the foreground too); once none
  is left the finalizer is removed, and with it the owner.
- **Orphan** (the `orphan` finalizer): the reference to the owner is removed from each dependent,
  then the finalizer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from apis.extension.names import GroupVersionResource
from kubecontrollers.kinds import COLLECTED_OWNER_KINDS, OWNER_KINDS
from kubecontrollers.plan import Delete, Obj, Patch, Plan

__all__ = ["FOREGROUND", "ORPHAN", "Owners", "collect_dependent", "collect_owner"]

FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"
#: Finds an owner: (kind, "namespace/name") -> the object, or None (the informers' caches).
Owners = Callable[[str, str], Obj | None]


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _key(obj: Obj) -> str:
    meta = _meta(obj)
    return f"{meta.get('namespace', '')}/{meta['name']}"


def _finalizers(obj: Obj) -> list[str]:
    return list(_meta(obj).get("finalizers") or ())


def _refs(obj: Obj) -> list[Obj]:
    return [r for r in _meta(obj).get("ownerReferences") or () if isinstance(r, Mapping)]


def _owner(owners: Owners, namespace: str, ref: Obj) -> Obj | None:
    """The live owner `ref` names, or None when it is gone (another object of the name is not it)."""
    owner = owners(str(ref.get("kind")), f"{namespace}/{ref.get('name')}")
    return owner if owner is not None and _meta(owner).get("uid") == ref.get("uid") else None


def _without_refs(dependent: Obj, resource: GroupVersionResource, uids: set[str]) -> Patch:
    meta = _meta(dependent)
    kept = [r for r in _refs(dependent) if r.get("uid") not in uids]
    body: dict[str, Any] = {
        "metadata": {"ownerReferences": kept or None, "resourceVersion": meta.get("resourceVersion")}
    }
    return Patch(resource, str(meta.get("namespace", "")), str(meta["name"]), body)


def _dependent_action(resource: GroupVersionResource, dependent: Obj, owners: Owners) -> Patch | Delete | None:
    meta = _meta(dependent)
    namespace = str(meta.get("namespace", ""))
    known = [r for r in _refs(dependent) if r.get("kind") in COLLECTED_OWNER_KINDS]
    if not known or meta.get("deletionTimestamp"):
        return None
    live = {str(r.get("uid")): _owner(owners, namespace, r) for r in known}
    orphaning = {
        uid
        for uid, o in live.items()
        if o is not None and ORPHAN in _finalizers(o) and _meta(o).get("deletionTimestamp")
    }
    if orphaning:
        return _without_refs(dependent, resource, orphaning)
    for owner in live.values():
        if owner is not None and _meta(owner).get("deletionTimestamp") and FOREGROUND in _finalizers(owner):
            cascade = "Foreground" if resource.kind in OWNER_KINDS else ""
            return Delete(resource, namespace, str(meta["name"]), str(meta["uid"]), propagation=cascade)
    gone = {uid for uid, o in live.items() if o is None}
    if not gone:
        return None
    if len(gone) == len(_refs(dependent)):
        checks = tuple(
            (COLLECTED_OWNER_KINDS[str(r.get("kind"))], str(r.get("name")), str(r.get("uid"))) for r in known
        )
        # Background, as kube's collector: a Job's own default would orphan its pods.
        return Delete(
            resource, namespace, str(meta["name"]), str(meta["uid"]), propagation="Background", unless_owners=checks
        )
    return _without_refs(dependent, resource, gone)


def collect_dependent(resource: GroupVersionResource, dependent: Obj, owners: Owners) -> Plan:
    """What one dependent needs: its owners gone, orphaning or deleting in the foreground."""
    plan = Plan()
    action = _dependent_action(resource, dependent, owners)
    if action is not None:
        plan.actions.append(action)
    return plan


def collect_owner(
    kind: str, owner: Obj, dependents: Sequence[tuple[GroupVersionResource, Obj]], owners: Owners
) -> Plan:
    """What an owner being deleted in the foreground or orphaning needs: its dependents handled
    (`collect_dependent`), then, once none refers to it, its finalizer lifted."""
    plan = Plan()
    meta = _meta(owner)
    finalizers = _finalizers(owner)
    pending = [f for f in (FOREGROUND, ORPHAN) if f in finalizers]
    if not meta.get("deletionTimestamp") or not pending:
        return plan
    uid = meta.get("uid")
    mine = [(r, d) for r, d in dependents if any(ref.get("uid") == uid for ref in _refs(d))]
    for resource, dependent in mine:
        plan.actions += collect_dependent(resource, dependent, owners).actions
    if not mine:
        kept = [f for f in finalizers if f not in pending]
        body = {"metadata": {"finalizers": kept, "resourceVersion": meta.get("resourceVersion")}}
        namespace, _, name = _key(owner).partition("/")
        plan.actions.append(Patch(COLLECTED_OWNER_KINDS[kind], namespace, name, body))
    return plan
