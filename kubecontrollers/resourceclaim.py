"""The resourceclaim controller's decisions, as kube-controller-manager's
(k8s.io/kubernetes pkg/controller/resourceclaim):

- **A pod** (`sync_pod`): for each `spec.resourceClaims[]` naming a `resourceClaimTemplateName`,
  a ResourceClaim made from the template — named `<pod>-<claim>-<5 random>` (both parts cut in
  proportion when long), the template's labels and annotations plus
  `resource.kubernetes.io/pod-claim-name`, owned by the pod (controller, blockOwnerDeletion) —
  and recorded in the pod's `status.resourceClaimStatuses`. A claim already made for it (owned by
  the pod, with the annotation) is found again rather than made twice, so a crash between the
  create and the status write loses nothing; a claim the status names that is not the pod's is
  replaced. A missing template is a `FailedResourceClaimCreation` Warning on the pod, looked at
  again later. A pod bound to a node whose allocated claim does not list it yet is added to the
  claim's `status.reservedFor` (kube does this for pods bound without the scheduler).
- **A claim** (`sync_claim`): consumers in `status.reservedFor` that are gone, replaced (another
  uid) or done (Succeeded/Failed, or deleted before being scheduled) are removed; a claim left
  with none is deallocated (`status.allocation` cleared, and the delete-protection finalizer the
  scheduler put with the allocation removed), so its devices are free for other claims; a claim
  being deleted is deallocated and let go the same way. A generated claim no consumer holds whose
  pod is done or replaced is deleted; when the pod is gone the garbage collector deletes it.

Pure: objects in, a `Plan` out. Whether a consumer pod exists is asked through `Pods`, which the
caller answers from its cache and, for a pod it has not seen, from the API server (a pod the
scheduler reserved a claim for may not be in the cache yet: it must not lose its reservation).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from apis.dra.names import DELETE_PROTECTION_FINALIZER, POD_CLAIM_NAME_ANNOTATION
from kube.events import WARNING
from kube.resources import STRATEGIC_MERGE_PATCH
from kubecontrollers.kinds import PODS, RESOURCE_CLAIMS
from kubecontrollers.plan import Create, Delete, Obj, Patch, Plan, note, owner_reference, random_suffix

__all__ = [
    "RESERVED_FOR_MAX",
    "Pods",
    "claim_names",
    "generated_name",
    "pod_needs_claims",
    "sync_claim",
    "sync_pod",
]

#: At most this many consumers in `status.reservedFor` (kube's ResourceClaimReservedForMaxSize).
RESERVED_FOR_MAX: Final = 256
#: A missing template is looked for again after this many seconds (its create also wakes the pod).
TEMPLATE_RETRY_S: Final = 10.0
_MAX_BASE: Final = 57  # 63 characters of a name, less "-" and the 5 random ones
#: Answers "the pod `name` with `uid`": the pod as it is (None: it is gone, or another pod of
#: that name replaced it).
Pods = Callable[[str, str], Obj | None]


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _pod_claims(pod: Obj) -> list[Mapping[str, Any]]:
    return [c for c in _list((pod.get("spec") or {}).get("resourceClaims")) if isinstance(c, Mapping)]


def _statuses(pod: Obj) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for entry in _list((pod.get("status") or {}).get("resourceClaimStatuses")):
        if isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
            generated = entry.get("resourceClaimName")
            out[entry["name"]] = generated if isinstance(generated, str) else None
    return out


def claim_names(pod: Obj) -> list[str]:
    """The names of the claims `pod` uses, as far as they are known: a `resourceClaimName`, or
    the claim generated for a template as the pod's status records it."""
    statuses = _statuses(pod)
    out = []
    for claim in _pod_claims(pod):
        named = claim.get("resourceClaimName")
        if isinstance(named, str):
            out.append(named)
        elif (generated := statuses.get(str(claim.get("name")))) is not None:
            out.append(generated)
    return out


def pod_done(pod: Obj) -> bool:
    """Certain never to run (again): Succeeded or Failed, or deleted before it was scheduled."""
    phase = (pod.get("status") or {}).get("phase")
    deleted_unscheduled = bool(_meta(pod).get("deletionTimestamp")) and not (pod.get("spec") or {}).get("nodeName")
    return phase in ("Succeeded", "Failed") or deleted_unscheduled


def pod_needs_claims(pod: Obj, *, deleted: bool = False) -> bool:
    """Whether the pod may still use its claims (False: their reservations for it can go)."""
    return not deleted and not pod_done(pod)


