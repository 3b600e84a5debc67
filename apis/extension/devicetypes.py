"""The device types of the protocol, as one table: every component reads a device type here.

One `DeviceTypeSpec` per `DeviceType` says everything the rest of Tessera needs to know of it,
and says who reads each part:

- `resources`: the resource names a pod (or a quota) asks for it with, each with its `Unit`
  (percent of a device, bytes, whole devices, "spread over N") and Koordinator's deprecated
  `kubernetes.io/` spelling. Read by `apis.extension.deprecated` (the parse boundary),
  `devicerequest`, the scheduler cache (which types a bound pod holds), NodeResourcesFit (which
  leaves them to DeviceShare), the API server's quantity checks and the dashboard.
- `request_rule`: how a request in those names becomes devices — the GPU rules, or one
  percent-of-a-device resource (Koordinator's default device handler). Read by `devicerequest`
  and DeviceShare's allocator (`allocateStrategy` applies to the second kind only).
- the row's position in `TABLE`: the allocation order. DeviceShare places the types one pod asks
  for in this order, after a joint allocation's primary (`ALLOCATION_ORDER`).
- `capacity`: what one healthy device of it offers on the Device CR (the agent writes it).
- `allocatable`: what its healthy devices add to their Node's allocatable (the controller,
  `controller/noderesources`, publishes it and owns exactly those names).
- `discovery`: how the agent finds it.
- each resource's `counts`: what it counts as in elastic quotas (`apis.extension.quotacount`).

So a new type is one entry here (and its `DeviceType` member) plus what has to be code: its
allocator in DeviceShare if its requests are not one percent-of-a-device resource, and its
discovery in the agent (docs/dev/architecture.md, "How to add a device type", lists the files).
Every `DeviceType` must have exactly one entry (`check`, run on import), so no reader can meet a type
it does not know: the scheduler cache cannot take an unknown device resource for a GPU, and
DeviceShare cannot skip a requested type (it allocates every type of `ALLOCATION_ORDER`).

FPGA is in the table as Koordinator has it (its `DeviceType` `fpga`, `koordinator.sh/fpga`, the
default device handler of its DeviceShare): scheduled from the entries of a Device CR that some
other reporter writes, and nothing more. Koordinator's koordlet discovers no FPGA, its manager
publishes no `koordinator.sh/fpga` allocatable and its runtime hooks inject no FPGA device, and
Tessera does the same (`Discovery.NONE`, an empty `Allocatable`): a cluster that mixes both keeps
one owner for each Node resource, and Tessera claims no FPGA support that Koordinator lacks.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from apis.extension import names

__all__ = [
    "ALLOCATION_ORDER",
    "BYTE_RESOURCES",
    "DEPRECATED_NAMES",
    "PERCENT_PER_DEVICE",
    "PERCENT_RESOURCES",
    "RESOURCE_NAMES",
    "TABLE",
    "WHOLE_GPU_RESOURCES",
    "Allocatable",
    "DeviceResource",
    "DeviceType",
    "DeviceTypeSpec",
    "Discovery",
    "RequestRule",
    "Unit",
    "check",
    "spec",
    "type_of",
]

#: One whole device in the percent units (gpu-core, gpu-memory-ratio, koordinator.sh/gpu, rdma, fpga).
PERCENT_PER_DEVICE: Final = 100


class DeviceType(enum.Enum):
    """The `type` of a Device CR entry and the keys of `device-allocated` (Koordinator's
    `schedulingv1alpha1.DeviceType`). Each member has its row in `TABLE`."""

    GPU = "gpu"
    RDMA = "rdma"
    FPGA = "fpga"


class Unit(enum.Enum):
    """What an amount of a device resource means."""

    #: Percent of one device: 100 = one whole device; above 100, a multiple of 100 whole devices.
    PERCENT = "percent of a device"
    #: Bytes (of GPU memory), per device once spread.
    BYTES = "bytes"
    #: A number of whole devices (a device plugin's `nvidia.com/gpu: 2`).
    COUNT = "whole devices"
    #: Over how many devices the other amounts are spread (`koordinator.sh/gpu.shared`).
    SPREAD = "spread over N devices"


class RequestRule(enum.Enum):
    """How a pod's request in a type's names becomes devices (`apis.extension.devicerequest`)."""

    #: The GPU rules (protocol.md, "Request rules"): the allowed combinations of whole-GPU names,
    #: `koordinator.sh/gpu`, gpu-core, gpu-memory(-ratio) and gpu.shared.
    GPU = "gpu"
    #: One percent-of-a-device resource (Koordinator's default device handler): at most 100 or a
    #: multiple of 100; a share below 100 is one virtual function where the device has them.
    PERCENT = "percent"


class Discovery(enum.Enum):
    """How the agent finds a type's devices on its node."""

    #: NVML (`agent/discovery/nvml.py`), or a simulated profile (`--simulate-devices`).
    NVML = "NVML, or a simulated profile"
    #: sysfs (network-class PCI functions with an InfiniBand device) and netlink
    #: (`agent/discovery/rdma.py`), or a simulated profile.
    SYSFS = "sysfs and netlink, or a simulated profile"
    #: Not discovered by Tessera's agent: scheduled from Device CR entries another reporter writes.
    NONE = "not discovered (a Device CR another reporter writes)"


