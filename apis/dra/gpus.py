"""Tessera's GPU driver in DRA terms, and the bridge between the two protocols' holdings.

A node's GPUs are one inventory published twice: as Koordinator's Device CR and as ResourceSlices
of the driver `gpu.tessera.dev`. One ledger needs to know which DRA device is which GPU; the
convention (the node side publishes slices to it):

- each device has the int attribute `minor`: the GPU's minor (`/dev/nvidia<minor>`), the key
  Koordinator's `device-allocated` annotation uses;
- a shareable GPU is one device with `allowMultipleAllocations: true` and two capacities, `cores`
  (percent of the GPU, 100 = whole; Koordinator's `gpu-core`) and `memory` (bytes; `gpu-memory`);
- other devices of the same minor (a whole-GPU device beside partitions) are not shareable.

What the agent publishes besides (agent/devices/slices.py; selectors may read them, the
allocator does not need them): `uuid`, `productName` (NVML's name), `architecture` (NVML's:
`Ampere`, `Hopper`), `driverVersion` (a version: NVIDIA's `535.161.08` as semver `535.161.8`),
`numaNode`, `nvlinkGroup` (the lowest minor of the GPUs NVLink joins this one with; absent on a GPU
without NVLink, so `matchAttribute` on it keeps a claim's GPUs on one NVLink domain) and kube's
standard `resource.kubernetes.io/pcieRoot` and `pciBusID`. A GPU the agent finds unhealthy keeps
its device, tainted `gpu.tessera.dev/unhealthy=<reason>:NoSchedule` (`UNHEALTHY_TAINT`): no new
claim gets it, and claims already running keep it — as the Device CR, which withdraws the GPU's
resources but evicts nobody. (NoExecute would let kube's device taint eviction delete the pods
using it: a transient XID would kill workloads that Koordinator-protocol pods keep running.)

`held_by_koordinator` turns what Koordinator-protocol pods hold into a `Held` for the allocator:
a share of GPU m consumes `cores`/`memory` on m's shareable device and makes m's other devices
held whole (neither protocol may hand out a partition of a GPU the other shares). The reverse,
`koordinator_usage`, is what DRA claims hold per GPU minor in Koordinator's resource names, for the
scheduler cache and the agent's ledger to count beside Koordinator pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Final

from apis.crds import device as crd
from apis.dra import names as dra_names
from apis.dra.allocation import AllocationResult, DeviceID
from apis.dra.ledger import Held, Rounding
from apis.dra.slice import AttributeType, CapacityRequestPolicy, Device, ResourceSlice
from apis.extension import names
from apis.k8s.quantity import Quantity

__all__ = [
    "ARCHITECTURE",
    "CORES",
    "CORES_POLICY",
    "DRIVER",
    "DRIVER_VERSION",
    "MEMORY",
    "MINOR",
    "NUMA_NODE",
    "NVLINK_GROUP",
    "PRODUCT_NAME",
    "UNHEALTHY_TAINT",
    "UUID",
    "gpu_slice",
    "held_by_koordinator",
    "koordinator_usage",
    "minor_of",
    "whole_percents",
]

DRIVER: Final = f"gpu.{names.TESSERA_DOMAIN}"
MINOR: Final = "minor"
CORES: Final = "cores"
#: A claim that asks for no `cores` takes none of them — as a Koordinator pod asking only GPU
#: memory takes no gpu-core — so claims asking for parts of a GPU's memory share it (kube's
#: default for an unrequested capacity is all of it).
CORES_POLICY: Final = CapacityRequestPolicy(
    default=Quantity.from_int(0), valid_range_min=Quantity.from_int(0), valid_range_max=Quantity.from_int(100)
)
MEMORY: Final = "memory"
UUID: Final = "uuid"
PRODUCT_NAME: Final = "productName"
ARCHITECTURE: Final = "architecture"
DRIVER_VERSION: Final = "driverVersion"
NUMA_NODE: Final = "numaNode"
NVLINK_GROUP: Final = "nvlinkGroup"
#: The device taint on a GPU the agent finds unhealthy (value: the reason, `Xid79`), NoSchedule.
UNHEALTHY_TAINT: Final = f"{DRIVER}/unhealthy"
_WHOLE = 100  # percent


def minor_of(device: Device) -> int | None:
    attr = device.attribute(f"{DRIVER}/{MINOR}", DRIVER)
    if attr is None or attr.type is not AttributeType.INT or attr.is_list:
        return None
    value = attr.value
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _by_minor(slices: Iterable[ResourceSlice], node: str) -> dict[int, list[tuple[DeviceID, Device]]]:
    out: dict[int, list[tuple[DeviceID, Device]]] = {}
    for s in slices:
        if s.driver != DRIVER:
            continue
        for device in s.devices:
            if (device.node_name or s.node_name) != node:
                continue
            minor = minor_of(device)
            if minor is not None:
                out.setdefault(minor, []).append((DeviceID(s.driver, s.pool.name, device.name), device))
    return out


def held_by_koordinator(
    holdings: Mapping[int, Mapping[str, int]], slices: Iterable[ResourceSlice], *, node: str
) -> Held:
    """What Koordinator-protocol pods hold on `node` (GPU minor -> `koordinator.sh/gpu-core`,
    `gpu-memory`, `gpu-memory-ratio` in base units, summed over pods) as DRA devices."""
    devices = _by_minor(slices, node)
    exclusive: list[DeviceID] = []
    shares: list[tuple[DeviceID, dict[str, Fraction]]] = []
    for minor, held in holdings.items():
        if not any(held.values()):
            continue
        for device_id, device in devices.get(minor, []):
            if not device.allow_multiple_allocations:
                exclusive.append(device_id)
                continue
            consumed: dict[str, Fraction] = {}
            if CORES in device.capacity:
                consumed[CORES] = Fraction(held.get(names.GPU_CORE, 0))
            if MEMORY in device.capacity:
                # The larger of the bytes and the ratio: the cache counts a share in whole
                # percents, rounded up, so the ratio may say more than the bytes.
                ratio = Fraction(held.get(names.GPU_MEMORY_RATIO, 0), _WHOLE)
                total = device.capacity[MEMORY].value.amount
                consumed[MEMORY] = max(Fraction(held.get(names.GPU_MEMORY, 0)), ratio * total)
            shares.append((device_id, consumed))
    return Held.of(exclusive, shares)


def whole_percents(slices: Iterable[ResourceSlice], *, node: str) -> Rounding:
    """How claims' shares of `node`'s GPUs are counted: in whole percents of the GPU, rounded up,
    as `koordinator_usage` gives them to the scheduler's cache (`gpu-core`, `gpu-memory-ratio`).
    The allocator counts held shares so, or two shares whose bytes fill a GPU exactly (2 and
    14 GiB of 16) would be 13 % + 88 % = 101 % to DeviceShare: one ledger, one rounding."""
    totals: dict[DeviceID, Fraction] = {
        device_id: device.capacity[MEMORY].value.amount
        for found in _by_minor(slices, node).values()
        for device_id, device in found
        if MEMORY in device.capacity
    }

    def rounding(device: DeviceID, name: str, amount: Fraction) -> Fraction:
        total = totals.get(device)
        if total is None:
            return amount
        if name == CORES:
            return Fraction(_ceil(amount))
        if name == MEMORY and total:
            return _ceil(amount * _WHOLE / total) * total / _WHOLE
        return amount

    return rounding


def _ceil(amount: Fraction) -> int:
    return -(-amount.numerator // amount.denominator)


def koordinator_usage(
    allocations: Iterable[AllocationResult], slices: Iterable[ResourceSlice], *, node: str
) -> dict[int, dict[str, int]]:
    """What DRA claims hold on `node` per GPU minor, as Koordinator counts GPUs: a device held
    whole is the whole GPU (100 cores, all memory, ratio 100); a share is its consumed capacity.
    Admin-access results hold nothing. Amounts are rounded up (never under-counted)."""
    devices = {device_id: device for found in _by_minor(slices, node).values() for device_id, device in found}
    usage: dict[int, dict[str, Fraction]] = {}
    for allocation in allocations:
        for result in allocation.results:
            device = devices.get(result.id)
            minor = None if device is None else minor_of(device)
            if device is None or minor is None or result.admin_access:
                continue
            total = device.capacity[MEMORY].value.amount if MEMORY in device.capacity else Fraction(0)
            if result.share_id:
                cores = result.consumed_capacity[CORES].amount if CORES in result.consumed_capacity else Fraction(0)
                memory = result.consumed_capacity[MEMORY].amount if MEMORY in result.consumed_capacity else Fraction(0)
            else:
                cores, memory = Fraction(_WHOLE), total
            into = usage.setdefault(minor, {})
            into[names.GPU_CORE] = into.get(names.GPU_CORE, Fraction(0)) + cores
            into[names.GPU_MEMORY] = into.get(names.GPU_MEMORY, Fraction(0)) + memory
            ratio = memory * _WHOLE / total if total else Fraction(_WHOLE if not result.share_id else 0)
            into[names.GPU_MEMORY_RATIO] = into.get(names.GPU_MEMORY_RATIO, Fraction(0)) + ratio
    return {m: {k: _ceil(v) for k, v in r.items()} for m, r in usage.items()}


def gpu_slice(inventory: crd.Device, *, generation: int = 0) -> ResourceSlice:
    """The node's healthy GPUs as one ResourceSlice of this driver (pool = the node), from the
    same inventory as its Device CR: per GPU one shareable device `gpu-<minor>` with `cores` 100
    and `memory` its bytes, and the attributes `minor`, `uuid`, `numaNode` and kube's
    `resource.kubernetes.io/pcieRoot` (for CEL selectors and `matchAttribute` constraints), named
    as the agent publishes them. The agent publishes its own (agent/devices/slices.py, with more
    attributes); the scheduler's offline drivers (simulate, bench) build this for their simulated
    nodes."""
    node = inventory.node_name
    devices = []
    for info in sorted(inventory.devices, key=lambda d: d.minor):
        if info.type is not crd.DeviceType.GPU or not info.health:
            continue
        attributes: dict[str, object] = {MINOR: {"int": info.minor}, "uuid": {"string": info.id or f"gpu-{info.minor}"}}
        if info.topology is not None:
            attributes[NUMA_NODE] = {"int": info.topology.node_id}
            if info.topology.pcie_id:
                attributes[dra_names.PCIE_ROOT] = {"string": info.topology.pcie_id}
        devices.append(
            {
                "name": f"gpu-{info.minor}",
                "attributes": attributes,
                "allowMultipleAllocations": True,
                "capacity": {
                    CORES: {
                        "value": str(info.resources.get(names.GPU_CORE, _WHOLE)),
                        "requestPolicy": CORES_POLICY.to_dict(),
                    },
                    MEMORY: {"value": str(info.resources.get(names.GPU_MEMORY, 0))},
                },
            }
        )
    return ResourceSlice.from_dict(
        {
            "metadata": {"name": f"{node}-{DRIVER}"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
                "devices": devices,
            },
        }
    )
