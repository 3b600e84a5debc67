"""The strategy of every custom resource: prune, default and validate against its CRD's schema.

The registry looks strategies up by storage id; `Strategies` answers for the built-in types from
a fixed table and, for any type a CRD registered, with a `CustomResourceStrategy` that finds the
schema of the version the object is written in (each served version has its own).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from apiserver.catalog import Catalog, ResourceType
from apiserver.errors import Cause
from apiserver.schema import fieldvalidation
from apiserver.schema.prune import apply_defaults, prune
from apiserver.schema.validate import validate
from apiserver.strategy import Strategy

__all__ = ["CustomResourceStrategy", "Strategies"]


class CustomResourceStrategy(Strategy):
    def __init__(self, catalog: Catalog, plural: str) -> None:
        self._catalog = catalog
        self._plural = plural

    def _type(self, obj: Mapping[str, Any]) -> ResourceType | None:
        group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
        return self._catalog.lookup(group, version, self._plural)

    def _normalize(self, obj: dict[str, Any]) -> None:
        rt = self._type(obj)
        if rt is None or rt.schema is None:
            return
        removed = prune(rt.schema, obj)
        fieldvalidation.report_unknown(rt.kind, rt.version, removed)
        apply_defaults(rt.schema, obj)

    def prepare_create(self, obj: dict[str, Any]) -> None:
        self._normalize(obj)

    def prepare_update(self, new: dict[str, Any], old: dict[str, Any]) -> None:
        self._normalize(new)

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[Cause]:
        causes = super().validate(obj, old)
        rt = self._type(obj)
        if rt is None or rt.schema is None:
            return causes
        prune(rt.schema, obj)  # a status write skips prepare_update; pruning twice changes nothing
        apply_defaults(rt.schema, obj)
        return causes + validate(rt.schema, obj)


class Strategies(Mapping[str, Strategy]):
    """Built-in strategies by storage id, and a schema strategy for every custom resource."""

    def __init__(self, catalog: Catalog, builtin: Mapping[str, Strategy]) -> None:
        self._catalog = catalog
        self._builtin = dict(builtin)
        self._custom: dict[str, CustomResourceStrategy] = {}
        self._generation = -1
        self._plurals: dict[str, str] = {}

    def _custom_plurals(self) -> dict[str, str]:
        if self._generation != self._catalog.generation:
            self._plurals = {rt.storage_id: rt.plural for rt in self._catalog.all() if rt.crd_name}
            self._generation = self._catalog.generation
        return self._plurals

    def __getitem__(self, storage_id: str) -> Strategy:
        strategy = self._builtin.get(storage_id)
        if strategy is not None:
            return strategy
        plural = self._custom_plurals().get(storage_id)
        if plural is None:
            raise KeyError(storage_id)
        custom = self._custom.get(storage_id)
        if custom is None:
            custom = self._custom[storage_id] = CustomResourceStrategy(self._catalog, plural)
        return custom

    def __iter__(self) -> Iterator[str]:
        return iter({*self._builtin, *self._custom_plurals()})

    def __len__(self) -> int:
        return len({*self._builtin, *self._custom_plurals()})
