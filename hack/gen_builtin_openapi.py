"""apiserver/schema/builtin.json: the OpenAPI definitions of the built-in kinds the server serves.

    python hack/gen_builtin_openapi.py           # print the document
    python hack/gen_builtin_openapi.py --write   # replace apiserver/schema/builtin.json

kube-apiserver publishes its kinds' schemas at `/openapi/v2` and `/openapi/v3` (`kubectl explain`,
kubectl 1.20's client-side validation, client-side apply's merge keys) and decodes writes strictly
against the same Go types (unknown fields). The official `kubernetes` Python client is generated
from that OpenAPI document and keeps, per model, each field's JSON name, type (pydantic
annotations: `Union[int, str]` is IntOrString), whether it is required and its description. This
script walks the models of every kind in `apiserver.catalog.BUILTINS` and writes them back as
OpenAPI v3 definitions under kube's names (`io.k8s.api.core.v1.PodSpec`), with `$ref`s between
them. What the client does not carry is added from the small tables below, taken from Kubernetes'
Go types: which package a shared type lives in, and the strategic-merge-patch keys of lists
(`x-kubernetes-patch-merge-key`), which kubectl's client-side apply reads from the published
schema. The server never imports `kubernetes` (only kube/ may); it reads the JSON this writes.
tests/unit/apiserver/test_builtin_schemas.py fails when the file is stale for the
installed client version.
"""

from __future__ import annotations

import argparse
import datetime
import inspect
import json
import sys
import types
import typing
from pathlib import Path
from typing import Any

import kubernetes
from kubernetes.client import models
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from apiserver.catalog import BUILTINS  # noqa: E402 - after the repository is on the path

OUT = ROOT / "apiserver" / "schema" / "builtin.json"
REF = "#/components/schemas/"

