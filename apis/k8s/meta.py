"""Object metadata and conditions: the parts of metav1 that Tessera's types carry.

Values are frozen; their maps are plain dicts by convention read-only (copy to change).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from apis import _fields as f
from apis.errors import ValidationError

__all__ = ["Condition", "ObjectMeta", "OwnerReference", "now_rfc3339"]


_last_second: tuple[int, str] = (-1, "")


def now_rfc3339() -> str:
    """Current time as Kubernetes writes timestamps (`2024-01-02T03:04:05Z`). Formatted once a
    second: the API server stamps every object it writes, and formatting was 3 % of its CPU."""
    global _last_second  # noqa: PLW0603 — one tuple, replaced whole (safe across threads)
    second = int(time.time())
    cached = _last_second
    if cached[0] != second:
        cached = _last_second = (second, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second)))
    return cached[1]


@dataclass(frozen=True, slots=True)
class OwnerReference:
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None

    @classmethod
    def from_dict(cls, raw: object, field_path: str = "metadata.ownerReferences", obj: str = "") -> OwnerReference:
        d = f.mapping(raw, field_path, obj)
        return cls(
            api_version=f.string(d, "apiVersion", field_path, obj),
            kind=f.string(d, "kind", field_path, obj),
            name=f.string(d, "name", field_path, obj),
            uid=f.string(d, "uid", field_path, obj),
            controller=d.get("controller") if isinstance(d.get("controller"), bool) else None,
            block_owner_deletion=(
                d.get("blockOwnerDeletion") if isinstance(d.get("blockOwnerDeletion"), bool) else None
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
        }
        if self.controller is not None:
            out["controller"] = self.controller
        if self.block_owner_deletion is not None:
            out["blockOwnerDeletion"] = self.block_owner_deletion
        return out


@dataclass(frozen=True, slots=True)
class ObjectMeta:
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    creation_timestamp: str = ""
    deletion_timestamp: str = ""
    generate_name: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    owner_references: tuple[OwnerReference, ...] = ()
    finalizers: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """`namespace/name`, or `name` for cluster-scoped objects: how logs and caches name it."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @classmethod
    def from_dict(cls, raw: object, obj: str = "") -> ObjectMeta:
        d = f.mapping(raw, "metadata", obj)
        path = "metadata"
        return cls(
            name=f.string(d, "name", path, obj),
            namespace=f.string(d, "namespace", path, obj),
            uid=f.string(d, "uid", path, obj),
            resource_version=f.string(d, "resourceVersion", path, obj),
            generation=f.integer(d, "generation", path, obj, 0) or 0,
            creation_timestamp=f.string(d, "creationTimestamp", path, obj),
            deletion_timestamp=f.string(d, "deletionTimestamp", path, obj),
            generate_name=f.string(d, "generateName", path, obj),
            labels=f.string_map(d, "labels", path, obj),
            annotations=f.string_map(d, "annotations", path, obj),
            owner_references=tuple(
                OwnerReference.from_dict(o, f"{path}.ownerReferences[{i}]", obj)
                for i, o in enumerate(f.items(d, "ownerReferences", path, obj))
            ),
            finalizers=f.strings(d, "finalizers", path, obj),
        )

    def to_dict(self) -> dict[str, Any]:
        return f.drop_empty(
            {
                "name": self.name,
                "namespace": self.namespace,
                "generateName": self.generate_name,
                "uid": self.uid,
                "resourceVersion": self.resource_version,
                "generation": self.generation or None,
                "creationTimestamp": self.creation_timestamp,
                "deletionTimestamp": self.deletion_timestamp,
                "labels": dict(self.labels),
                "annotations": dict(self.annotations),
                "ownerReferences": [o.to_dict() for o in self.owner_references],
                "finalizers": list(self.finalizers),
            }
        )


@dataclass(frozen=True, slots=True)
class Condition:
    """metav1.Condition: `status` is "True", "False" or "Unknown"."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str = ""
    observed_generation: int = 0

    @classmethod
    def from_dict(cls, raw: object, field_path: str = "conditions", obj: str = "") -> Condition:
        d = f.mapping(raw, field_path, obj)
        status = f.string(d, "status", field_path, obj)
        if status not in ("True", "False", "Unknown"):
            raise ValidationError(f"{field_path}.status", f"must be True, False or Unknown, got {status!r}", obj=obj)
        return cls(
            type=f.string(d, "type", field_path, obj),
            status=status,
            reason=f.string(d, "reason", field_path, obj),
            message=f.string(d, "message", field_path, obj),
            last_transition_time=f.string(d, "lastTransitionTime", field_path, obj),
            observed_generation=f.integer(d, "observedGeneration", field_path, obj, 0) or 0,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "status": self.status}
        if self.observed_generation:
            out["observedGeneration"] = self.observed_generation
        if self.last_transition_time:
            out["lastTransitionTime"] = self.last_transition_time
        out["reason"] = self.reason
        out["message"] = self.message
        return out
