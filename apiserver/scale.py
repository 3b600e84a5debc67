"""The `scale` subresource of Deployments, ReplicaSets and StatefulSets (`autoscaling/v1` Scale).

`kubectl scale` reads and writes a workload's replicas through it: 1.20 GETs the Scale and PUTs
it back, newer versions PATCH it. A Scale is a view: `spec.replicas` is the workload's, its status
the workload's status.replicas and selector (in string form). Writing it changes only the
workload's spec.replicas, through the ordinary update (so generation, validation, resourceVersion
preconditions and watch events are those of any update).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apis.k8s.workloads import selector_string
from apiserver.catalog import ResourceType
from apiserver.errors import Cause, StatusError
from apiserver.registry import MERGE_PATCH, Entry, Registry, apply_patch
from apiserver.schema import gotypes
from apiserver.schema.structural import Structural, compile_schema

__all__ = ["patch_scale", "scale_of", "update_scale"]

#: A Scale's two typed levels, for kube's decoding of one (`gotypes`): autoscaling/v1 is not a
#: kind the server stores, so it has no definition in `builtin.json`.
_SPEC = compile_schema({"type": "object"}, definition="io.k8s.api.autoscaling.v1.ScaleSpec")
_REPLICAS = compile_schema({"type": "integer", "format": "int32"})


def _decoded(schema: Structural, value: Any, owner: str, field: str) -> None:
    """Raise kube's 400 when `value` does not decode into the Scale's field (a null is absent)."""
    if value is not None and (refused := gotypes.refusal(schema, value)) is not None:
        raise StatusError.cannot_handle("Scale", "v1", refused.message(owner, field))


def scale_of(entry: Entry) -> dict[str, Any]:
    """The Scale view of a stored workload."""
    obj = entry.obj
    meta = obj["metadata"]
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"],
            "namespace": meta.get("namespace", ""),
            "uid": meta["uid"],
            "resourceVersion": str(entry.rv),
            "creationTimestamp": meta.get("creationTimestamp"),
        },
        "spec": {"replicas": spec.get("replicas", 0)},
        "status": {"replicas": status.get("replicas", 0), "selector": selector_string(spec.get("selector"))},
    }


def _replicas(scale: Any, name: str) -> tuple[int, str]:
    """(spec.replicas, metadata.resourceVersion) of a Scale a client sent. Raises StatusError."""
    if not isinstance(scale, Mapping) or scale.get("kind") not in (None, "Scale"):
        raise StatusError.bad_request("the body must be a Scale object")
    meta = scale.get("metadata") or {}
    if not isinstance(meta, Mapping) or meta.get("name", name) not in ("", name):
        raise StatusError.bad_request("the name of the Scale does not match the name on the URL")
    _decoded(_SPEC, scale.get("spec"), "Scale", "spec")
    replicas = (scale.get("spec") or {}).get("replicas")
    _decoded(_REPLICAS, replicas, "ScaleSpec", "spec.replicas")
    replicas = replicas or 0
    if replicas < 0:
        cause = Cause.invalid("spec.replicas", str(replicas), "must be greater than or equal to 0")
        raise StatusError.invalid("Scale", name, [cause], group="autoscaling")
    return replicas, str(meta.get("resourceVersion") or "")


async def update_scale(
    registry: Registry, rt: ResourceType, namespace: str, name: str, scale: Any, *, dry_run: bool
) -> dict[str, Any]:
    """PUT of a Scale: set the workload's replicas (honouring the Scale's resourceVersion)."""
    replicas, rv = _replicas(scale, name)
    change: dict[str, Any] = {"spec": {"replicas": replicas}}
    if rv:
        change["metadata"] = {"resourceVersion": rv}
    entry = await registry.patch(rt, namespace, name, MERGE_PATCH, change, dry_run=dry_run)
    return scale_of(entry)


async def patch_scale(
    registry: Registry, rt: ResourceType, namespace: str, name: str, patch: tuple[str, Any], *, dry_run: bool
) -> dict[str, Any]:
    """PATCH of a Scale (`patch`: its type and body): it applies to the Scale view, then as a PUT
    of the result."""
    patch_type, body = patch
    current = scale_of(registry.get(rt, namespace, name))
    patched = apply_patch(current, patch_type, body, kind="Scale", strategic=True, resource=rt.plural, name=name)
    return await update_scale(registry, rt, namespace, name, patched, dry_run=dry_run)
