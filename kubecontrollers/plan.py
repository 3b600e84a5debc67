"""What a controller decides, as data: the writes it wants (`Create`, `Patch`, `Delete`) and when
to look again. Sync functions return a `Plan`; only `loop.py` performs it. Helpers shared by the
controllers (owner references, pods from templates, conditions, hashes) live here too.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from apis.extension.names import GroupVersionResource
from apis.k8s.meta import now_rfc3339
from kube.events import NORMAL, ObjectReference
from kube.resources import MERGE_PATCH
from kubecontrollers.kinds import PODS

__all__ = [
    "Create",
    "Delete",
    "Note",
    "Obj",
    "Patch",
    "Plan",
    "controlled_by",
    "owner_reference",
    "pod_from_template",
    "safe_hash",
    "status_patch",
    "with_condition",
]

Obj = Mapping[str, Any]
#: The alphabet Kubernetes uses for generated names and hashes (no vowels, no look-alikes).
_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"


@dataclass(frozen=True, slots=True)
class Note:
    """The Event a write is worth once it succeeded (`kubectl describe` shows it), as upstream's."""

    about: ObjectReference
    reason: str
    message: str
    type: str = NORMAL


def note(obj: Obj, resource: GroupVersionResource, reason: str, message: str, type: str = NORMAL) -> Note:
    meta = _meta(obj)
    ref = ObjectReference(
        resource.kind,
        str(meta.get("name", "")),
        str(meta.get("namespace", "")),
        str(meta.get("uid", "")),
        resource.api_version,
    )
    return Note(ref, reason, message, type)


@dataclass(frozen=True, slots=True)
class Create:
    resource: GroupVersionResource
    namespace: str
    body: dict[str, Any]
    note: Note | None = None

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])


@dataclass(frozen=True, slots=True)
class Patch:
    resource: GroupVersionResource
    namespace: str
    name: str
    patch: dict[str, Any]
    subresource: str = ""
    patch_type: str = MERGE_PATCH
    note: Note | None = None


@dataclass(frozen=True, slots=True)
class Delete:
    resource: GroupVersionResource
    namespace: str
    name: str
    uid: str
    propagation: str = ""
    #: Delete only if none of these owners (resource, name, uid) exists any more, checked against
    #: the API server itself (the garbage collector must not trust a cache that may lag).
    unless_owners: tuple[tuple[GroupVersionResource, str, str], ...] = ()
    note: Note | None = None


Action = Create | Patch | Delete


@dataclass(slots=True)
class Plan:
    actions: list[Action] = field(default_factory=list)
    #: Look at the object again after this many seconds even without an event (None: no need).
    requeue_after: float | None = None
    #: Wait for the informers to show these writes before syncing the key again (expectations).
    #: False for a controller that recomputes everything from scratch on a timer and whose writes
    #: are idempotent (the node lifecycle controller): it must never stall behind a slow cache.
    track: bool = True
    #: Events worth recording whatever the writes do (a schedule that does not parse, a run
    #: skipped): recorded after the writes, repeats folded into one Event by the recorder.
    notes: list[Note] = field(default_factory=list)

    def later(self, seconds: float) -> None:
        self.requeue_after = seconds if self.requeue_after is None else min(self.requeue_after, seconds)


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def controlled_by(obj: Obj, uid: str) -> bool:
    """Whether `obj`'s controller ownerReference is the object with `uid`."""
    return any(
        isinstance(r, Mapping) and r.get("controller") is True and r.get("uid") == uid
        for r in _meta(obj).get("ownerReferences") or ()
    )


def has_controller(obj: Obj) -> bool:
    return any(isinstance(r, Mapping) and r.get("controller") is True for r in _meta(obj).get("ownerReferences") or ())


def adopt(obj: Obj, resource: GroupVersionResource, ref: dict[str, Any]) -> Patch:
    """Add the controller reference `ref` to an orphan (guarded by its resourceVersion: an object
    someone else adopted meanwhile is not adopted twice)."""
    meta = _meta(obj)
    refs = [*(meta.get("ownerReferences") or ()), ref]
    body = {"metadata": {"ownerReferences": refs, "resourceVersion": meta.get("resourceVersion")}}
    return Patch(resource, str(meta.get("namespace", "")), str(meta["name"]), body)


def owner_reference(owner: Obj, resource: GroupVersionResource) -> dict[str, Any]:
    """The controller reference a dependent of `owner` carries (blocking its owner's foreground deletion)."""
    meta = _meta(owner)
    return {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def random_suffix(rng: random.Random | None = None, length: int = 5) -> str:
    r = rng or random
    return "".join(r.choice(_ALPHABET) for _ in range(length))


def safe_hash(value: object) -> str:
    """A short, stable hash of a JSON value, spelled as Kubernetes spells pod-template-hash (FNV-1a 32)."""
    h = 0x811C9DC5
    for byte in json.dumps(value, sort_keys=True, separators=(",", ":")).encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_ALPHABET[int(d)] for d in str(h))[:10]


def pod_from_template(
    template: Obj, *, namespace: str, name: str, owner: dict[str, Any], labels: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A pod made from a workload's template, as the controllers make them (kube's GetPodFromTemplate)."""
    tmeta = _meta(template)
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {**(tmeta.get("labels") or {}), **(labels or {})},
        "ownerReferences": [owner],
    }
    if tmeta.get("annotations"):
        meta["annotations"] = dict(tmeta["annotations"])
    if tmeta.get("finalizers"):
        meta["finalizers"] = list(tmeta["finalizers"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": copy.deepcopy(dict(template.get("spec") or {})),
    }


def create_pod(body: dict[str, Any], note: Note | None = None) -> Create:
    return Create(PODS, str(body["metadata"]["namespace"]), body, note)


def with_condition(
    conditions: Iterable[Obj], kind: str, status: str, reason: str, message: str
) -> list[dict[str, Any]]:
    """`conditions` with the one of type `kind` set; its times move only when its status changes
    (lastUpdateTime also when the reason or message does), so a steady state writes nothing."""
    now = now_rfc3339()
    out: list[dict[str, Any]] = []
    found = False
    for c in conditions:
        if c.get("type") != kind:
            out.append(dict(c))
            continue
        found = True
        same = c.get("status") == status
        unchanged = same and c.get("reason") == reason and c.get("message") == message
        out.append(
            {
                **c,
                "status": status,
                "reason": reason,
                "message": message,
                "lastTransitionTime": c.get("lastTransitionTime") if same else now,
                **({"lastUpdateTime": c.get("lastUpdateTime") if unchanged else now} if "lastUpdateTime" in c else {}),
            }
        )
    if not found:
        out.append({"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": now})
    return out


def status_patch(obj: Obj, resource: GroupVersionResource, status: dict[str, Any]) -> Patch | None:
    """A status write when `status` differs from what `obj` has (None: nothing to write)."""
    old = obj.get("status") or {}
    if status == old:
        return None
    meta = _meta(obj)
    # The whole status (fields it no longer has as nulls), guarded by resourceVersion: a write
    # computed from a stale view must fail (409) and be recomputed, never win.
    cleared: dict[str, Any] = {k: None for k in old if k not in status}
    body = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": {**cleared, **status}}
    return Patch(resource, str(meta.get("namespace", "")), str(meta["name"]), body, subresource="status")
