"""CustomResourceDefinitions: validating them and registering what they serve.

Creating a CRD through `apiextensions.k8s.io/v1` makes its resource servable at once (the server
sets `Established` itself; there is no separate controller), so `kubectl apply -f deploy/crds/`
followed by `kubectl get devices` works. Deleting a CRD deletes its objects (the registry
cascades). Each version's `openAPIV3Schema` must be structural (`schema/structural.py`); objects
are pruned, defaulted and validated against it (`schema/strategy.py`).
"""

from __future__ import annotations

import re
from typing import Any

from apis.k8s.meta import now_rfc3339
from apiserver.catalog import Catalog, types_from_crd
from apiserver.errors import Cause
from apiserver.schema.structural import SchemaError, compile_schema
from apiserver.strategy import Strategy
from apiserver.validation import dns_label, dns_subdomain

__all__ = ["CRDStrategy"]

_VERSION_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


class CRDStrategy(Strategy):
    restore_on_load = True

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    def prepare_create(self, obj: dict[str, Any]) -> None:
        self._set_status(obj, None)

    def prepare_update(self, new: dict[str, Any], old: dict[str, Any]) -> None:
        self._set_status(new, old)

    @staticmethod
    def _set_status(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict) or not isinstance(spec.get("names"), dict):
            return  # validate() reports it
        names = dict(spec["names"])
        names.setdefault("listKind", f"{names.get('kind')}List")
        names.setdefault("singular", str(names.get("kind", "")).lower())
        stored = [v.get("name") for v in spec.get("versions") or () if isinstance(v, dict) and v.get("storage")]
        previous = ((old or {}).get("status") or {}).get("storedVersions") or []
        now = now_rfc3339()
        obj["status"] = {
            "acceptedNames": names,
            "conditions": [
                {
                    "type": "NamesAccepted",
                    "status": "True",
                    "reason": "NoConflicts",
                    "lastTransitionTime": now,
                    "message": "no conflicts found",
                },
                {
                    "type": "Established",
                    "status": "True",
                    "reason": "InitialNamesAccepted",
                    "lastTransitionTime": now,
                    "message": "the initial names have been accepted",
                },
            ],
            "storedVersions": sorted({*previous, *stored}),
        }

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[Cause]:
        causes = super().validate(obj, old)
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [*causes, Cause("spec", "Required value", "FieldValueRequired")]
        group = spec.get("group")
        if not isinstance(group, str) or "." not in group or dns_subdomain(group):
            causes.append(Cause("spec.group", f"Invalid value: {group!r}: should be a domain with at least one dot"))
        names = spec.get("names")
        if not isinstance(names, dict):
            return [*causes, Cause("spec.names", "Required value", "FieldValueRequired")]
        plural, kind = names.get("plural"), names.get("kind")
        if not isinstance(plural, str) or dns_label(plural):
            causes.append(Cause("spec.names.plural", f"Invalid value: {plural!r}: must be a lowercase DNS label"))
        if not isinstance(kind, str) or not kind[:1].isupper():
            causes.append(Cause("spec.names.kind", f"Invalid value: {kind!r}: must start with an upper case letter"))
        name = obj["metadata"].get("name")
        if isinstance(plural, str) and isinstance(group, str) and name != f"{plural}.{group}":
            causes.append(Cause("metadata.name", f'Invalid value: {name!r}: must be spec.names.plural+"."+spec.group'))
        if spec.get("scope") not in ("Namespaced", "Cluster"):
            causes.append(
                Cause(
                    "spec.scope",
                    f'Unsupported value: {spec.get("scope")!r}: supported values: "Cluster", "Namespaced"',
                    "FieldValueNotSupported",
                )
            )
        versions = spec.get("versions")
        if not isinstance(versions, list) or not versions:
            causes.append(Cause("spec.versions", "Required value", "FieldValueRequired"))
        else:
            for i, v in enumerate(versions):
                if (
                    not isinstance(v, dict)
                    or not isinstance(v.get("name"), str)
                    or not _VERSION_RE.fullmatch(v["name"])
                ):
                    causes.append(Cause(f"spec.versions[{i}].name", "Invalid value: must be a DNS label"))
            causes += _schema_causes(versions)
            if sum(1 for v in versions if isinstance(v, dict) and v.get("storage")) != 1:
                causes.append(Cause("spec.versions", "Invalid value: must have exactly one version marked as storage"))
        if isinstance(group, str) and isinstance(plural, str) and self._catalog.is_builtin(group, plural):
            causes.append(Cause("spec.group", f"Invalid value: {group!r}: {plural} is a built-in resource"))
        if old is not None:
            old_spec = old.get("spec") or {}
            for field in ("group", "scope"):
                if spec.get(field) != old_spec.get(field):
                    causes.append(Cause(f"spec.{field}", "Invalid value: field is immutable"))
        return causes

    def on_stored(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if new is None:
            if old is not None:
                self._catalog.unregister_crd(old["metadata"]["name"])
            return
        self._catalog.register_crd(new["metadata"]["name"], types_from_crd(new))


def _schema_causes(versions: list[Any]) -> list[Cause]:
    """Every served version needs a structural schema, as `apiextensions.k8s.io/v1` requires."""
    causes = []
    for i, v in enumerate(versions):
        if not isinstance(v, dict):
            continue
        path = f"spec.versions[{i}].schema.openAPIV3Schema"
        raw = (v.get("schema") or {}).get("openAPIV3Schema") if isinstance(v.get("schema"), dict) else None
        if raw is None:
            causes.append(Cause.required(path, "schemas are required"))
            continue
        try:
            compile_schema(raw, path)
        except SchemaError as e:
            causes.append(Cause(e.path, e.message if ":" in e.message else f"Invalid value: {e.message}"))
    return causes
