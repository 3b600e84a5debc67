"""A claim's `status.allocation` and `status.reservedFor` (`resource.k8s.io/v1`).

The scheduler writes an AllocationResult when it places a pod using the claim; every component
that restarts reads it back to know which devices (and, on devices allowing multiple allocations,
how much of their capacity) the claim holds. Field names follow k8s.io/api/resource/v1 exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from apis import _fields as f
from apis.dra import _read as r
from apis.k8s.quantity import Quantity

__all__ = [
    "AllocationConfig",
    "AllocationResult",
    "ConsumerReference",
    "DeviceID",
    "DeviceResult",
    "node_selector_for",
]


class DeviceID(NamedTuple):
    """A device, named as kube names it: driver, pool, device."""

    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


@dataclass(frozen=True, slots=True)
class DeviceResult:
    """One `devices.results[]` entry: the device given for a request (or `request/sub-request`)."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool | None = None
    tolerations: tuple[Mapping[str, Any], ...] = ()
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    share_id: str = ""
    consumed_capacity: Mapping[str, Quantity] = field(default_factory=dict)

    @property
    def id(self) -> DeviceID:
        return DeviceID(self.driver, self.pool, self.device)

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> DeviceResult:
        d = f.mapping(raw, path, obj)
        admin = d.get("adminAccess")
        return cls(
            request=r.required_string(d, "request", path, obj),
            driver=r.required_string(d, "driver", path, obj),
            pool=r.required_string(d, "pool", path, obj),
            device=r.required_string(d, "device", path, obj),
            admin_access=f.boolean(d, "adminAccess", path, obj) if admin is not None else None,
            tolerations=tuple(
                f.mapping(t, f"{path}.tolerations[{i}]", obj)
                for i, t in enumerate(f.items(d, "tolerations", path, obj))
            ),
            binding_conditions=f.strings(d, "bindingConditions", path, obj),
            binding_failure_conditions=f.strings(d, "bindingFailureConditions", path, obj),
            share_id=f.string(d, "shareID", path, obj),
            consumed_capacity=r.qty_map(d, "consumedCapacity", path, obj),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"request": self.request, "driver": self.driver, "pool": self.pool, "device": self.device}
        if self.admin_access is not None:
            out["adminAccess"] = self.admin_access
        if self.tolerations:
            out["tolerations"] = [dict(t) for t in self.tolerations]
        if self.binding_conditions:
            out["bindingConditions"] = list(self.binding_conditions)
        if self.binding_failure_conditions:
            out["bindingFailureConditions"] = list(self.binding_failure_conditions)
        if self.share_id:
            out["shareID"] = self.share_id
        if self.consumed_capacity:
            out["consumedCapacity"] = r.qty_map_dict(self.consumed_capacity)
        return out


@dataclass(frozen=True, slots=True)
class AllocationConfig:
    """`devices.config[]`: a class's or the claim's opaque configuration, for the requests named."""

    source: str  # FromClass | FromClaim
    requests: tuple[str, ...]
    driver: str
    parameters: Any

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source}
        if self.requests:
            out["requests"] = list(self.requests)
        out["opaque"] = {"driver": self.driver, "parameters": self.parameters}
        return out


@dataclass(frozen=True, slots=True)
class AllocationResult:
    results: tuple[DeviceResult, ...] = ()
    config: tuple[AllocationConfig, ...] = ()
    #: core/v1 NodeSelector JSON, or None when the devices are reachable from every node.
    node_selector: Mapping[str, Any] | None = None
    allocation_timestamp: str = ""

    @classmethod
    def from_dict(cls, raw: object, path: str = "status.allocation", obj: str = "") -> AllocationResult:
        d = f.mapping(raw, path, obj)
        dpath = f"{path}.devices"
        dd = f.mapping(d.get("devices"), dpath, obj)
        configs = []
        for i, c in enumerate(f.items(dd, "config", dpath, obj)):
            cpath = f"{dpath}.config[{i}]"
            cd = f.mapping(c, cpath, obj)
            od = f.mapping(cd.get("opaque"), f"{cpath}.opaque", obj)
            configs.append(
                AllocationConfig(
                    source=f.string(cd, "source", cpath, obj),
                    requests=f.strings(cd, "requests", cpath, obj),
                    driver=f.string(od, "driver", f"{cpath}.opaque", obj),
                    parameters=od.get("parameters"),
                )
            )
        selector = d.get("nodeSelector")
        return cls(
            results=tuple(
                DeviceResult.from_dict(x, f"{dpath}.results[{i}]", obj)
                for i, x in enumerate(f.items(dd, "results", dpath, obj))
            ),
            config=tuple(configs),
            node_selector=None if selector is None else f.mapping(selector, f"{path}.nodeSelector", obj),
            allocation_timestamp=f.string(d, "allocationTimestamp", path, obj),
        )

    def to_dict(self) -> dict[str, Any]:
        devices: dict[str, Any] = {"results": [x.to_dict() for x in self.results]}
        if self.config:
            devices["config"] = [c.to_dict() for c in self.config]
        out: dict[str, Any] = {"devices": devices}
        if self.node_selector is not None:
            out["nodeSelector"] = dict(self.node_selector)
        if self.allocation_timestamp:
            out["allocationTimestamp"] = self.allocation_timestamp
        return out


@dataclass(frozen=True, slots=True)
class ConsumerReference:
    """A `status.reservedFor[]` entry: who uses the claim (a pod: resource `pods`, its uid)."""

    resource: str
    name: str
    uid: str
    api_group: str = ""

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> ConsumerReference:
        d = f.mapping(raw, path, obj)
        return cls(
            resource=r.required_string(d, "resource", path, obj),
            name=r.required_string(d, "name", path, obj),
            uid=r.required_string(d, "uid", path, obj),
            api_group=f.string(d, "apiGroup", path, obj),
        )

    def to_dict(self) -> dict[str, Any]:
        out = {"resource": self.resource, "name": self.name, "uid": self.uid}
        if self.api_group:
            out["apiGroup"] = self.api_group
        return out

    @classmethod
    def pod(cls, name: str, uid: str) -> ConsumerReference:
        return cls("pods", name, uid)


def node_selector_for(node_name: str) -> dict[str, Any]:
    """The selector kube writes for devices local to one node: `metadata.name In [node]`."""
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}