@dataclass(frozen=True, slots=True)
class DeviceResource:
    """One resource name a pod may ask for a device type with."""

    name: str
    unit: Unit
    #: Koordinator's spelling before v1.2 (`kubernetes.io/gpu-core`), read as `name` where
    #: `apis` parses objects ("": none).
    deprecated: str = ""
    #: What one unit of it counts as in elastic quotas: (counted name, factor) pairs; None: the
    #: resource counts as itself (`apis.extension.quotacount`).
    counts: tuple[tuple[str, int], ...] | None = None

    @property
    def counted(self) -> tuple[tuple[str, int], ...]:
        return ((self.name, 1),) if self.counts is None else self.counts


@dataclass(frozen=True, slots=True)
class Allocatable:
    """What a type's healthy devices add to their Node's allocatable (empty: nothing published).

    Never a deprecated spelling, and nothing for a name no healthy device offers.
    """

    #: Summed over the healthy devices, each device's own amount (every healthy device must
    #: offer a positive amount of each: the controller refuses a Device that does not).
    summed: tuple[str, ...] = ()
    #: A fixed amount per healthy device, whatever the device says (RDMA: 100 per physical
    #: function, its virtual functions being shares of it).
    per_device: tuple[tuple[str, int], ...] = ()
    #: Published beside `summed`, equal to the first summed name's total, on nodes whose
    #: `node.koordinator.sh/gpu-vendor` label (lower case; "" = unlabelled) is one of `alias_vendors`.
    alias: str = ""
    alias_vendors: frozenset[str] = frozenset()

    @property
    def names(self) -> tuple[str, ...]:
        """Every name this type may publish on a Node."""
        return (*self.summed, *((self.alias,) if self.alias else ()), *(n for n, _ in self.per_device))


@dataclass(frozen=True, slots=True)
class DeviceTypeSpec:
    """One device type of the protocol (see the module docstring for who reads what)."""

    type: DeviceType
    resources: tuple[DeviceResource, ...]
    request_rule: RequestRule
    #: What one healthy device offers on the Device CR (`spec.devices[].resources`).
    capacity: tuple[str, ...]
    allocatable: Allocatable = field(default_factory=Allocatable)
    discovery: Discovery = Discovery.NONE

    @property
    def percent_resource(self) -> str:
        """The one resource a `RequestRule.PERCENT` type is asked for in (Koordinator's
        `allocateStrategy: RequestsAsCount` reads its amount as a number of devices)."""
        if self.request_rule is not RequestRule.PERCENT:
            raise ValueError(f"device type {self.type.value} is not asked for in one percent resource")
        return self.resources[0].name


_WHOLE_GPU_COUNTS: Final = (
    (names.GPU_CORE, PERCENT_PER_DEVICE),
    (names.GPU_MEMORY_RATIO, PERCENT_PER_DEVICE),
)
_PERCENT_GPU_COUNTS: Final = ((names.GPU_CORE, 1), (names.GPU_MEMORY_RATIO, 1))

