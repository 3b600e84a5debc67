"""List/watch selectors: `labelSelector` (via `apis.k8s.labels`) and `fieldSelector`.

Field selectors in Kubernetes are a small language of their own: `a=b`, `a==b`, `a!=b`, joined by
commas, over a fixed set of fields per type (`spec.nodeName` for pods, `involvedObject.name` for
events). An unknown field is a 400, as kube-apiserver answers, so a typo is never silently an
empty list.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from apis.errors import ValidationError
from apis.k8s import labels
from apiserver.catalog import ResourceType
from apiserver.errors import StatusError

__all__ = ["FieldRequirement", "ObjectFilter", "parse_field_selector", "parse_label_selector"]


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    path: tuple[str, ...]
    value: str
    equal: bool

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return (field_value(obj, self.path) == self.value) is self.equal


def field_value(obj: Mapping[str, Any], path: tuple[str, ...]) -> str:
    """The string form a field selector compares against ("" when absent)."""
    value: Any = obj
    for part in path:
        if not isinstance(value, Mapping):
            return ""
        value = value.get(part)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_field_selector(text: str, rt: ResourceType) -> tuple[FieldRequirement, ...]:
    """Parse `spec.nodeName=n1,status.phase!=Failed`; raises a 400 StatusError."""
    out = []
    for raw in text.split(","):
        part = raw.strip()
        if not part:
            continue
        op = next((o for o in ("!=", "==", "=") if o in part), None)
        if op is None:
            raise StatusError.bad_request(f"invalid field selector: {part!r}: expected key=value or key!=value")
        label, value = (s.strip() for s in part.split(op, 1))
        path = rt.fields.get(label)
        if path is None:
            raise StatusError.bad_request(f'"{label}" is not a known field selector: only "{", ".join(rt.fields)}"')
        out.append(FieldRequirement(tuple(path.split(".")), value, op != "!="))
    return tuple(out)


def parse_label_selector(text: str) -> labels.Selector:
    try:
        return labels.parse_selector(text)
    except ValidationError as e:
        raise StatusError.bad_request(f"unable to parse requirement: {e.reason}") from None


@dataclass(frozen=True, slots=True)
class ObjectFilter:
    """Namespace, label and field selection of one list or watch request."""

    namespace: str = ""
    label: labels.Selector = field(default_factory=labels.Selector)
    fields: tuple[FieldRequirement, ...] = ()

    @property
    def is_everything(self) -> bool:
        return not self.namespace and self.label.is_empty() and not self.fields

    def matches(self, obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        if self.namespace and meta.get("namespace") != self.namespace:
            return False
        if not self.label.is_empty() and not self.label.matches(meta.get("labels") or {}):
            return False
        return all(f.matches(obj) for f in self.fields)
