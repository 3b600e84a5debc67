"""Evicting a pod through the API: the one place that builds the `policy/v1` Eviction.

An eviction is a POST of an Eviction to `pods/NAME/eviction`; the API server deletes the pod
unless a PodDisruptionBudget forbids it now (`kube.errors.TooManyRequests`, 429). Called by the
controller's quota reclaim and the descheduler's migration executor; both pass the pod's uid as a
precondition, so a new pod of the same name is never evicted in its place (`Conflict`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

__all__ = ["Evictor", "evict", "eviction"]

#: What an eviction is posted as (kube's policy/v1 Eviction, the pods/eviction subresource's body).
API_VERSION = "policy/v1"
KIND = "Eviction"
SUBRESOURCE = "eviction"


class Evictor(Protocol):
    """What posts to a pod's subresource: the pods' `kube.resources.ResourceAPI`, or a test double."""

    def post(self, name: str, subresource: str, body: dict[str, Any], *, namespace: str = "") -> Any: ...


def eviction(
    name: str, namespace: str, *, uid: str = "", delete_options: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The Eviction of pod `namespace/name`: `delete_options` as given, else (with `uid`) a
    precondition on the pod's uid."""
    options = dict(delete_options) if delete_options else ({"preconditions": {"uid": uid}} if uid else {})
    body: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name, "namespace": namespace}}
    if options:
        body["deleteOptions"] = options
    return body


def evict(
    pods: Evictor, name: str, *, namespace: str, uid: str = "", delete_options: Mapping[str, Any] | None = None
) -> None:
    """Evict pod `namespace/name` (see `eviction` for the options). Raises what the API answers:
    TooManyRequests (a PodDisruptionBudget says not now), NotFound, Conflict (the uid changed)."""
    pods.post(name, SUBRESOURCE, eviction(name, namespace, uid=uid, delete_options=delete_options), namespace=namespace)
