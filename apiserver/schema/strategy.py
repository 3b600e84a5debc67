"""The schema half of every type's strategy: unknown fields dropped (and reported), as kube does,
and built-in kinds' bodies held to their Go types.

kube-apiserver decodes a built-in kind strictly against its Go types and a custom resource against
its CRD's structural schema; either way a field the schema does not know is dropped and, under
`fieldValidation=Strict|Warn`, reported. Both use one walker here (`prune.py`) over a compiled
schema: the CRD's own (`CustomResourceStrategy`, which also defaults and validates) or Kubernetes'
definition of the built-in kind (`BuiltinStrategy`, in front of the kind's own strategy, whose
defaults and validation are kube's rules written out). `Strategies` is the registry's lookup by
storage id: each built-in type's strategy (or the default one) wrapped, and for any type a CRD
registered a `CustomResourceStrategy` that finds the schema of the version the object is written
in (each served version has its own).

Fields are dropped when a write is prepared (`prepare_create`, `prepare_update`, and
`prepare_status` for the status subresource), before the type's own strategy sees it, so neither
its defaults, the generation bump nor managed fields see them; validation then needs no second
walk. A built-in kind's write is decoded in the same walk (`prune.decode`): a field of the wrong
JSON type (`replicas: "3"`) is kube's 400 `... cannot be handled as a Deployment: json: cannot
unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32`, and nothing
is stored. Create, update, every patch (checked once applied, as an update) and server-side apply
(its configuration, `drop_unknown_applied`, and the merged object) all come through here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from apiserver.catalog import Catalog, ResourceType
from apiserver.errors import Cause, StatusError
from apiserver.schema import builtin, fieldvalidation
from apiserver.schema.gotypes import DecodeError
from apiserver.schema.prune import apply_defaults, decode, prune
from apiserver.schema.structural import Structural
from apiserver.schema.validate import validate
from apiserver.strategy import Strategy

__all__ = [
    "BuiltinStrategy",
    "CustomResourceStrategy",
    "Strategies",
    "decode_binding",
    "drop_unknown",
    "drop_unknown_applied",
]


def drop_unknown(schema: Structural, rt: ResourceType, obj: dict[str, Any], *, custom: bool) -> None:
    """Prune `obj` and report what went to the request's field validation. A custom resource's
    metadata is the registry's (kept whole at the root); a built-in kind's schema has ObjectMeta,
    and its body is decoded as kube decodes it into Go types: a field of the wrong JSON type is a
    400 whatever the field validation (kube's decode errors are always errors), before anything
    else looks at the object."""
    if custom:
        fieldvalidation.report_unknown(rt.kind, rt.version, prune(schema, obj, root=True))
    else:
        _decode(schema, rt.kind, rt.version, obj)


def _decode(schema: Structural, kind: str, version: str, obj: dict[str, Any]) -> None:
    try:
        removed = decode(schema, obj)
    except DecodeError as e:
        raise StatusError.cannot_handle(kind, version, str(e)) from None
    fieldvalidation.report_unknown(kind, version, removed)


def decode_binding(binding: Any) -> None:
    """A pod's Binding (`pods/binding`, the `bindings` collection) decoded as kube decodes it: it
    reaches the pod through `Registry.mutate`, past every strategy, and its annotations with it.
    Anything but an object is left to the binding's own checks."""
    schema = builtin.load().structural("", "v1", "Binding")
    if isinstance(binding, dict) and schema is not None:
        _decode(schema, "Binding", "v1", binding)


def drop_unknown_applied(rt: ResourceType, applied: dict[str, Any]) -> None:
    """Prune a server-side apply's configuration before its fields are counted, so a manager
    never owns a field the object cannot hold (kube drops them before the merge too)."""
    custom = bool(rt.crd_name)
    schema = rt.schema if custom else builtin.load().structural(rt.group, rt.version, rt.kind)
    if schema is not None:
        drop_unknown(schema, rt, applied, custom=custom)


class BuiltinStrategy(Strategy):
    """A built-in kind's strategy behind kube's strict decoding against the kind's definition."""

    def __init__(self, inner: Strategy, rt: ResourceType, schema: Structural) -> None:
        self._inner = inner
        self._rt = rt
        self._schema = schema
        self.name_rule = inner.name_rule
        self.restore_on_load = inner.restore_on_load

    def prepare_create(self, obj: dict[str, Any]) -> None:
        drop_unknown(self._schema, self._rt, obj, custom=False)
        self._inner.prepare_create(obj)

    def prepare_update(self, new: dict[str, Any], old: dict[str, Any]) -> None:
        drop_unknown(self._schema, self._rt, new, custom=False)
        self._inner.prepare_update(new, old)

    def prepare_status(self, new: dict[str, Any], old: dict[str, Any]) -> None:
        drop_unknown(self._schema, self._rt, new, custom=False)
        self._inner.prepare_status(new, old)

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[Cause]:
        return self._inner.validate(obj, old)

    def on_stored(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        self._inner.on_stored(old, new)


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
        drop_unknown(rt.schema, rt, obj, custom=True)
        apply_defaults(rt.schema, obj)

    def prepare_create(self, obj: dict[str, Any]) -> None:
        self._normalize(obj)

    def prepare_update(self, new: dict[str, Any], old: dict[str, Any]) -> None:
        self._normalize(new)

    def prepare_status(self, new: dict[str, Any], old: dict[str, Any]) -> None:
        self._normalize(new)

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[Cause]:
        causes = super().validate(obj, old)
        rt = self._type(obj)
        if rt is None or rt.schema is None:
            return causes
        return causes + validate(rt.schema, obj)


class Strategies(Mapping[str, Strategy]):
    """Every type's strategy by storage id: built-in ones behind their kind's schema, and a
    schema strategy for every custom resource."""

    def __init__(self, catalog: Catalog, builtin_strategies: Mapping[str, Strategy]) -> None:
        self._catalog = catalog
        schemas = builtin.load()
        self._builtin: dict[str, Strategy] = {}
        for rt in catalog.all():
            schema = None if rt.crd_name else schemas.structural(rt.group, rt.version, rt.kind)
            inner = builtin_strategies.get(rt.storage_id, Strategy())
            self._builtin[rt.storage_id] = inner if schema is None else BuiltinStrategy(inner, rt, schema)
        self._builtin.update((k, v) for k, v in builtin_strategies.items() if k not in self._builtin)
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
