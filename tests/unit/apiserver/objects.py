"""The API server tests' objects: a registry of resource types, pods and CRDs as clients send
them, and an authorizer whose answers a test fixes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from apiserver.catalog import Catalog, ResourceType
from apiserver.crds import CRDStrategy
from apiserver.pods import PodStrategy
from apiserver.registry import CRDS, Registry
from apiserver.schema.strategy import Strategies
from apiserver.strategy import NamespaceStrategy
from apiserver.watch import WatchHub


def make_registry(watch_window: int = 1000) -> Registry:
    catalog = Catalog()
    builtin = {"pods": PodStrategy(), "namespaces": NamespaceStrategy(), CRDS: CRDStrategy(catalog)}
    strategies = Strategies(catalog, builtin)
    return Registry(catalog, WatchHub(watch_window, 0), None, strategies)


def rt(registry: Registry, plural: str, group: str = "", version: str = "v1") -> ResourceType:
    found = registry.catalog.lookup(group, version, plural)
    assert found is not None, plural
    return found


def make_pod(
    name: str = "p", *, image: str = "img:1", labels: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"containers": [{"name": "main", "image": image}], **spec},
    }


#: A schema that keeps whatever it is given (tests about the registry, not about schemas).
OPEN_SCHEMA = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def make_crd(plural: str = "widgets", group: str = "example.com", *, scope: str = "Namespaced") -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {"plural": plural, "kind": plural.capitalize()[:-1], "singular": plural[:-1]},
            "scope": scope,
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": OPEN_SCHEMA},
                }
            ],
        },
    }


PodFactory = Callable[..., dict[str, Any]]


class StaticPolicy:
    """The RBAC objects a test starts from, by plural (the registry's role in the server)."""

    def __init__(self, objects: dict[str, list[dict[str, Any]]]) -> None:
        self._objects = objects

    def objects(self, plural: str, namespace: str = "") -> Sequence[dict[str, Any]]:
        return [o for o in self._objects.get(plural, []) if o["metadata"].get("namespace", "") == namespace]

    def get(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        found = [o for o in self.objects(plural, namespace) if o["metadata"]["name"] == name]
        return found[0] if found else None
