"""The RBAC objects as the authorizer reads them: straight from the registry's memory."""

from __future__ import annotations

from collections.abc import Sequence

from apiserver.authz.rbac import Obj
from apiserver.catalog import RBAC_GROUP, ResourceType
from apiserver.errors import StatusError
from apiserver.registry import Registry
from apiserver.selectors import ObjectFilter

__all__ = ["RegistryPolicy"]


class RegistryPolicy:
    def __init__(self, registry: Registry) -> None:
        self._registry = registry

    def _type(self, plural: str) -> ResourceType:
        rt = self._registry.catalog.lookup(RBAC_GROUP, "v1", plural)
        assert rt is not None, plural
        return rt

    def objects(self, plural: str, namespace: str = "") -> Sequence[Obj]:
        return [e.obj for e in self._registry.snapshot(self._type(plural), ObjectFilter(namespace))]

    def get(self, plural: str, namespace: str, name: str) -> Obj | None:
        try:
            return self._registry.get(self._type(plural), namespace, name).obj
        except StatusError:
            return None
