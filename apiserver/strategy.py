"""Per-type rules of the registry: defaulting, validation and side effects, like Kubernetes' strategies.

The registry does everything types share (metadata, resourceVersion, optimistic concurrency,
status isolation, finalizers, watch events). A `Strategy` adds what one type needs on top: a pod's
defaults and immutable spec (`pods.py`), a namespace's phase, a CRD registering its resource
(`crds.py`). Strategies change the dict they are given and return problems as `Cause`s.
"""

from __future__ import annotations

from typing import Any

from apiserver.errors import Cause
from apiserver.validation import validate_metadata

__all__ = ["NamespaceStrategy", "Strategy"]


class Strategy:
    """The default: no defaults, metadata checks only."""

    #: `label` for types whose names must be RFC 1123 labels (namespaces), else `subdomain`.
    name_rule = "subdomain"
    #: `on_stored(None, obj)` is replayed for every stored object at start-up (in-memory state
    #: derived from stored objects: CRDs' served types, webhook configurations).
    restore_on_load = False

    def prepare_create(self, obj: dict[str, Any]) -> None:
        """Fill defaults on a new object (metadata is already set)."""

    def prepare_update(self, new: dict[str, Any], old: dict[str, Any]) -> None:
        """Adjust an update of the main resource (status is already reset to the old one)."""

    def prepare_status(self, new: dict[str, Any], old: dict[str, Any]) -> None:
        """Adjust a write of the status subresource (all but `status` is already the old object)."""

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[Cause]:
        """Problems with `obj` (old: the stored version, None on create). May fill fields derived
        from what it parsed (a pod's QoS class), so the expensive parse happens once."""
        return validate_metadata(obj.get("metadata") or {}, name_rule=self.name_rule)

    def on_stored(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """React, in memory, to a stored change (None: created / deleted). Must not raise."""


class NamespaceStrategy(Strategy):
    name_rule = "label"

    def prepare_create(self, obj: dict[str, Any]) -> None:
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj.setdefault("status", {})["phase"] = "Active"
