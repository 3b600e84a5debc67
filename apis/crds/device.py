"""The `Device` CR (scheduling.koordinator.sh/v1alpha1): one per node, listing its devices.

Written by the agent, read by the controller (node allocatable) and the scheduler (what can be
allocated). Shapes and JSON names follow Koordinator's `apis/scheduling/v1alpha1/device_types.go`
so both systems read each other's objects. `from_dict` validates and reads Koordinator's
deprecated resource names (`kubernetes.io/gpu-core`, written by koordlet before v1.2) as the
current ones; `to_dict` writes Kubernetes JSON with devices sorted by type, then minor — the
order the protocol fixes, so an unchanged node always yields the same object and the agent can
skip no-op updates.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from apis import _fields as f
from apis.errors import ValidationError
from apis.extension import deprecated, names
from apis.k8s import resources
from apis.k8s.meta import Condition, ObjectMeta

__all__ = [
    "Device",
    "DeviceInfo",
    "DeviceTopology",
    "DeviceType",
    "VirtualFunction",
    "VirtualFunctionGroup",
]


class DeviceType(enum.Enum):
    GPU = "gpu"
    RDMA = "rdma"
    FPGA = "fpga"


_TYPE_ORDER = {t: i for i, t in enumerate(DeviceType)}


@dataclass(frozen=True, slots=True)
class DeviceTopology:
    socket_id: int = 0
    node_id: int = 0  # NUMA node
    pcie_id: str = ""  # PCIe root/switch, e.g. `pci0000:3a`
    bus_id: str = ""  # PCI address, e.g. `0000:3b:00.0`

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> DeviceTopology:
        d = f.mapping(raw, path, obj)
        return cls(
            socket_id=f.integer(d, "socketID", path, obj, 0) or 0,
            node_id=f.integer(d, "nodeID", path, obj, 0) or 0,
            pcie_id=f.string(d, "pcieID", path, obj),
            bus_id=f.string(d, "busID", path, obj),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"socketID": self.socket_id, "nodeID": self.node_id, "pcieID": self.pcie_id}
        if self.bus_id:
            out["busID"] = self.bus_id
        return out


@dataclass(frozen=True, slots=True)
class VirtualFunction:
    minor: int
    bus_id: str = ""

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> VirtualFunction:
        d = f.mapping(raw, path, obj)
        minor = f.integer(d, "minor", path, obj)
        if minor is None:
            raise ValidationError(f"{path}.minor", "is required", obj=obj)
        return cls(minor, f.string(d, "busID", path, obj))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"minor": self.minor}
        if self.bus_id:
            out["busID"] = self.bus_id
        return out


@dataclass(frozen=True, slots=True)
class VirtualFunctionGroup:
    labels: Mapping[str, str] = field(default_factory=dict)
    vfs: tuple[VirtualFunction, ...] = ()

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> VirtualFunctionGroup:
        d = f.mapping(raw, path, obj)
        return cls(
            labels=f.string_map(d, "labels", path, obj),
            vfs=tuple(
                VirtualFunction.from_dict(v, f"{path}.vfs[{i}]", obj)
                for i, v in enumerate(f.items(d, "vfs", path, obj))
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        return f.drop_empty({"labels": dict(self.labels), "vfs": [v.to_dict() for v in self.vfs]})


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    type: DeviceType
    minor: int
    id: str = ""
    module_id: int | None = None
    health: bool = False
    #: Base units: percent for gpu-core/ratio/rdma/fpga, bytes for gpu-memory.
    resources: resources.ResourceList = field(default_factory=dict)
    topology: DeviceTopology | None = None
    vf_groups: tuple[VirtualFunctionGroup, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    conditions: tuple[Condition, ...] = ()

    @property
    def sort_key(self) -> tuple[int, int]:
        return (_TYPE_ORDER[self.type], self.minor)

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> DeviceInfo:
        d = f.mapping(raw, path, obj)
        type_text = f.string(d, "type", path, obj)
        try:
            dtype = DeviceType(type_text)
        except ValueError:
            raise ValidationError(f"{path}.type", f"unknown device type {type_text!r}", obj=obj) from None
        minor = f.integer(d, "minor", path, obj)
        if minor is None or minor < 0:
            raise ValidationError(f"{path}.minor", f"must be a non-negative integer, got {d.get('minor')!r}", obj=obj)
        topology = d.get("topology")
        return cls(
            type=dtype,
            minor=minor,
            id=f.string(d, "id", path, obj),
            module_id=f.integer(d, "moduleID", path, obj),
            health=f.boolean(d, "health", path, obj),
            resources=deprecated.to_current(
                resources.parse_list(d.get("resources"), field=f"{path}.resources", obj=obj)
            ),
            topology=DeviceTopology.from_dict(topology, f"{path}.topology", obj) if topology is not None else None,
            vf_groups=tuple(
                VirtualFunctionGroup.from_dict(g, f"{path}.vfGroups[{i}]", obj)
                for i, g in enumerate(f.items(d, "vfGroups", path, obj))
            ),
            labels=f.string_map(d, "labels", path, obj),
            conditions=tuple(
                Condition.from_dict(c, f"{path}.conditions[{i}]", obj)
                for i, c in enumerate(f.items(d, "conditions", path, obj))
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type.value}
        if self.labels:
            out["labels"] = dict(sorted(self.labels.items()))
        if self.id:
            out["id"] = self.id
        out["minor"] = self.minor
        if self.module_id is not None:
            out["moduleID"] = self.module_id
        out["health"] = self.health
        if self.resources:
            out["resources"] = resources.format_list(self.resources)
        if self.topology is not None:
            out["topology"] = self.topology.to_dict()
        if self.vf_groups:
            out["vfGroups"] = [g.to_dict() for g in self.vf_groups]
        if self.conditions:
            out["conditions"] = [c.to_dict() for c in self.conditions]
        return out


@dataclass(frozen=True, slots=True)
class Device:
    """A node's device inventory. `meta.name` is the node name."""

    meta: ObjectMeta
    devices: tuple[DeviceInfo, ...] = ()

    @property
    def node_name(self) -> str:
        return self.meta.name

    def of_type(self, dtype: DeviceType) -> tuple[DeviceInfo, ...]:
        return tuple(d for d in self.devices if d.type is dtype)

    @classmethod
    def from_dict(cls, raw: object) -> Device:
        """Parse and validate. Raises ValidationError naming the field, never KeyError/TypeError."""
        d = f.mapping(raw, "device")
        meta = ObjectMeta.from_dict(d.get("metadata"))
        obj = f"device {meta.name}"
        if not meta.name:
            raise ValidationError("metadata.name", "is required (the node's name)", obj=obj)
        spec = f.mapping(d.get("spec"), "spec", obj)
        devices = tuple(
            DeviceInfo.from_dict(x, f"spec.devices[{i}]", obj)
            for i, x in enumerate(f.items(spec, "devices", "spec", obj))
        )
        seen: set[tuple[DeviceType, int]] = set()
        for i, dev in enumerate(devices):
            if (dev.type, dev.minor) in seen:
                raise ValidationError(
                    f"spec.devices[{i}]", f"duplicate {dev.type.value} device with minor {dev.minor}", obj=obj
                )
            seen.add((dev.type, dev.minor))
        return cls(meta=meta, devices=tuple(sorted(devices, key=lambda x: x.sort_key)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "apiVersion": names.DEVICES.api_version,
            "kind": names.DEVICES.kind,
            "metadata": self.meta.to_dict(),
            "spec": {"devices": [x.to_dict() for x in sorted(self.devices, key=lambda x: x.sort_key)]},
        }
