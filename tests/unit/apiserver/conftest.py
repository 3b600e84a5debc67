"""Factories for the API server's in-memory parts (no storage, no HTTP)."""

from collections.abc import Callable
from typing import Any

import pytest

from apiserver.catalog import Catalog, ResourceType
from apiserver.crds import CRDStrategy
from apiserver.pods import PodStrategy
from apiserver.registry import CRDS, Registry
from apiserver.strategy import NamespaceStrategy
from apiserver.watch import WatchHub


def make_registry(watch_window: int = 1000) -> Registry:
    catalog = Catalog()
    strategies = {"pods": PodStrategy(), "namespaces": NamespaceStrategy(), CRDS: CRDStrategy(catalog)}
    return Registry(catalog, WatchHub(watch_window, 0), None, strategies)


@pytest.fixture
def registry() -> Registry:
    return make_registry()


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


def make_crd(plural: str = "widgets", group: str = "example.com", *, scope: str = "Namespaced") -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {"plural": plural, "kind": plural.capitalize()[:-1], "singular": plural[:-1]},
            "scope": scope,
            "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}}}],
        },
    }


PodFactory = Callable[..., dict[str, Any]]
