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
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Claim", "partition", "split_by_weight"]


@dataclass(frozen=True, slots=True)
class Claim:
    """One child's position for one resource. `request` is already masked to the child's max
    (and raised to its min when it does not lend); `weight` is its shared-weight."""

    name: str
    min: int
    request: int
    weight: int


def split_by_weight(amount: int, weights: Iterable[tuple[str, int]]) -> dict[str, int]:
    """`amount` in whole units, in proportion to the weights, largest remainder first (ties by
    name). Zero weights get nothing; with no positive weight nothing is handed out."""
    positive = sorted((name, w) for name, w in weights if w > 0)
    total = sum(w for _, w in positive)
    if amount <= 0 or total == 0:
        return {name: 0 for name, _ in positive}
    shares = {name: amount * w // total for name, w in positive}
    left = amount - sum(shares.values())
    # Largest remainder first; among equal remainders the smaller name wins (sorted() is stable).
    by_remainder = sorted(positive, key=lambda nw: -(amount * nw[1] % total))
    for name, _ in by_remainder[:left]:
        shares[name] += 1
    return shares


def partition(total: int, claims: Sequence[Claim]) -> dict[str, int]:
    """Each child's runtime for this resource, out of the parent's `total` (see module doc)."""
    total = max(total, 0)
    if sum(max(c.request, c.min, 0) for c in claims) <= total and all(
        c.weight > 0 or c.request <= c.min for c in claims
    ):  # no contention (the common case): every child gets its request, the rules agree
        return {c.name: max(c.request, 0) for c in claims}
    mins = {c.name: max(c.min, 0) for c in claims}
    if sum(mins.values()) > total:
        mins = split_by_weight(total, mins.items()) | {n: 0 for n, m in mins.items() if m <= 0}
    runtime = {c.name: min(max(c.request, 0), mins[c.name]) for c in claims}
    left = total - sum(runtime.values())
    hungry = {c.name: c for c in claims if c.request > runtime[c.name] and c.weight > 0}
    while left > 0 and hungry:
        shares = split_by_weight(left, ((n, c.weight) for n, c in hungry.items()))
        left = 0
        for name, share in shares.items():
            claim = hungry[name]
            taken = min(share, claim.request - runtime[name])
            runtime[name] += taken
            left += share - taken
            if runtime[name] >= claim.request:
                del hungry[name]
    return runtime
