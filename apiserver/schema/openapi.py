"""Publishing custom resources' schemas as OpenAPI definitions, named and shaped as kube does.

`kubectl explain` finds a kind's schema by its `x-kubernetes-group-version-kind` extension:
kubectl 1.27+ in the `/openapi/v3/<group-version>` document's `components.schemas`, older
kubectl (Debian's 1.20) in `/openapi/v2`'s `definitions`. Both name a CRD's kind by the reversed
group (`sh.koordinator.scheduling.v1alpha1.Device`) and point `metadata` at ObjectMeta, as
kube-apiserver does. The v2 form drops what Swagger 2.0 cannot say (nullable, anyOf/oneOf/not,
the types of int-or-string and of fields that keep unknown fields), because kubectl 1.20 also
validates manifests against v2 on the client and must not refuse what the server accepts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from apiserver.catalog import ResourceType

__all__ = ["OBJECT_META", "definition_name", "v2_definitions", "v3_schemas"]

OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_META_REF = "#/components/schemas/" + OBJECT_META
_V2_META_REF = "#/definitions/" + OBJECT_META
_DROPPED_IN_V2 = ("nullable", "anyOf", "oneOf", "allOf", "not")


def _strings(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _string_map(description: str) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": {"type": "string", "default": ""}, "description": description}


_OBJECT_META: dict[str, Any] = {
    "description": "ObjectMeta is metadata that all persisted resources must have, "
    "which includes all objects users must create.",
    "type": "object",
    "properties": {
        "annotations": _string_map("Annotations is an unstructured key value map stored with a resource."),
        "creationTimestamp": {**_strings("Time at which this object was created (RFC3339)."), "format": "date-time"},
        "deletionGracePeriodSeconds": {
            "type": "integer",
            "format": "int64",
            "description": "Seconds allowed for this object to gracefully terminate before it is removed.",
        },
        "deletionTimestamp": {**_strings("When this resource will be deleted (RFC3339)."), "format": "date-time"},
        "finalizers": {
            "type": "array",
            "items": {"type": "string", "default": ""},
            "description": "Must be empty before the object is deleted from the registry.",
        },
        "generateName": _strings("An optional prefix used to generate a unique name if name is not provided."),
        "generation": {
            "type": "integer",
            "format": "int64",
            "description": "A sequence number representing a specific generation of the desired state.",
        },
        "labels": _string_map("Map of string keys and values that can be used to organize and categorize objects."),
        "managedFields": {
            "type": "array",
            "items": {"type": "object"},
            "description": "Maps workflow-id and version to the set of fields that are managed by that workflow.",
        },
        "name": _strings("Name must be unique within a namespace."),
        "namespace": _strings("Namespace defines the space within which each name must be unique."),
        "ownerReferences": {
            "type": "array",
            "items": {"type": "object"},
            "description": "List of objects depended by this object.",
        },
        "resourceVersion": _strings("An opaque value that represents the internal version of this object."),
        "selfLink": _strings("Deprecated: selfLink is a legacy read-only field that is no longer populated."),
        "uid": _strings("UID is the unique in time and space value for this object."),
    },
}

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


def v3_schemas(types: Iterable[ResourceType]) -> dict[str, Any]:
    """`components.schemas` of one group-version's v3 document."""
    published = _published(types)
    if not published:
        return {}
    schemas = {definition_name(rt): _root(rt, _META_REF) for rt in published}
    schemas[OBJECT_META] = _OBJECT_META
    return schemas


def _to_v2(node: Any) -> Any:
    if isinstance(node, list):
        return [_to_v2(n) for n in node]
    if not isinstance(node, Mapping):
        return node
    out = {k: _to_v2(v) for k, v in node.items() if k not in _DROPPED_IN_V2}
    if out.get("$ref", "").startswith("#/components/schemas/"):
        out["$ref"] = "#/definitions/" + out["$ref"].removeprefix("#/components/schemas/")
    if node.get("nullable") is True or node.get("x-kubernetes-int-or-string") is True:
        out.pop("type", None)
    if node.get("x-kubernetes-preserve-unknown-fields") is True:
        out.pop("properties", None)
        out.pop("required", None)
    return out


def v2_definitions(types: Iterable[ResourceType]) -> dict[str, Any]:
    """`definitions` of the v2 document: every custom kind, across versions."""
    published = _published(types)
    if not published:
        return {}
    definitions = {definition_name(rt): _to_v2(_root(rt, _V2_META_REF)) for rt in published}
    definitions[OBJECT_META] = _OBJECT_META
    return definitions
