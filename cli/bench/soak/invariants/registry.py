"""The families of invariants a soak checks, in the order their violations are reported."""

from __future__ import annotations

from collections.abc import Callable

from cli.bench.soak.invariants import (
    devices,
    gangs,
    health,
    liveness,
    migrations,
    nodes,
    quotas,
    reservations,
    workloads,
)
from cli.bench.soak.invariants.base import Bounds, Invariant

__all__ = ["FAMILIES", "all_invariants"]

FAMILIES: tuple[Callable[[Bounds], list[Invariant]], ...] = (
    devices.invariants,
    health.invariants,
    nodes.invariants,
    gangs.invariants,
    quotas.invariants,
    workloads.invariants,
    reservations.invariants,
    migrations.invariants,
    liveness.invariants,
)


def all_invariants(bounds: Bounds) -> list[Invariant]:
    return [invariant for family in FAMILIES for invariant in family(bounds)]
