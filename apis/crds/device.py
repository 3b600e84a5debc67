"""The `Device` CR (scheduling.koordinator.sh/v1alpha1): one per node, listing its devices.

Written by the agent, read by the controller (node allocatable) and the scheduler (what can be
allocated). Shapes and JSON names follow Koordinator's `apis/scheduling/v1alpha1/device_types.go`
so both systems read each other's objects. `from_dict` validates and reads Koordinator's
deprecated resource names (`kubernetes.io/gpu-core`, written by koordlet before v1.2) as the
current ones; `to_dict` writes Kubernetes JSON with devices sorted by type, then minor — the
order the protocol fixes, so an unchanged node always yields the same object and the agent can
skip no-op updates.

NVLink: Koordinator's `DeviceTopology` has no interconnect field, so which GPUs NVLink joins
travels as Tessera's own annotation on the Device, `tessera.dev/gpu-nvlink-peers` (JSON
`{"<minor>": [<peer minors>]}`), parsed into `Device.nvlink`. An annotation, not a field under
`spec.devices[].topology`: Koordinator's Go structs would drop an unknown field silently, but
the structural schema of Koordinator's own CRD would prune it on a real API server, while
annotations are never pruned and Koordinator's readers ignore keys they do not know. (Its
`scheduling.koordinator.sh/gpu-partitions` annotation is another thing: the GPU combinations a
node *permits*, which a Koordinator scheduler honours or prefers, so Tessera does not write it.)
"""

from __future__ import annotations

import enum
import itertools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
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
    #: GPU minor -> minors of the GPUs NVLink joins it to; symmetric, GPUs without NVLink left
    #: out. Owns the `tessera.dev/gpu-nvlink-peers` annotation: `from_dict` moves it out of
    #: `meta.annotations` into here and `to_dict` writes it back from here.
    nvlink: Mapping[int, frozenset[int]] = field(default_factory=dict)

    @property
    def node_name(self) -> str:
        return self.meta.name

    def of_type(self, dtype: DeviceType) -> tuple[DeviceInfo, ...]:
        return tuple(d for d in self.devices if d.type is dtype)

    def nvlinked(self, minors: Iterable[int]) -> bool:
        """Whether NVLink joins every two of these GPUs (a set fully connected by NVLink);
        True for fewer than two GPUs."""
        nvlink = self.nvlink
        return all(b in nvlink.get(a, ()) for a, b in itertools.combinations(minors, 2))

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
        nvlink: dict[int, frozenset[int]] = {}
        text = meta.annotations.get(names.ANNOTATION_GPU_NVLINK_PEERS)
        if text is not None:
            gpus = {minor for dtype, minor in seen if dtype is DeviceType.GPU}
            nvlink = _parse_nvlink(text, gpus, obj)
            others = {k: v for k, v in meta.annotations.items() if k != names.ANNOTATION_GPU_NVLINK_PEERS}
            meta = replace(meta, annotations=others)
        return cls(meta=meta, devices=tuple(sorted(devices, key=lambda x: x.sort_key)), nvlink=nvlink)

    def to_dict(self) -> dict[str, Any]:
        meta = self.meta.to_dict()
        annotations = {k: v for k, v in self.meta.annotations.items() if k != names.ANNOTATION_GPU_NVLINK_PEERS}
        if self.nvlink:
            annotations[names.ANNOTATION_GPU_NVLINK_PEERS] = _format_nvlink(self.nvlink)
        if annotations:
            meta["annotations"] = annotations
        else:
            meta.pop("annotations", None)
        return {
            "apiVersion": names.DEVICES.api_version,
            "kind": names.DEVICES.kind,
            "metadata": meta,
            "spec": {"devices": [x.to_dict() for x in sorted(self.devices, key=lambda x: x.sort_key)]},
        }


def _format_nvlink(nvlink: Mapping[int, frozenset[int]]) -> str:
    """Compact JSON, minors in order, so an unchanged node always writes the same text."""
    peers = {str(minor): sorted(nvlink[minor]) for minor in sorted(nvlink) if nvlink[minor]}
    return json.dumps(peers, separators=(",", ":"))


def _parse_nvlink(text: str, gpus: set[int], obj: str) -> dict[int, frozenset[int]]:
    """The NVLink annotation: every key and peer a GPU of this Device, none its own peer, and
    each link listed from both ends (NVML reports links between two GPUs, so a one-sided entry
    means the writer is broken). GPUs with no peers are dropped."""
    where = f"metadata.annotations[{names.ANNOTATION_GPU_NVLINK_PEERS}]"
    try:
        raw = json.loads(text)
    except ValueError as e:
        raise ValidationError(where, f"not valid JSON: {e}", obj=obj) from None
    if not isinstance(raw, dict):
        raise ValidationError(where, 'must be a JSON object {"<gpu minor>": [<peer minors>]}', obj=obj)
    out: dict[int, frozenset[int]] = {}
    for key, peers in raw.items():
        if not (key.isascii() and key.isdigit()):
            raise ValidationError(where, f"key {key!r} is not a GPU minor", obj=obj)
        minor = int(key)
        if minor not in gpus:
            raise ValidationError(where, f"GPU {minor} is not a GPU of this Device", obj=obj)
        if not isinstance(peers, list) or not all(isinstance(p, int) and not isinstance(p, bool) for p in peers):
            raise ValidationError(where, f"peers of GPU {minor} must be a list of GPU minors", obj=obj)
        for p in peers:
            if p == minor or p not in gpus:
                raise ValidationError(where, f"GPU {minor} lists {p}, which is not another GPU of this Device", obj=obj)
        if peers:
            out[minor] = frozenset(peers)
    for minor, peers in out.items():
        for p in sorted(peers):
            if minor not in out.get(p, ()):
                reason = f"GPU {minor} lists {p} as an NVLink peer, but GPU {p} does not list {minor}"
                raise ValidationError(where, reason, obj=obj)
    return out