#: Definition-name prefix of each API group's types (Kubernetes' Go packages).
_PACKAGES = {
    "": "io.k8s.api.core",
    "apiextensions.k8s.io": "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions",
    "meta": "io.k8s.apimachinery.pkg.apis.meta",
}
#: The client's prefix of names that clash between groups (`CoreV1Event`, `EventsV1Event`).
_CLIENT_PREFIX = {
    "core": "",
    "events": "events.k8s.io",
    "admissionregistration": "admissionregistration.k8s.io",
    "apiextensions": "apiextensions.k8s.io",
    "rbac": "rbac.authorization.k8s.io",
    "authorization": "authorization.k8s.io",
    "policy": "policy",
    "storage": "storage.k8s.io",
    "discovery": "discovery.k8s.io",
    "resource": "resource.k8s.io",
}
#: Types of k8s.io/apimachinery's meta/v1, shared by every group.
_META = {
    "ObjectMeta",
    "ListMeta",
    "OwnerReference",
    "ManagedFieldsEntry",
    "LabelSelector",
    "LabelSelectorRequirement",
    "Condition",
    "DeleteOptions",
    "Preconditions",
    "Status",
    "StatusDetails",
    "StatusCause",
}
#: Core types that other groups embed (reached first from a workload, they are still core's).
_CORE = {"PodTemplateSpec", "PersistentVolumeClaim", "PersistentVolumeClaimSpec", "PersistentVolumeClaimStatus"}
#: Lists merged by a key in a strategic merge patch (Go struct tags `patchMergeKey`), by
#: definition and field; every `conditions` list merges by `type`.
_MERGE_KEYS = {
    "ObjectMeta": {"ownerReferences": "uid"},
    "PodSpec": {
        "containers": "name",
        "initContainers": "name",
        "ephemeralContainers": "name",
        "volumes": "name",
        "imagePullSecrets": "name",
        "hostAliases": "ip",
        "topologySpreadConstraints": "topologyKey",
        "resourceClaims": "name",
        "schedulingGates": "name",
    },
    "Container": {"ports": "containerPort", "env": "name", "volumeMounts": "mountPath", "volumeDevices": "devicePath"},
    "EphemeralContainer": {
        "ports": "containerPort",
        "env": "name",
        "volumeMounts": "mountPath",
        "volumeDevices": "devicePath",
    },
    "PodStatus": {"podIPs": "ip", "hostIPs": "ip", "resourceClaimStatuses": "name"},
    "ResourceClaimStatus": {"reservedFor": "uid"},
    "NodeStatus": {"addresses": "type"},
    "ServiceSpec": {"ports": "port"},
    "ServiceAccount": {"secrets": "name"},
    "ValidatingWebhookConfiguration": {"webhooks": "name"},
}
#: Lists of scalars merged as sets (`patchStrategy:"merge"` without a key).
_MERGE_SETS = {"ObjectMeta": {"finalizers"}, "NodeSpec": {"podCIDRs"}}
#: kube's definition of int-or-string fields, which they refer to (`kubectl explain` shows the name).
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_INT_OR_STRING_DEFINITION = {
    "description": "IntOrString is a type that can hold an int32 or a string.",
    "type": "string",
    "format": "int-or-string",
}
#: Integers are Go int32s unless listed here (by definition and field): the client has one `int`
#: for both, but kube's decoder refuses an int32 field's 3000000000, and names the type it wanted.
_INT64 = {
    "ClusterTrustBundleProjection": {"user"},
    "ConfigMapVolumeSource": {"defaultUser"},
    "Condition": {"observedGeneration"},
    "ContainerImage": {"sizeBytes"},
    "CustomResourceDefinitionCondition": {"observedGeneration"},
    "CustomResourceDefinitionStatus": {"observedGeneration"},
    "DaemonSetStatus": {"observedGeneration"},
    "DeviceAttribute": {"int", "ints"},
    "DeviceSubRequest": {"count"},
    "DeviceToleration": {"tolerationSeconds"},
    "DeploymentStatus": {"observedGeneration"},
    "DownwardAPIVolumeFile": {"user"},
    "DownwardAPIVolumeSource": {"defaultUser"},
    "JSONSchemaProps": {"maxItems", "maxLength", "maxProperties", "minItems", "minLength", "minProperties"},
    "ExactDeviceRequest": {"count"},
    "JobSpec": {"activeDeadlineSeconds"},
    "KeyToPath": {"user"},
    "LinuxContainerUser": {"gid", "supplementalGroups", "uid"},
    "NodeSwapStatus": {"capacity"},
    "ObjectMeta": {"deletionGracePeriodSeconds", "generation"},
    "PodCertificateProjection": {"user"},
    "PodCondition": {"observedGeneration"},
    "PodDisruptionBudgetStatus": {"observedGeneration"},
    "PodSecurityContext": {"fsGroup", "runAsGroup", "runAsUser", "supplementalGroups"},
    "PodSpec": {"activeDeadlineSeconds", "terminationGracePeriodSeconds"},
    "PodStatus": {"observedGeneration"},
    "Probe": {"terminationGracePeriodSeconds"},
    "ProjectedVolumeSource": {"defaultUser"},
    "ReplicaSetStatus": {"observedGeneration"},
    "ResourcePool": {"generation", "resourceSliceCount"},
    "SecretVolumeSource": {"defaultUser"},
    "SecurityContext": {"runAsGroup", "runAsUser"},
    "ServiceAccountTokenProjection": {"expirationSeconds", "user"},
    "SleepAction": {"seconds"},
    "StatefulSetStatus": {"observedGeneration"},
    "Toleration": {"tolerationSeconds"},
}
#: Fields that hold `resource.Quantity`s (alone, or as a ResourceList's values), which the client
#: types as strings: kube's decoder also takes a JSON number there (`cpu: 1`), and refuses text
#: that is not a quantity.
_QUANTITIES = {
    "CapacityRequestPolicy": {"default", "validValues"},
    "CapacityRequestPolicyRange": {"max", "min", "step"},
    "CapacityRequirements": {"requests"},
    "ContainerStatus": {"allocatedResources"},
    "Counter": {"value"},
    "DeviceCapacity": {"value"},
    "DeviceRequestAllocationResult": {"consumedCapacity"},
    "EmptyDirVolumeSource": {"sizeLimit"},
    "NodeAllocatableMappedResources": {"quantity"},
    "NodeAllocatableOverheadResources": {"perContainer", "perPod"},
    "NodeAllocatableMapping": {"capacityMultiplier", "deviceMultiplier"},
    "NodeAllocatableOverhead": {"perContainer", "perPod"},
    "NodeStatus": {"allocatable", "capacity"},
    "PersistentVolumeClaimStatus": {"allocatedResources", "capacity"},
    "PodSpec": {"overhead"},
    "PodStatus": {"allocatedResources"},
    "ResourceFieldSelector": {"divisor"},
    "ResourceRequirements": {"limits", "requests"},
    "VolumeResourceRequirements": {"limits", "requests"},
}
#: Go `[]byte` fields (alone or as a map's values), which the client leaves untyped: JSON carries
#: them as base64 strings, which kube's decoder decodes (`illegal base64 data at input byte 4`).
_BYTES = {"ConfigMap": {"binaryData"}, "Secret": {"data"}, "WebhookClientConfig": {"caBundle"}}
#: Timestamps are metav1.Time (RFC 3339) unless listed here as metav1.MicroTime, which kube
#: decodes with exactly six digits of fraction (RFC3339Micro).
_MICRO_TIMES = {
    "Event": {"eventTime"},
    "EventSeries": {"lastObservedTime"},
    "LeaseSpec": {"acquireTime", "renewTime"},
}
_TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.Time"
_TIME_DEFINITION = {
    "description": "Time is a wrapper around time.Time which supports correct marshaling to YAML and JSON.  "
    "Wrappers are provided for many of the factory methods that the time package offers.",
    "type": "string",
    "format": "date-time",
}
_MICRO_TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"
_MICRO_TIME_DEFINITION = {
    "description": "MicroTime is version of Time with microsecond level precision.",
    "type": "string",
    "format": "date-time",
}
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_QUANTITY_DEFINITION = {
    "description": "Quantity is a fixed-point representation of a number. It provides convenient "
    "marshaling/unmarshaling in JSON and YAML, in addition to String() and AsInt64() accessors.",
    "type": "string",
}