def generated_name(pod_name: str, claim_name: str, rng: random.Random | None = None) -> str:
    """kube's name for a claim made from a template: `<pod>-<claim>-<5 random>`; when that base is
    longer than 57 characters, the pod's and the claim's parts each cut in proportion
    (`<pod part>-<claim part><5 random>`), so neither is lost."""
    base = f"{pod_name}-{claim_name}-"
    if len(base) > _MAX_BASE:
        base = (
            pod_name[: len(pod_name) * _MAX_BASE // len(base)]
            + "-"
            + claim_name[: len(claim_name) * _MAX_BASE // len(base)]
        )  # as kube's: no "-" before the random part then
    return base + random_suffix(rng)


def _controlled_by_pod(claim: Obj, uid: str) -> bool:
    return any(
        isinstance(r, Mapping)
        and r.get("controller") is True
        and r.get("apiVersion") == "v1"
        and r.get("kind") == "Pod"
        and r.get("uid") == uid
        for r in _list(_meta(claim).get("ownerReferences"))
    )


def _owning_pod(claim: Obj) -> tuple[str, str] | None:
    for r in _list(_meta(claim).get("ownerReferences")):
        if (
            isinstance(r, Mapping)
            and r.get("controller") is True
            and r.get("apiVersion") == "v1"
            and r.get("kind") == "Pod"
        ):
            return str(r.get("name")), str(r.get("uid"))
    return None


def _made_for(claims: Iterable[Obj], uid: str, pod_claim: str) -> Obj | None:
    """A claim generated earlier for this pod claim (its status write may have failed)."""
    for claim in claims:
        if (
            _controlled_by_pod(claim, uid)
            and (_meta(claim).get("annotations") or {}).get(POD_CLAIM_NAME_ANNOTATION) == pod_claim
        ):
            return claim
    return None


def _from_template(pod: Obj, pod_claim: str, template: Obj, name: str) -> dict[str, Any]:
    spec = template.get("spec") or {}
    tmeta = spec.get("metadata") or {}
    meta: dict[str, Any] = {
        "name": name,
        "namespace": _meta(pod).get("namespace", ""),
        "annotations": {**(tmeta.get("annotations") or {}), POD_CLAIM_NAME_ANNOTATION: pod_claim},
        "ownerReferences": [owner_reference(pod, PODS)],
    }
    if tmeta.get("labels"):
        meta["labels"] = dict(tmeta["labels"])
    return {
        "apiVersion": RESOURCE_CLAIMS.api_version,
        "kind": RESOURCE_CLAIMS.kind,
        "metadata": meta,
        "spec": spec.get("spec") or {},
    }


def _reserved_for(claim: Obj) -> list[Mapping[str, Any]]:
    return [r for r in _list((claim.get("status") or {}).get("reservedFor")) if isinstance(r, Mapping)]


def _reserve(pod: Obj, claim: Obj) -> Patch | None:
    """The pod added to an allocated claim's consumers (None: nothing to do, or no room)."""
    uid = _meta(pod).get("uid")
    reserved = _reserved_for(claim)
    status = claim.get("status") or {}
    if not status.get("allocation") or any(r.get("uid") == uid for r in reserved) or len(reserved) >= RESERVED_FOR_MAX:
        return None
    consumer = {"resource": "pods", "name": _meta(pod).get("name"), "uid": uid}
    meta = _meta(claim)
    body = {
        "metadata": {"resourceVersion": meta.get("resourceVersion")},
        "status": {"reservedFor": [*reserved, consumer]},
    }
    return Patch(RESOURCE_CLAIMS, str(meta.get("namespace", "")), str(meta["name"]), body, subresource="status")


def sync_pod(
    pod: Obj,
    claims: Mapping[str, Obj],
    templates: Mapping[str, Obj],
    *,
    rng: random.Random | None = None,
) -> Plan:
    """What one pod needs: its templates' claims made and recorded, its bound claims reserved.
    `claims`, `templates`: the pod's namespace's, by name."""
    plan = Plan()
    meta = _meta(pod)
    if meta.get("deletionTimestamp") or pod_done(pod) or not _pod_claims(pod):
        return plan  # a pod that will not run needs no claim made (its claims go, sync_claim)
    uid = str(meta.get("uid"))
    statuses = _statuses(pod)
    recorded = dict(statuses)
    used: list[Obj] = []
    for pod_claim in _pod_claims(pod):
        name = str(pod_claim.get("name"))
        if isinstance(pod_claim.get("resourceClaimName"), str):
            if (claim := claims.get(pod_claim["resourceClaimName"])) is not None:
                used.append(claim)
            continue
        template_name = pod_claim.get("resourceClaimTemplateName")
        if not isinstance(template_name, str):
            continue
        if name in statuses:
            generated = statuses[name]
            if generated is None:
                continue  # no claim was needed for it
            claim = claims.get(generated)
            if claim is not None and _controlled_by_pod(claim, uid):
                used.append(claim)
                continue
        found = _made_for(claims.values(), uid, name)
        if found is not None:
            recorded[name] = str(_meta(found)["name"])
            used.append(found)
            continue
        template = templates.get(template_name)
        if template is None:
            message = (
                f'PodResourceClaim {name}: resource claim template "{template_name}": '
                f'resourceclaimtemplates.resource.k8s.io "{template_name}" not found'
            )
            plan.notes.append(note(pod, PODS, "FailedResourceClaimCreation", message, WARNING))
            plan.later(TEMPLATE_RETRY_S)
            break  # as kube: the pod's next claims wait for this one
        body = _from_template(pod, name, template, generated_name(str(meta["name"]), name, rng))
        plan.actions.append(Create(RESOURCE_CLAIMS, str(meta.get("namespace", "")), body))
        recorded[name] = str(body["metadata"]["name"])
    if recorded != statuses:
        entries = [{"name": k, "resourceClaimName": v} for k, v in recorded.items()]
        body = {
            "metadata": {"resourceVersion": meta.get("resourceVersion")},
            "status": {"resourceClaimStatuses": entries},
        }
        plan.actions.append(Patch(PODS, str(meta.get("namespace", "")), str(meta["name"]), body, subresource="status"))
    if (pod.get("spec") or {}).get("nodeName"):
        for claim in used:
            if (reserve := _reserve(pod, claim)) is not None:
                plan.actions.append(reserve)
    return plan


def _still_consumes(ref: Mapping[str, Any], pods: Pods) -> bool:
    if ref.get("apiGroup") or ref.get("resource") != "pods":
        return True  # a consumer of another kind: not this controller's to judge (kube keeps none)
    pod = pods(str(ref.get("name")), str(ref.get("uid")))
    return pod is not None and _meta(pod).get("uid") == ref.get("uid") and not pod_done(pod)


def _unprotect(claim: Obj) -> Patch:
    """The delete-protection finalizer removed, whatever else the list holds now (a strategic
    merge patch's delete directive: no race with another writer of the finalizers)."""
    meta = _meta(claim)
    body = {"metadata": {"$deleteFromPrimitiveList/finalizers": [DELETE_PROTECTION_FINALIZER]}}
    return Patch(
        RESOURCE_CLAIMS, str(meta.get("namespace", "")), str(meta["name"]), body, patch_type=STRATEGIC_MERGE_PATCH
    )


def sync_claim(claim: Obj, pods: Pods) -> Plan:
    """What one claim needs: stale consumers removed, deallocated when none is left (or when it
    is being deleted), deleted when it was generated for a pod that will not run."""
    plan = Plan()
    meta = _meta(claim)
    namespace, name = str(meta.get("namespace", "")), str(meta["name"])
    status = claim.get("status") or {}
    reserved = _reserved_for(claim)
    valid = [r for r in reserved if _still_consumes(r, pods)]
    protected = DELETE_PROTECTION_FINALIZER in _list(meta.get("finalizers"))
    guard = {"resourceVersion": meta.get("resourceVersion")}
    if len(valid) < len(reserved):
        # Deallocated at once when the last consumer goes: its devices are free for the next
        # claim (as kube: DRA allocates late and frees early).
        change: dict[str, Any] = {"reservedFor": valid or None}
        if not valid:
            change["allocation"] = None
        plan.actions.append(
            Patch(RESOURCE_CLAIMS, namespace, name, {"metadata": guard, "status": change}, subresource="status")
        )
        if not valid and protected:
            plan.actions.append(_unprotect(claim))
    elif protected and meta.get("deletionTimestamp") and not valid:
        if status.get("allocation"):
            body = {"metadata": guard, "status": {"allocation": None}}
            plan.actions.append(Patch(RESOURCE_CLAIMS, namespace, name, body, subresource="status"))
        plan.actions.append(_unprotect(claim))
    if not valid and not meta.get("deletionTimestamp"):
        owner = _owning_pod(claim)
        if owner is not None:
            pod = pods(*owner)
            if pod is not None and (_meta(pod).get("uid") != owner[1] or pod_done(pod)):
                plan.actions.append(Delete(RESOURCE_CLAIMS, namespace, name, str(meta.get("uid"))))
    return plan
