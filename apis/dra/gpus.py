"""Tessera's GPU driver in DRA terms, and the bridge between the two protocols' holdings.

A node's GPUs are one inventory published twice: as Koordinator's Device CR and as ResourceSlices
of the driver `gpu.tessera.dev`. One ledger needs to know which DRA device is which GPU; the
convention (the node side publishes slices to it):

- each device has the int attribute `minor`: the GPU's minor (`/dev/nvidia<minor>`), the key
  Koordinator's `device-allocated` annotation uses;
- a shareable GPU is one device with `allowMultipleAllocations: true` and two capacities, `cores`
  (percent of the GPU, 100 = whole; Koordinator's `gpu-core`) and `memory` (bytes; `gpu-memory`);
- other devices of the same minor (a whole-GPU device beside partitions) are not shareable.

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

from apis.dra.allocation import AllocationResult, DeviceID
from apis.dra.ledger import Held
from apis.dra.slice import AttributeType, Device, ResourceSlice
from apis.extension import names

__all__ = ["CORES", "DRIVER", "MEMORY", "MINOR", "held_by_koordinator", "koordinator_usage", "minor_of"]

DRIVER: Final = f"gpu.{names.TESSERA_DOMAIN}"
MINOR: Final = "minor"
CORES: Final = "cores"
MEMORY: Final = "memory"
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
                memory = held.get(names.GPU_MEMORY)
                if memory is None:
                    ratio = Fraction(held.get(names.GPU_MEMORY_RATIO, 0), _WHOLE)
                    consumed[MEMORY] = ratio * device.capacity[MEMORY].value.amount
                else:
                    consumed[MEMORY] = Fraction(memory)
            shares.append((device_id, consumed))
    return Held.of(exclusive, shares)


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
    return {m: {k: -(-v.numerator // v.denominator) for k, v in r.items()} for m, r in usage.items()}
