"""The cluster's PodDisruptionBudgets, as preemption reads them (kube's scheduler lists them too).

Pure data fed by explicit calls — the live scheduler's PDB informer, or `tessera what-if` from
its snapshot — so a plugin reads budgets through the cache like nodes and pods, and a cluster
without any budget costs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from apis.k8s.policy import PodDisruptionBudget

__all__ = ["DisruptionBudgets"]


class DisruptionBudgets:
    """Budgets by `namespace/name`; the latest version of each wins."""

    def __init__(self) -> None:
        self._by_key: dict[str, PodDisruptionBudget] = {}
        self._list: tuple[PodDisruptionBudget, ...] | None = ()

    def update(self, budget: PodDisruptionBudget) -> None:
        """Add or replace a budget."""
        self._by_key[budget.key] = budget
        self._list = None

    def remove(self, key: str) -> None:
        self._by_key.pop(key, None)
        self._list = None

    def list(self) -> Sequence[PodDisruptionBudget]:
        """Every budget, by key (a stable order: kube processes them in list order)."""
        if self._list is None:
            self._list = tuple(self._by_key[k] for k in sorted(self._by_key))
        return self._list