#: Every device type, in allocation order.
TABLE: Final[tuple[DeviceTypeSpec, ...]] = (
    DeviceTypeSpec(
        DeviceType.GPU,
        resources=(
            # Device plugins' whole GPUs; N of them = N whole GPUs.
            DeviceResource(names.NVIDIA_GPU, Unit.COUNT, counts=_WHOLE_GPU_COUNTS),
            DeviceResource(names.AMD_GPU, Unit.COUNT, counts=_WHOLE_GPU_COUNTS),
            DeviceResource(names.DCU_GPU, Unit.COUNT, counts=_WHOLE_GPU_COUNTS),
            # Percent of a GPU, core and memory alike.
            DeviceResource(names.KOORD_GPU, Unit.PERCENT, names.DEPRECATED_KOORD_GPU, _PERCENT_GPU_COUNTS),
            DeviceResource(names.GPU_CORE, Unit.PERCENT, names.DEPRECATED_GPU_CORE),
            DeviceResource(names.GPU_MEMORY, Unit.BYTES, names.DEPRECATED_GPU_MEMORY),
            DeviceResource(names.GPU_MEMORY_RATIO, Unit.PERCENT, names.DEPRECATED_GPU_MEMORY_RATIO),
            # Counts nothing itself: it says over how many GPUs the rest is spread.
            DeviceResource(names.GPU_SHARED, Unit.SPREAD, counts=()),
        ),
        request_rule=RequestRule.GPU,
        capacity=(names.GPU_CORE, names.GPU_MEMORY, names.GPU_MEMORY_RATIO),
        allocatable=Allocatable(
            summed=(names.GPU_CORE, names.GPU_MEMORY, names.GPU_MEMORY_RATIO),
            # `koordinator.sh/gpu` is NVIDIA-specific in Koordinator's device-plugin compatibility.
            alias=names.KOORD_GPU,
            alias_vendors=frozenset({"", "nvidia"}),
        ),
        discovery=Discovery.NVML,
    ),
    DeviceTypeSpec(
        DeviceType.RDMA,
        resources=(DeviceResource(names.RDMA, Unit.PERCENT, names.DEPRECATED_RDMA),),
        request_rule=RequestRule.PERCENT,
        capacity=(names.RDMA,),
        allocatable=Allocatable(per_device=((names.RDMA, PERCENT_PER_DEVICE),)),
        discovery=Discovery.SYSFS,
    ),
    DeviceTypeSpec(
        DeviceType.FPGA,
        resources=(DeviceResource(names.FPGA, Unit.PERCENT, names.DEPRECATED_FPGA),),
        request_rule=RequestRule.PERCENT,
        capacity=(names.FPGA,),
        # As Koordinator: nothing published, nothing discovered (module docstring).
        allocatable=Allocatable(),
        discovery=Discovery.NONE,
    ),
)


def check(table: Sequence[DeviceTypeSpec]) -> None:
    """Raise RuntimeError unless every DeviceType has exactly one row and no resource name (in
    either spelling) belongs to two rows. `TABLE` is checked on import."""
    types = [row.type for row in table]
    missing = [t.value for t in DeviceType if t not in types]
    repeated = sorted({t.value for t in types if types.count(t) > 1})
    if missing or repeated:
        raise RuntimeError(f"device type table: rows missing for {missing}, repeated for {repeated}")
    spelled = [n for row in table for r in row.resources for n in (r.name, r.deprecated) if n]
    twice = sorted({n for n in spelled if spelled.count(n) > 1})
    if twice:
        raise RuntimeError(f"device type table: resource names in more than one row: {twice}")
    for row in table:
        if row.request_rule is RequestRule.PERCENT and [r.unit for r in row.resources] != [Unit.PERCENT]:
            raise RuntimeError(f"device type table: {row.type.value} is asked for in one percent resource")


check(TABLE)

_BY_TYPE: Final[Mapping[DeviceType, DeviceTypeSpec]] = MappingProxyType({s.type: s for s in TABLE})
_BY_NAME: Final[Mapping[str, tuple[DeviceTypeSpec, DeviceResource]]] = MappingProxyType(
    {n: (s, r) for s in TABLE for r in s.resources for n in (r.name, r.deprecated) if n}
)

#: Device types in the order DeviceShare allocates them (after a joint allocation's primary).
ALLOCATION_ORDER: Final = tuple(s.type for s in TABLE)
#: Every resource name the device protocol owns (current spellings).
RESOURCE_NAMES: Final = frozenset(r.name for s in TABLE for r in s.resources)
#: Deprecated name -> the current name it stands for (Koordinator's DeprecatedDeviceResourcesMapper).
DEPRECATED_NAMES: Final[Mapping[str, str]] = MappingProxyType(
    {r.deprecated: r.name for s in TABLE for r in s.resources if r.deprecated}
)
#: Whole-GPU resource names of device plugins (`nvidia.com/gpu`, ...); N of them = N whole GPUs.
WHOLE_GPU_RESOURCES: Final = tuple(r.name for r in _BY_TYPE[DeviceType.GPU].resources if r.unit is Unit.COUNT)
#: Resources counted in percent of one device (current spellings).
PERCENT_RESOURCES: Final = frozenset(r.name for s in TABLE for r in s.resources if r.unit is Unit.PERCENT)
#: Resources measured in bytes, in both spellings (formatted as BinarySI, `16Gi`).
BYTE_RESOURCES: Final = frozenset(
    n for s in TABLE for r in s.resources if r.unit is Unit.BYTES for n in (r.name, r.deprecated) if n
)


def spec(dtype: DeviceType) -> DeviceTypeSpec:
    """The row of a device type (every DeviceType has one)."""
    return _BY_TYPE[dtype]


def type_of(name: str) -> DeviceType:
    """The device type a resource name (current or deprecated) asks for. Raises ValueError for a
    name that is no device's: never a guess."""
    found = _BY_NAME.get(name)
    if found is None:
        raise ValueError(f"{name} is not a device resource (apis.extension.devicetypes.TABLE)")
    return found[0].type
