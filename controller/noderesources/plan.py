"""What to change on a Node, and whether it is worth a write now. Pure.

Comparing the managed part of a Node with what its Device CR says gives a `Plan`: per status
field (`allocatable`, `capacity`) and resource name, the old and new amounts, plus the label
changes. Most changes are urgent and written at once: a name added or removed, any decrease (a
device went unhealthy: the scheduler must stop counting it), any label. An increase smaller than
`threshold` of the current amount (default 10%, Koordinator's `resourceDiffThreshold`) is not
urgent: it may wait, so small fluctuations do not become a stream of Node writes (each one is a
watch event for every scheduler and kubelet watching Nodes). The reconciler writes a waiting
increase together with the next urgent change, or after a maximum delay at the latest.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from apis.k8s import resources
from apis.k8s.core import Node
from controller.noderesources.desired import MANAGED_LABELS, MANAGED_RESOURCES, PUBLISHED_LABELS, DeviceResources

__all__ = ["ALLOCATABLE", "CAPACITY", "Change", "ChangeKind", "Observed", "Plan", "plan"]

ALLOCATABLE = "allocatable"
CAPACITY = "capacity"


class ChangeKind(enum.Enum):
    ADD = "add"
    REMOVE = "remove"
    DECREASE = "decrease"
    INCREASE = "increase"
    #: An increase below the threshold: may wait.
    SMALL_INCREASE = "small-increase"


@dataclass(frozen=True, slots=True)
class Observed:
    """The managed part of a Node as it is: device resources in its status, GPU labels."""

    allocatable: Mapping[str, int] = field(default_factory=dict)
    capacity: Mapping[str, int] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, node: Node) -> Observed:
        return cls(
            allocatable={n: node.allocatable[n] for n in MANAGED_RESOURCES if n in node.allocatable},
            capacity={n: node.capacity[n] for n in MANAGED_RESOURCES if n in node.capacity},
            labels={k: node.labels[k] for k in (*MANAGED_LABELS, *PUBLISHED_LABELS) if k in node.labels},
        )


@dataclass(frozen=True, slots=True)
class Change:
    """One resource amount in one status field: `old`/`new` None mean absent."""

    field: str
    name: str
    old: int | None
    new: int | None
    kind: ChangeKind

    @property
    def urgent(self) -> bool:
        return self.kind is not ChangeKind.SMALL_INCREASE

    def __str__(self) -> str:
        return f"{self.field}[{self.name}]: {_text(self.name, self.old)} -> {_text(self.name, self.new)}"


@dataclass(frozen=True, slots=True)
class Plan:
    changes: tuple[Change, ...] = ()
    #: label key -> new value (None: remove).
    labels: Mapping[str, str | None] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.changes and not self.labels

    @property
    def urgent(self) -> bool:
        """Something must be written now (else everything here may wait)."""
        return bool(self.labels) or any(c.urgent for c in self.changes)

    def status_patch(self) -> dict[str, Any] | None:
        """A merge patch of the Node's status setting or removing (null) exactly the changed names."""
        if not self.changes:
            return None
        status: dict[str, dict[str, str | None]] = {}
        for c in self.changes:
            status.setdefault(c.field, {})[c.name] = None if c.new is None else resources.format_quantity(c.name, c.new)
        return {"status": status}

    def describe(self) -> str:
        """The changes in words, for logs: `allocatable[koordinator.sh/gpu-core]: 800 -> 700, …`."""
        parts = [str(c) for c in self.changes]
        parts += [f"label {k}: {'removed' if v is None else repr(v)}" for k, v in sorted(self.labels.items())]
        return ", ".join(parts)


def plan(observed: Observed, desired: DeviceResources, *, threshold: Fraction) -> Plan:
    """The changes that make `observed` what `desired` says (empty: nothing to do)."""
    changes = []
    for field_name, current in ((ALLOCATABLE, observed.allocatable), (CAPACITY, observed.capacity)):
        for name in MANAGED_RESOURCES:
            old, new = current.get(name), desired.resources.get(name)
            if old != new:
                changes.append(Change(field_name, name, old, new, _kind(old, new, threshold)))
    labels: dict[str, str | None] = {
        key: desired.labels.get(key) for key in MANAGED_LABELS if observed.labels.get(key) != desired.labels.get(key)
    }
    for key in PUBLISHED_LABELS:  # set, never removed
        value = desired.labels.get(key)
        if value is not None and observed.labels.get(key) != value:
            labels[key] = value
    return Plan(tuple(changes), labels)


def _kind(old: int | None, new: int | None, threshold: Fraction) -> ChangeKind:
    if old is None:
        return ChangeKind.ADD
    if new is None:
        return ChangeKind.REMOVE
    if new < old:
        return ChangeKind.DECREASE
    if old > 0 and (new - old) * threshold.denominator < old * threshold.numerator:
        return ChangeKind.SMALL_INCREASE
    return ChangeKind.INCREASE


def _text(name: str, amount: int | None) -> str:
    return "absent" if amount is None else resources.format_quantity(name, amount)
