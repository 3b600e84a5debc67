"""What is already taken on a node's DRA devices, by claims and by Koordinator-protocol pods.

One account for both protocols (docs: "one ledger"): the allocator takes a `Held` and never gives
what it lists again. A device is held whole (`exclusive`: a claim's device without a share ID, or
a device a Koordinator pod holds and the device does not allow multiple allocations) or in part
(`capacity`: the sum of what each share consumes, per capacity name, on a device that allows
multiple allocations). Admin-access results hold nothing, as in kube (GatherAllocatedState): they
monitor a device, they do not use it up.

Koordinator pods' holdings come in Koordinator's terms (a GPU minor, `koordinator.sh/gpu-core`
percent and `koordinator.sh/gpu-memory` bytes); `held_by_koordinator` maps them onto the node's
DRA devices by the convention of `apis.dra.gpus` (the `minor` attribute, `cores` and `memory`
capacities). Pure; callers (the scheduler's cache, the agent's ledger) build it from their state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from apis.dra.allocation import DeviceID
from apis.dra.claim import ResourceClaim

__all__ = ["Held", "Rounding", "held_by_claims"]

#: How one share's consumption of one capacity is counted: (device, capacity name, amount) ->
#: amount counted (never less). The GPU driver counts shares in whole percents of the GPU, as the
#: scheduler's cache does for DeviceShare (`apis.dra.gpus.whole_percents`).
Rounding = Callable[[DeviceID, str, Fraction], Fraction]


@dataclass(frozen=True, slots=True)
class Held:
    exclusive: frozenset[DeviceID] = frozenset()
    #: device -> capacity name -> amount consumed by shares (exact amounts).
    capacity: Mapping[DeviceID, Mapping[str, Fraction]] = field(default_factory=dict)

    def allocated(self, device: DeviceID) -> bool:
        """Whether anything of the device is taken (its counters are then in use)."""
        return device in self.exclusive or device in self.capacity

    def consumed(self, device: DeviceID, name: str) -> Fraction:
        return self.capacity.get(device, {}).get(name, Fraction(0))

    def __add__(self, other: Held) -> Held:
        merged: dict[DeviceID, dict[str, Fraction]] = {d: dict(c) for d, c in self.capacity.items()}
        for device, amounts in other.capacity.items():
            into = merged.setdefault(device, {})
            for name, amount in amounts.items():
                into[name] = into.get(name, Fraction(0)) + amount
        return Held(self.exclusive | other.exclusive, merged)

    @classmethod
    def of(
        cls, exclusive: Iterable[DeviceID] = (), capacity: Iterable[tuple[DeviceID, Mapping[str, Fraction]]] = ()
    ) -> Held:
        """A Held from devices held whole and (device, consumed capacity) shares, summed."""
        total = cls(frozenset(exclusive))
        for device, amounts in capacity:
            total = total + cls(capacity={device: dict(amounts)})
        return total


def held_by_claims(
    claims: Iterable[ResourceClaim], *, besides: Iterable[str] = (), rounding: Rounding | None = None
) -> Held:
    """What the allocated claims hold (claims keyed `namespace/name` in `besides` left out:
    a claim being allocated again must not count against itself), each share's consumption
    counted by `rounding` (exact when None)."""
    skip = set(besides)
    exclusive: set[DeviceID] = set()
    shares: list[tuple[DeviceID, Mapping[str, Fraction]]] = []
    for claim in claims:
        if claim.allocation is None or claim.key in skip:
            continue
        for result in claim.allocation.results:
            if result.admin_access:
                continue
            if result.share_id:
                shares.append(
                    (
                        result.id,
                        {
                            k: q.amount if rounding is None else rounding(result.id, k, q.amount)
                            for k, q in result.consumed_capacity.items()
                        },
                    )
                )
            else:
                exclusive.add(result.id)
    return Held.of(exclusive, shares)
