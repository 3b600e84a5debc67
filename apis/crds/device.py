"""The `Device` CR (scheduling.koordinator.sh/v1alpha1): one per node, listing its devices.

Written by the agent, read by the controller (node allocatable) and the scheduler (what can be
allocated). Shapes and JSON names follow Koordinator's `apis/scheduling/v1alpha1/device_types.go`
so both systems read each other's objects. `from_dict` validates and reads Koordinator's
deprecated resource names (`kubernetes.io/gpu-core`, written by koordlet before v1.2) as the
current ones; `to_dict` writes Kubernetes JSON with devices sorted by type, then minor — the
order the protocol fixes, so an unchanged node always yields the same object and the agent can
skip no-op updates.

What Koordinator's schema admits is never refused as a whole: entries no Tessera component can
allocate are left out of `devices` and named in `Device.ignored` (the scheduler makes that a
warning Event), so the rest of the node stays usable and a share is never given twice —
- a device of a type Tessera does not allocate (`npu`, `xpu`, ...), or with no type;
- a device without a minor (Koordinator's scheduler would dereference a nil pointer);
- a GPU with a negative minor (no `/dev/nvidiaN` to give a container);
- every entry of a (type, minor) listed more than once (which one is real cannot be known);
- a virtual function listed twice on one device (same PCI address, or same minor without one):
  the repeats.
Virtual functions are told apart by their PCI address (`busID`) as Koordinator does: koordlet
writes `minor: -1` for every RDMA VF.

NVLink: Koordinator's `DeviceTopology` has no interconnect field, so which GPUs NVLink joins
travels as Tessera's own annotation on the Device, `tessera.dev/gpu-nvlink-peers` (JSON
`{"<minor>": [<peer minors>]}`), parsed into `Device.nvlink`. An annotation, not a field under
`spec.devices[].topology`: Koordinator's Go structs would drop an unknown field silently, but
the structural schema of Koordinator's own CRD would prune it on a real API server, while
annotations are never pruned and Koordinator's readers ignore keys they do not know. (Its
`scheduling.koordinator.sh/gpu-partitions` annotation is another thing: the GPU combinations a
node *permits*, which both schedulers honour or prefer.)

GPU partitions: the `scheduling.koordinator.sh/gpu-partitions` annotation stays in
`meta.annotations` as written and is also read into `Device.gpu_partitions`
(`apis.extension.partitions`). It never makes the Device unreadable: where Koordinator's decoder
would fail the table is None (Koordinator then falls back to its built-in table too) and
`partition_problems` says why, as it names partitions left out.
"""

from __future__ import annotations

import collections
import itertools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from apis import _fields as f
from apis.errors import AnnotationError, ValidationError
from apis.extension import deprecated, names, partitions
from apis.extension.devicetypes import DeviceType
from apis.k8s import resources
from apis.k8s.meta import Condition, ObjectMeta

__all__ = [
    "Device",
    "DeviceInfo",
    "DeviceTopology",
    "DeviceType",
    "VirtualFunction",
    "VirtualFunctionGroup",
    "vf_key",
]


_TYPE_ORDER = {t: i for i, t in enumerate(DeviceType)}
_TYPES = frozenset(t.value for t in DeviceType)
_KNOWN = ", ".join(t.value for t in DeviceType)


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


def vf_key(bus_id: str, minor: int) -> str:
    """How a virtual function is identified: its PCI address, or its minor when it has none
    (koordlet writes `minor: -1` for every VF, so the address is what tells them apart)."""
    return bus_id or f"minor:{minor}"


