"""Builders of resource.k8s.io/v1 objects as Kubernetes JSON, parsed by apis.dra (tests only)."""

from __future__ import annotations

from typing import Any

from apis.dra.claim import DeviceClass, ResourceClaim
from apis.dra.slice import ResourceSlice

DRIVER = "gpu.tessera.io"


def gpu(name: str, **attrs: Any) -> dict[str, Any]:
    """A device: attributes from keyword arguments (int/bool/str), plus extra keys via `_`."""
    extra = attrs.pop("_", {})
    out: dict[str, Any] = {"name": name}
    if attrs:
        out["attributes"] = {
            k: {"bool": v} if isinstance(v, bool) else {"int": v} if isinstance(v, int) else {"string": v}
            for k, v in attrs.items()
        }
    out.update(extra)
    return out


def make_slice(
    devices: list[dict[str, Any]],
    *,
    node: str = "n1",
    pool: str = "n1",
    name: str = "",
    driver: str = DRIVER,
    generation: int = 0,
    count: int = 1,
    counters: list[dict[str, Any]] | None = None,
    **spec: Any,
) -> ResourceSlice:
    body: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
        "devices": devices,
    }
    if node:
        body["nodeName"] = node
    if counters:
        body["sharedCounters"] = counters
    body.update(spec)
    return ResourceSlice.from_dict({"metadata": {"name": name or f"{pool}-{driver}"}, "spec": body})


def make_class(name: str = "gpu", *selectors: str, config: list[dict[str, Any]] | None = None) -> DeviceClass:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": s}} for s in selectors]}
    if config:
        spec["config"] = config
    return DeviceClass.from_dict({"metadata": {"name": name}, "spec": spec})


def exactly(name: str = "gpu", klass: str = "gpu", *selectors: str, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": klass, **fields}
    if selectors:
        body["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": name, "exactly": body}


def make_claim(
    *requests: dict[str, Any],
    name: str = "c",
    namespace: str = "default",
    uid: str = "",
    constraints: list[dict[str, Any]] | None = None,
    config: list[dict[str, Any]] | None = None,
    status: dict[str, Any] | None = None,
) -> ResourceClaim:
    devices: dict[str, Any] = {"requests": list(requests) or [exactly()]}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    raw: dict[str, Any] = {
        "metadata": {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}"},
        "spec": {"devices": devices},
    }
    if status:
        raw["status"] = status
    return ResourceClaim.from_dict(raw)
