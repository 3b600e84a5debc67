"""Cycle-state entries that more than one plugin (or the runtime) uses: the contracts between
plugins, by name.

Plugins never import each other, so what one writes for another is named here, below both, with
the type of its value. Each side declares its part as `Access(key, point)` — the writer in
`Plugin.writes` (the extension point that writes it), each reader in `Plugin.reads` (the first
point that reads it) — and `Framework.build` refuses, with a ConfigError naming both plugins, a
profile that would run a reader before its writer (`check_order`). A writer missing from a
profile (disabled) is no error: its readers then find nothing, as they would for a pod the writer
has nothing for.

To add an entry: a `StateKey` here with a comment saying who writes it, when, and what readers
may rely on; `writes`/`reads` on the plugins; `state.put(KEY, value)` in the writer and
`state.get(KEY)` in the readers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from scheduler.cache.podinfo import PodInfo
from scheduler.cache.reservations import HeldReservation
from scheduler.framework.cycle_state import StateKey
from scheduler.framework.interfaces import ExtensionPoint, Plugin

__all__ = ["CLAIMS_CHARGE", "CONSUMED_RESERVATION", "NOMINATED_RESERVATIONS", "PRE_ALLOCATED", "check_order"]

#: Per node, the Reservation the pod may be placed onto there. Written at PreFilter by the
#: Reservation plugin (absent or empty: none). The runtime filters such a node as if that
#: Reservation's remaining resources were free (`Framework.node_view`); DeviceShare narrows its
#: candidates with them and fits the pod on that node within the Reservation's devices.
NOMINATED_RESERVATIONS: Final = StateKey[Mapping[str, HeldReservation]]("NominatedReservations")
#: The Reservation the pod consumed, on the node it is reserved on. Written at Reserve by the
#: Reservation plugin once the cache counts the pod as the Reservation's owner (so the
#: Reservation no longer counts what it gives the pod); DeviceShare's Reserve then gives the pod
#: the Reservation's devices themselves when they are exactly what the pod asks for.
CONSUMED_RESERVATION: Final = StateKey[HeldReservation]("ConsumedReservation")
#: For a Reservation's reserve pod with `spec.preAllocation`: per node, the running pods it would
#: be placed over there (their resources become its own). Written at PreFilter by the Reservation
#: plugin (absent or empty: none). The runtime filters such a node as if those pods were gone
#: (`Framework.node_view`); DeviceShare fits the reserve pod on that view, and at Reserve holds
#: only what those pods do not hold already, so no device is counted twice.
PRE_ALLOCATED: Final = StateKey[Mapping[str, tuple[PodInfo, ...]]]("PreAllocated")

#: What the pod's ResourceClaims, as this cycle allocated them on the chosen node, charge its
#: ElasticQuota (`apis.dra.quota`: quota names, base units). Written at Reserve by
#: DynamicResources (absent: nothing to charge); ElasticQuota's Reserve admits the pod with it and
#: counts it in the quota's used.
CLAIMS_CHARGE: Final = StateKey[Mapping[str, int]]("ClaimsCharge")

# The order of the extension points in one cycle.
_ORDER: Final = {point: i for i, point in enumerate(ExtensionPoint)}


def check_order(points: Mapping[ExtensionPoint, Sequence[Plugin]]) -> list[str]:
    """Every shared entry a plugin of this profile reads before another writes it: at an earlier
    extension point, or at the same one but earlier in its plugin list. One problem per pair."""
    problems: list[str] = []
    for reader in _plugins(points):
        for read in reader.reads:
            for writer in _plugins(points):
                if writer is reader:
                    continue
                for write in writer.writes:
                    if write.key is not read.key or writer not in points.get(write.point, ()):
                        continue
                    if _ORDER[read.point] < _ORDER[write.point] or (
                        read.point is write.point and _before(points[read.point], reader, writer)
                    ):
                        problems.append(
                            f"plugin {reader.name} reads {read.key.name} at {read.point.value} before plugin "
                            f"{writer.name} writes it at {write.point.value}: put {writer.name} before "
                            f"{reader.name} in the profile's {write.point.value} plugins"
                        )
    return problems


def _plugins(points: Mapping[ExtensionPoint, Sequence[Plugin]]) -> Iterable[Plugin]:
    seen: dict[str, Plugin] = {}
    for group in points.values():
        for plugin in group:
            seen.setdefault(plugin.name, plugin)
    return seen.values()


def _before(group: Sequence[Plugin], reader: Plugin, writer: Plugin) -> bool:
    """Whether `reader` runs before `writer` at a point where both run."""
    return reader in group and group.index(reader) < group.index(writer)
