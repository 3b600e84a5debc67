"""Koordinator's runtime quota for one resource among the children of one parent.

The protocol (docs/protocol.md, "Quota runtime"), per resource, within each parent:

1. When the children's mins exceed the parent's total, the mins scale down in proportion.
2. Every child first gets min(request, min). A child that does not lend (`allow-lent-resource:
   "false"`) comes with its request raised to its min (`Claim.request` already says so), so it
   keeps its whole min.
3. What remains of the total is shared among children whose request exceeds what they hold, in
   proportion to `shared-weight`, capped at each child's request (already masked to its max);
   what a capped child does not need goes round again to the others.

Every split is in whole units by the largest-remainder method, ties by name, so results are
integers, never exceed the total, and do not depend on the order the children are given in.

A resource counted in percent of a device (`gpu-core`, `gpu-memory-ratio`, `rdma`, `fpga`: a
`unit` of 100, `apis.extension.quotacount.GRANULES`) is split in whole devices first, and what
is left below one device goes whole to the child next in line (the largest remainder), never in
slivers to each: three GPUs lent among ten equal borrowers give three of them one GPU each
(Koordinator's integer-distribution case, where whole-GPU quotas count GPUs), not 30 % of a GPU
to every one, which no whole-GPU pod could use. The sum is the same either way: nothing is lost
to rounding.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Claim", "partition", "partition_lists", "split_by_weight"]


@dataclass(frozen=True, slots=True)
class Claim:
    """One child's position for one resource. `request` is already masked to the child's max
    (and raised to its min when it does not lend); `weight` is its shared-weight."""

    name: str
    min: int
    request: int
    weight: int


def split_by_weight(amount: int, weights: Iterable[tuple[str, int]], unit: int = 1) -> dict[str, int]:
    """`amount` in proportion to the weights, in whole `unit`s first, largest remainder first
    (ties by name). Zero weights get nothing; with no positive weight nothing is handed out."""
    positive = sorted((name, w) for name, w in weights if w > 0)
    shares = _split(amount, [w for _, w in positive], unit)
    return {name: share for (name, _), share in zip(positive, shares, strict=True)}


def _split(amount: int, weights: Sequence[int], unit: int = 1) -> list[int]:
    """`split_by_weight` over positive weights already in name order (the hot path's form)."""
    total = sum(weights)
    if amount <= 0 or total == 0:
        return [0] * len(weights)
    whole, rest = divmod(amount, unit)
    shares = [whole * w // total for w in weights]
    left = whole - sum(shares)
    if left or rest:
        # Largest remainder first; among equal remainders the earlier name wins (sort is stable).
        by_remainder = sorted(range(len(weights)), key=lambda i: -(whole * weights[i] % total))
        for i in by_remainder[:left]:
            shares[i] += 1
        if rest:  # less than one unit: whole to the next in line
            shares = [s * unit for s in shares]
            shares[by_remainder[left]] += rest
            return shares
    return [s * unit for s in shares] if unit != 1 else shares


def partition(total: int, claims: Sequence[Claim], unit: int = 1) -> dict[str, int]:
    """Each child's runtime for this resource, out of the parent's `total` (see module doc)."""
    ordered = sorted(claims, key=lambda c: c.name)
    mins, requests, weights = [c.min for c in ordered], [c.request for c in ordered], [c.weight for c in ordered]
    shares = partition_lists(total, mins, requests, weights, unit)
    return {c.name: share for c, share in zip(ordered, shares, strict=True)}


def partition_lists(
    total: int, mins: Sequence[int], requests: Sequence[int], weights: Sequence[int], unit: int = 1
) -> list[int]:
    """`partition` over parallel lists of the children's min, request and weight, children in
    name order (ties go to the earlier one): what the quota tree calls, without a Claim or a
    dict per child. `unit`: what the resource is split in first (module doc). Returns each
    child's runtime, in the same order."""
    # Conditional expressions rather than min()/max(): this runs for every partition of the tree.
    total = total if total > 0 else 0
    asked = 0
    lends_all = True
    for low, request, weight in zip(mins, requests, weights, strict=True):
        larger = request if request > low else low
        if larger > 0:
            asked += larger
        if weight <= 0 and request > low:
            lends_all = False
    if asked <= total and lends_all:  # no contention (the common case): every child gets its request
        return [request if request > 0 else 0 for request in requests]
    floors = [low if low > 0 else 0 for low in mins]
    if sum(floors) > total:
        positive = [i for i, low in enumerate(floors) if low > 0]
        # In whole units only when every min is whole: a share then never exceeds its min.
        step = unit if all(floors[i] % unit == 0 for i in positive) else 1
        scaled = _split(total, [floors[i] for i in positive], step)
        floors = [0] * len(floors)
        for i, share in zip(positive, scaled, strict=True):
            floors[i] = share
    runtime = [
        (request if request < low else low) if request > 0 else 0 for request, low in zip(requests, floors, strict=True)
    ]
    left = total - sum(runtime)
    hungry = [i for i, request in enumerate(requests) if request > runtime[i] and weights[i] > 0]
    while left > 0 and hungry:
        shares = _split(left, [weights[i] for i in hungry], unit)
        left = 0
        still = []
        for i, share in zip(hungry, shares, strict=True):
            taken = min(share, requests[i] - runtime[i])
            runtime[i] += taken
            left += share - taken
            if runtime[i] < requests[i]:
                still.append(i)
        hungry = still
    return runtime