@dataclass(frozen=True, slots=True)
class VirtualFunction:
    minor: int
    bus_id: str = ""

    @property
    def key(self) -> str:
        return vf_key(self.bus_id, self.minor)

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> VirtualFunction:
        d = f.mapping(raw, path, obj)
        return cls(f.integer(d, "minor", path, obj, 0) or 0, f.string(d, "busID", path, obj))

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
    def from_dict(
        cls, raw: object, path: str, obj: str = "", *, seen: set[str] | None = None, ignored: list[str] | None = None
    ) -> VirtualFunctionGroup:
        """`seen`: the keys of the device's VFs read so far; a repeat is left out and named in
        `ignored`."""
        d = f.mapping(raw, path, obj)
        seen = set() if seen is None else seen
        vfs = []
        for i, v in enumerate(f.items(d, "vfs", path, obj)):
            vf = VirtualFunction.from_dict(v, f"{path}.vfs[{i}]", obj)
            if vf.key in seen:
                if ignored is not None:
                    ignored.append(f"{path}.vfs[{i}]: virtual function {vf.key} is listed twice")
                continue
            seen.add(vf.key)
            vfs.append(vf)
        return cls(labels=f.string_map(d, "labels", path, obj), vfs=tuple(vfs))

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

    @staticmethod
    def unusable(raw: object, path: str, obj: str = "") -> str:
        """Why Tessera cannot allocate this entry (module docstring), or "" when it can."""
        d = f.mapping(raw, path, obj)
        type_text = f.string(d, "type", path, obj)
        if type_text not in _TYPES:
            return f"{path}: device type {type_text!r} is not one Tessera allocates ({_KNOWN})"
        minor = f.integer(d, "minor", path, obj)
        if minor is None:
            return f"{path}: {type_text} device has no minor"
        if minor < 0 and type_text == DeviceType.GPU.value:
            return f"{path}: GPU minor {minor} is negative (no /dev/nvidia{minor})"
        return ""

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "", *, ignored: list[str] | None = None) -> DeviceInfo:
        """One usable entry (`unusable` says ""); repeated VFs are left out and named in `ignored`.
        Raises ValidationError for a field of the wrong type."""
        d = f.mapping(raw, path, obj)
        reason = cls.unusable(d, path, obj)
        if reason:
            raise ValidationError(path, reason, obj=obj)
        dtype = DeviceType(f.string(d, "type", path, obj))
        minor = f.integer(d, "minor", path, obj)
        assert minor is not None  # unusable() checked
        topology = d.get("topology")
        seen: set[str] = set()
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
                VirtualFunctionGroup.from_dict(g, f"{path}.vfGroups[{i}]", obj, seen=seen, ignored=ignored)
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
    #: Entries of `spec.devices` left out because Tessera cannot allocate them, one sentence
    #: each (module docstring); not written back by `to_dict`.
    ignored: tuple[str, ...] = field(default=(), compare=False)
    #: The `gpu-partitions` annotation read (None: absent, empty or malformed); derived from
    #: `meta.annotations`, which `to_dict` writes.
    gpu_partitions: partitions.PartitionTable | None = field(default=None, compare=False)
    #: Why the annotation, or some of its partitions, cannot be used, one sentence each.
    partition_problems: tuple[str, ...] = field(default=(), compare=False)

    @property
    def partition_policy(self) -> partitions.PartitionPolicy:
        """The Device's `gpu-partition-policy` label (it applies to the Device's own table)."""
        return partitions.policy_from_labels(self.meta.labels)

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
        ignored: list[str] = []
        read: list[tuple[int, DeviceInfo]] = []
        for i, x in enumerate(f.items(spec, "devices", "spec", obj)):
            reason = DeviceInfo.unusable(x, f"spec.devices[{i}]", obj)
            if reason:
                ignored.append(reason)
                continue
            read.append((i, DeviceInfo.from_dict(x, f"spec.devices[{i}]", obj, ignored=ignored)))
        counts = collections.Counter((dev.type, dev.minor) for _, dev in read)
        for i, dev in read:
            if counts[(dev.type, dev.minor)] > 1:
                ignored.append(f"spec.devices[{i}]: {dev.type.value} minor {dev.minor} is listed more than once")
        devices = tuple(dev for _, dev in read if counts[(dev.type, dev.minor)] == 1)
        nvlink: dict[int, frozenset[int]] = {}
        text = meta.annotations.get(names.ANNOTATION_GPU_NVLINK_PEERS)
        if text is not None:
            # Checked against every GPU listed (a GPU left out for a repeated minor is still a
            # GPU of the node); links of GPUs left out are then dropped.
            listed = {dev.minor for _, dev in read if dev.type is DeviceType.GPU}
            kept = {dev.minor for dev in devices if dev.type is DeviceType.GPU}
            nvlink = {
                minor: frozenset(p for p in peers if p in kept)
                for minor, peers in _parse_nvlink(text, listed, obj).items()
                if minor in kept and peers & kept
            }
            others = {k: v for k, v in meta.annotations.items() if k != names.ANNOTATION_GPU_NVLINK_PEERS}
            meta = replace(meta, annotations=others)
        table, problems = _read_partitions(meta.annotations, obj)
        return cls(
            meta=meta,
            devices=tuple(sorted(devices, key=lambda x: x.sort_key)),
            nvlink=nvlink,
            ignored=tuple(ignored),
            gpu_partitions=table,
            partition_problems=problems,
        )

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


def _read_partitions(
    annotations: Mapping[str, str], obj: str
) -> tuple[partitions.PartitionTable | None, tuple[str, ...]]:
    """The Device's partition table and its problems; an empty value is no table (Koordinator)."""
    text = annotations.get(names.ANNOTATION_GPU_PARTITIONS)
    if not text:
        return None, ()
    try:
        return partitions.decode_table(text, obj=obj)
    except AnnotationError as e:
        return None, (f"{e.reason}: the Device's GPU partitions are not used",)


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