def _split(cls_name: str) -> tuple[str, str, str]:
    """`CoreV1EventSeries` -> ("core", "v1", "EventSeries"); `V1PodSpec` -> ("", "v1", "PodSpec")."""
    for i, ch in enumerate(cls_name):
        if ch == "V" and cls_name[i + 1 : i + 2].isdigit():
            prefix, rest = cls_name[:i].lower(), cls_name[i:]
            break
    else:
        raise ValueError(f"not a versioned model: {cls_name}")
    j = 1
    while j < len(rest) and not rest[j].isupper():
        j += 1
    return prefix, rest[:j].lower(), rest[j:]


def _prerelease(tp: Any) -> bool:
    """A field whose type is an alpha or beta model: a feature newer than the server's Kubernetes
    (the client is generated from a newer release), left out rather than misnamed."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return _split(tp.__name__)[1] != "v1"
    return any(_prerelease(arg) for arg in typing.get_args(tp))


def _package(group: str) -> str:
    if group in _PACKAGES:
        return _PACKAGES[group]
    return "io.k8s.api." + group.split(".", maxsplit=1)[0]


class Builder:
    """Walks models from the served kinds' roots; each model becomes one named definition."""

    def __init__(self) -> None:
        self.definitions: dict[str, dict[str, Any]] = {}
        self._names: dict[type[BaseModel], str] = {}

    def name_of(self, cls: type[BaseModel], group: str) -> str:
        """Kube's definition name: the group of the kind it was first reached from, unless the
        client's prefix or the meta/core tables say otherwise."""
        if cls not in self._names:
            prefix, version, short = _split(cls.__name__)
            if short in _META:
                group = "meta"
            elif prefix:
                group = _CLIENT_PREFIX.get(prefix, prefix)
            elif short in _CORE:
                group = ""
            self._names[cls] = f"{_package(group)}.{version}.{short}"
            self.definitions[self._names[cls]] = {}  # reserved: recursive types end here
            self.definitions[self._names[cls]] = self._model(cls, group, short)
        return self._names[cls]

    def _model(self, cls: type[BaseModel], group: str, short: str) -> dict[str, Any]:
        properties: dict[str, Any] = {}
        required: list[str] = []
        for attr, info in cls.model_fields.items():
            name = info.serialization_alias or info.alias or attr
            if _prerelease(info.annotation):
                continue
            node = self._go_types(self._annotation(info.annotation, group), short, name)
            if info.description:
                node = {**node, "description": info.description}
            properties[name] = self._patch_meta(short, name, node)
            if info.is_required():
                required.append(name)
        doc = inspect.cleandoc(cls.__doc__ or "").split("\n\n")[0].strip()
        out: dict[str, Any] = {"description": doc, "type": "object", "properties": dict(sorted(properties.items()))}
        if required:
            out["required"] = sorted(required)
        return out

    def _go_types(self, node: dict[str, Any], short: str, name: str) -> dict[str, Any]:
        """What the client's types lose of the Go field's type: int32 or int64, Quantity, Time
        or MicroTime, and []byte (also inside a list or a map: supplementalGroups, a
        ResourceList, a Secret's data)."""
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                return {**node, key: self._go_types(node[key], short, name)}
        if node.get("type") == "integer":
            return {**node, "format": "int64" if name in _INT64.get(short, ()) else "int32"}
        if node.get("x-kubernetes-preserve-unknown-fields") and name in _BYTES.get(short, ()):
            return {"type": "string", "format": "byte"}
        if node.get("type") == "string" and name in _QUANTITIES.get(short, ()):
            self.definitions[_QUANTITY] = _QUANTITY_DEFINITION
            return {"$ref": REF + _QUANTITY}
        if node.get("format") == "date-time":
            micro = name in _MICRO_TIMES.get(short, ())
            ref, definition = (_MICRO_TIME, _MICRO_TIME_DEFINITION) if micro else (_TIME, _TIME_DEFINITION)
            self.definitions[ref] = definition
            return {"$ref": REF + ref}
        return node

    @staticmethod
    def _patch_meta(short: str, name: str, node: dict[str, Any]) -> dict[str, Any]:
        key = _MERGE_KEYS.get(short, {}).get(name) or ("type" if name == "conditions" else None)
        if node.get("type") == "array" and key:
            return {**node, "x-kubernetes-patch-merge-key": key, "x-kubernetes-patch-strategy": "merge"}
        if node.get("type") == "array" and name in _MERGE_SETS.get(short, ()):
            return {**node, "x-kubernetes-patch-strategy": "merge"}
        return node

    def _annotation(self, tp: Any, group: str) -> dict[str, Any]:
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is typing.Annotated:
            return self._annotation(args[0], group)
        if origin in (typing.Union, types.UnionType):
            kept = [a for a in args if a is not type(None)]
            if len(kept) == 1:
                return self._annotation(kept[0], group)
            plain = {typing.get_args(a)[0] if typing.get_origin(a) is typing.Annotated else a for a in kept}
            if plain == {int, str}:
                self.definitions[_INT_OR_STRING] = _INT_OR_STRING_DEFINITION
                return {"$ref": REF + _INT_OR_STRING}
            return {"x-kubernetes-preserve-unknown-fields": True}
        if origin is list:
            return {"type": "array", "items": self._annotation(args[0], group)}
        if origin is dict:
            return {"type": "object", "additionalProperties": self._annotation(args[1], group)}
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return {"$ref": REF + self.name_of(tp, group)}
        return dict(_PRIMITIVES.get(tp, {"x-kubernetes-preserve-unknown-fields": True}))


