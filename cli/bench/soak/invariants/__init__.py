"""The invariants a soak checks, as a registry of families: each module one family of pure checks.

A check is a function `ClusterState -> list[Violation]`. Safety invariants (a device given twice,
an acknowledged object lost) count the moment they are seen. Liveness invariants (a pod that fits
stays pending, a Strict gang stays half bound) have a `grace_s`: a violation counts only once it
has been seen in every check for that long since the last disturbance (a kill), which
`Persistence` tracks across checks — a snapshot alone cannot tell "slow" from "stuck".

To add a family (reservations, workloads, preemption): a module with `invariants(bounds) ->
list[Invariant]`, and its `invariants` in `registry.FAMILIES`.
"""

from cli.bench.soak.invariants.base import Bounds, Invariant, Persistence, Violation, check
from cli.bench.soak.invariants.registry import FAMILIES, all_invariants

__all__ = ["FAMILIES", "Bounds", "Invariant", "Persistence", "Violation", "all_invariants", "check"]
