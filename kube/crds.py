"""Tessera's CRDs on a cluster: installing them, and typed access to their objects.

`install_crds` is what `kubectl apply -f deploy/crds/` does, as one call (tests, `tessera up`).
`devices(client)`, `elastic_quotas(client)`, `pod_groups(client)`, `reservations(client)` and
`pod_migration_jobs(client)` read and write the custom resources as `apis` dataclasses, converting
at this edge so no caller handles their JSON. The one CRD of `kube.catalogue` without one is
NodeSLO: its spec is the agent's QoS configuration, which only the agent can read (its parse
depends on the node's labels and keeps the last good configuration over a bad field), so the
agent reads it raw through an Informer (`agent/qos/nodeslo.py`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import yaml

from apis.crds.device import Device
from apis.crds.elasticquota import ElasticQuota
from apis.crds.podgroup import PodGroup
from apis.crds.podmigrationjob import PodMigrationJob
from apis.crds.reservation import Reservation
from apis.errors import ConfigError
from apis.extension import names
from apis.k8s.meta import ObjectMeta
from kube import errors
from kube.client import Client
from kube.patch import create_or_replace, retry_on_conflict
from kube.resources import CUSTOM_RESOURCE_DEFINITIONS, MERGE_PATCH, Patch, ResourceAPI
from kube.status import StatusWriter

__all__ = [
    "TypedResource",
    "devices",
    "elastic_quotas",
    "install_crds",
    "pod_groups",
    "pod_migration_jobs",
    "reservations",
]


class _CustomResource(Protocol):
    @property
    def meta(self) -> ObjectMeta: ...

    def to_dict(self) -> dict[str, Any]: ...


T = TypeVar("T", bound=_CustomResource)


def install_crds(client: Client, directory: Path, *, timeout: float = 30.0) -> list[str]:
    """Create or update each CustomResourceDefinition in `directory/*.yaml`; wait until established.

    Raises ConfigError for a file that is not a CRD, APIError when the server refuses one.
    """
    api = client.resource(CUSTOM_RESOURCE_DEFINITIONS)
    installed = []
    for path in sorted(directory.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is None:
                continue
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                raise ConfigError(f"{path}: expected CustomResourceDefinition documents only")
            create_or_replace(api, doc)
            installed.append(doc["metadata"]["name"])
    deadline = time.monotonic() + timeout
    for name in installed:
        while not _established(api.get(name)):
            if time.monotonic() > deadline:
                raise errors.ServerError(f"CRD {name} was not established within {timeout}s")
            time.sleep(0.1)
    return installed


def _established(crd: Mapping[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


class TypedResource(Generic[T]):
    """get/list/create/update/patch/delete of one custom resource, as `apis` dataclasses."""

    def __init__(self, api: ResourceAPI, parse: Callable[[Any], T]) -> None:
        self.api = api
        self._parse = parse
        self._status = StatusWriter(api)

    def get(self, name: str, *, namespace: str = "") -> T:
        return self._parse(self.api.get(name, namespace=namespace))

    def list(self, *, namespace: str = "", label_selector: str = "") -> list[T]:
        return [self._parse(o) for o in self.api.list_all(namespace=namespace, label_selector=label_selector).items]

    def create(self, obj: T) -> T:
        return self._parse(self.api.create(obj.to_dict(), namespace=obj.meta.namespace))

    def update(self, obj: T) -> T:
        """Replace spec and metadata; conditional on `obj.meta.resource_version` when set (409 if stale)."""
        return self._parse(self.api.update(obj.to_dict(), namespace=obj.meta.namespace))

    def update_status(self, obj: T) -> T:
        """Replace status (through the status subresource where the CRD has one, else with the
        whole object); conditional like `update`."""
        if self._status.has_subresource():
            return self._parse(self.api.update_status(obj.to_dict(), namespace=obj.meta.namespace))
        return self.update(obj)

    def patch(self, name: str, patch: Patch, *, namespace: str = "", patch_type: str = MERGE_PATCH) -> T:
        return self._parse(self.api.patch(name, patch, namespace=namespace, patch_type=patch_type))

    def patch_status(self, name: str, patch: dict[str, Any], *, namespace: str = "") -> T:
        """Merge-patch status where the CRD keeps it (`kube.status.StatusWriter`)."""
        return self._parse(self._status.patch(name, patch, namespace=namespace))

    def delete(self, name: str, *, namespace: str = "") -> None:
        self.api.delete(name, namespace=namespace)

    def update_with_retry(
        self, name: str, change: Callable[[T], T | None], *, namespace: str = "", status: bool = False
    ) -> T:
        """Read, `change` (None: nothing to do) and write back, re-reading on conflict."""

        def attempt() -> T:
            current = self.get(name, namespace=namespace)
            wanted = change(current)
            if wanted is None or wanted == current:
                return current
            return self.update_status(wanted) if status else self.update(wanted)

        return retry_on_conflict(attempt)


def devices(client: Client) -> TypedResource[Device]:
    return TypedResource(client.resource(names.DEVICES), Device.from_dict)


def elastic_quotas(client: Client) -> TypedResource[ElasticQuota]:
    return TypedResource(client.resource(names.ELASTIC_QUOTAS), ElasticQuota.from_dict)


def pod_groups(client: Client) -> TypedResource[PodGroup]:
    return TypedResource(client.resource(names.POD_GROUPS), PodGroup.from_dict)


def reservations(client: Client) -> TypedResource[Reservation]:
    return TypedResource(client.resource(names.RESERVATIONS), Reservation.from_dict)


def pod_migration_jobs(client: Client) -> TypedResource[PodMigrationJob]:
    return TypedResource(client.resource(names.POD_MIGRATION_JOBS), PodMigrationJob.from_dict)
