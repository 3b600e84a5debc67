"""Keeping objects that fail to parse in the cache, so a reconciler can report them.

An informer skips objects its parser rejects (it only logs them), which is right for a scheduler
but leaves a controller unable to tell a user why their object is ignored. `tolerant(parse, gvr)`
wraps a parser so that a rejected object is cached as `Malformed` — its reference and the parse
error — and the reconciler sees it like any other version of the object and can record an Event
with the precise reason. Only Tessera's own parse errors are caught; a bug in a parser still
propagates (and the informer logs its stack).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from apis.errors import TesseraError
from apis.extension.names import GroupVersionResource
from apis.k8s.meta import ObjectMeta
from kube.events import ObjectReference

__all__ = ["Malformed", "tolerant"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Malformed:
    """An object that did not parse: which one, and why."""

    reference: ObjectReference
    error: TesseraError

    @property
    def name(self) -> str:
        return self.reference.name


def _meta(raw: dict[str, Any]) -> ObjectMeta:
    metadata = raw.get("metadata")
    try:
        return ObjectMeta.from_dict(metadata)
    except TesseraError:  # broken metadata: keep what identifies the object
        fields = metadata if isinstance(metadata, dict) else {}

        def text(key: str) -> str:
            value = fields.get(key)
            return value if isinstance(value, str) else ""

        return ObjectMeta(
            name=text("name"), namespace=text("namespace"), uid=text("uid"), resource_version=text("resourceVersion")
        )


def tolerant(
    parse: Callable[[dict[str, Any]], T], gvr: GroupVersionResource
) -> Callable[[dict[str, Any]], T | Malformed]:
    """`parse`, but an object it rejects with a TesseraError becomes `Malformed` instead."""

    def parse_or_keep(raw: dict[str, Any]) -> T | Malformed:
        try:
            return parse(raw)
        except TesseraError as e:
            return Malformed(ObjectReference.from_meta(gvr.kind, gvr.api_version, _meta(raw)), e)

    return parse_or_keep
