"""Publishing the served kinds' schemas as OpenAPI definitions, named and shaped as kube does.

`kubectl explain` finds a kind's schema by its `x-kubernetes-group-version-kind` extension:
kubectl 1.27+ in the `/openapi/v3/<group-version>` document's `components.schemas`, older
kubectl (Debian's 1.20) in `/openapi/v2`'s `definitions`. Built-in kinds are published under
kube's names with what they refer to (`builtin.py`); a CRD's kind is named by the reversed
group (`sh.koordinator.scheduling.v1alpha1.Device`) and points `metadata` at the built-in
ObjectMeta, as kube-apiserver does. The v2 form drops what Swagger 2.0 cannot say (nullable, anyOf/oneOf/not,
the types of int-or-string and of fields that keep unknown fields), because kubectl 1.20 also
validates manifests against v2 on the client and must not refuse what the server accepts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from apiserver.catalog import ResourceType
from apiserver.schema.builtin import REF_PREFIX, load

__all__ = ["OBJECT_META", "definition_name", "v2_definitions", "v3_schemas"]

OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_META_REF = REF_PREFIX + OBJECT_META
_V2_META_REF = "#/definitions/" + OBJECT_META
_DROPPED_IN_V2 = ("nullable", "anyOf", "oneOf", "allOf", "not")


def _strings(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


_API_VERSION = _strings(
    "APIVersion defines the versioned schema of this representation of an object. Servers should convert "
    "recognized schemas to the latest internal value, and may reject unrecognized values."
)
_KIND = _strings(
    "Kind is a string value representing the REST resource this object represents. Servers may infer this "
    "from the endpoint the client submits requests to. Cannot be updated. In CamelCase."
)


def definition_name(rt: ResourceType) -> str:
    """`scheduling.koordinator.sh/v1alpha1 Device` → `sh.koordinator.scheduling.v1alpha1.Device`."""
    return ".".join([*reversed(rt.group.split(".")), rt.version, rt.kind])


def _root(rt: ResourceType, meta_ref: str) -> dict[str, Any]:
    assert rt.schema is not None
    root = dict(rt.schema.raw)
    properties = dict(root.get("properties") or {})
    properties["apiVersion"] = {**_API_VERSION, **(properties.get("apiVersion") or {})}
    properties["kind"] = {**_KIND, **(properties.get("kind") or {})}
    properties["metadata"] = {"$ref": meta_ref, "description": "Standard object's metadata."}
    root["properties"] = properties
    root["x-kubernetes-group-version-kind"] = [{"group": rt.group, "kind": rt.kind, "version": rt.version}]
    return root


def _published(types: Iterable[ResourceType]) -> list[ResourceType]:
    return sorted((rt for rt in types if rt.schema is not None), key=definition_name)


def _definitions(types: Iterable[ResourceType], meta_ref: str) -> dict[str, Any]:
    """Every served kind's definition and what it refers to: built-in kinds' from `builtin.json`,
    custom kinds' from their CRDs (pointing at the built-in ObjectMeta)."""
    types = list(types)
    builtin = load()
    roots = {builtin.root(rt.group, rt.version, rt.kind) for rt in types if not rt.crd_name}
    custom = _published(types)
    if custom:
        roots.add(OBJECT_META)
    schemas: dict[str, Any] = dict(builtin.closure(sorted(r for r in roots if r is not None)))
    schemas.update({definition_name(rt): _root(rt, meta_ref) for rt in custom})
    return dict(sorted(schemas.items()))


def v3_schemas(types: Iterable[ResourceType]) -> dict[str, Any]:
    """`components.schemas` of one group-version's v3 document."""
    return _definitions(types, _META_REF)


def _to_v2(node: Any) -> Any:
    """One schema node as Swagger 2.0 can say it. Only schema-valued keys are walked: a
    `properties` map's keys are field names (JSONSchemaProps has fields named `anyOf`, `not`,
    `nullable` and `$ref`), and `default`/`enum`/`example` values are data."""
    if not isinstance(node, Mapping):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED_IN_V2:
            continue
        if key == "properties" and isinstance(value, Mapping):
            out[key] = {name: _to_v2(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = _to_v2(value)
        else:
            out[key] = value
    ref = out.get("$ref")
    if isinstance(ref, str) and ref.startswith(REF_PREFIX):  # a property may be named "$ref"
        out["$ref"] = "#/definitions/" + ref.removeprefix(REF_PREFIX)
    if node.get("nullable") is True or node.get("x-kubernetes-int-or-string") is True:
        out.pop("type", None)
    if node.get("x-kubernetes-preserve-unknown-fields") is True:
        out.pop("properties", None)
        out.pop("required", None)
    return out


def v2_definitions(types: Iterable[ResourceType]) -> dict[str, Any]:
    """`definitions` of the v2 document: every served kind, across versions."""
    return {name: _to_v2(schema) for name, schema in _definitions(types, _V2_META_REF).items()}