_PRIMITIVES: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer", "format": "int64"},
    float: {"type": "number", "format": "double"},
    bool: {"type": "boolean"},
    datetime.datetime: {"type": "string", "format": "date-time"},
    datetime.date: {"type": "string", "format": "date"},
    bytes: {"type": "string", "format": "byte"},
    bytearray: {"type": "string", "format": "byte"},
}


def _client_class(group: str, version: str, kind: str) -> type[BaseModel]:
    prefix = next((p for p, g in _CLIENT_PREFIX.items() if g == group and p), "core" if not group else "")
    for candidate in (f"{prefix.capitalize()}{version.capitalize()}{kind}", f"{version.capitalize()}{kind}"):
        cls = getattr(models, candidate, None)
        if cls is not None:
            return typing.cast(type[BaseModel], cls)
    raise LookupError(f"no model for {group}/{version} {kind}")


def build() -> dict[str, Any]:
    builder = Builder()
    kinds: dict[str, str] = {}
    # Core kinds first: a type they reach is core's even when a workload reaches it too.
    for rt in sorted(BUILTINS, key=lambda r: (r.group != "", r.group, r.kind)):
        name = builder.name_of(_client_class(rt.group, rt.version, rt.kind), rt.group)
        kinds[f"{rt.group}/{rt.version}/{rt.kind}"] = name
        builder.definitions[name]["x-kubernetes-group-version-kind"] = [
            {"group": rt.group, "kind": rt.kind, "version": rt.version}
        ]
    return {
        "$comment": (
            "Generated by hack/gen_builtin_openapi.py from the kubernetes Python client "
            f"{kubernetes.__version__}; do not edit. Regenerate: python hack/gen_builtin_openapi.py --write"
        ),
        "client": kubernetes.__version__,
        "kinds": dict(sorted(kinds.items())),
        "definitions": dict(sorted(builder.definitions.items())),
    }


def render(doc: dict[str, Any]) -> str:
    """Compact, one definition per line (diffs stay readable)."""
    lines = [f"  {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}" for k, v in doc.items() if k != "definitions"]
    defs = [f"    {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}" for k, v in doc["definitions"].items()]
    return "{\n" + ",\n".join(lines) + ',\n  "definitions": {\n' + ",\n".join(defs) + "\n  }\n}\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {OUT.relative_to(ROOT)}")
    text = render(build())
    if parser.parse_args().write:
        OUT.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
