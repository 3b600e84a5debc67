"""Writing `CgroupSettings` to real cgroups in an order the kernel accepts.

A plain "write each knob" fails in three real cases, all handled here so callers do not have to
know them:

- cgroup v1 refuses a CFS quota above the nearest limited ancestor's (EINVAL) and refuses to
  lower a parent below a child. So a child's quota is capped at its ancestors' (`apply`), and a
  lowered limit first lowers every descendant above it (`limit_subtree`); `apply_tree` does
  decreases bottom-up before the rest top-down.
- A cgroup with cpu.idle=1 refuses cpu.shares (EINVAL) and reads back 3; leaving idle resets
  shares to 1024. So idle is cleared before shares are written and set after, and shares are
  not written while idle is wanted.
- Knobs the kernel lacks (memory.min on v1, cpu.idle before 5.15) are skipped and reported as
  unsupported rather than failing the whole pod.

Everything is idempotent: `Cgroup.write` skips values that already hold. Errors other than
"unsupported" propagate as CgroupError (CgroupNotFound when the cgroup vanished).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from agent.qos import knobs
from agent.qos.cgroups import Cgroup, CgroupNotFound, CgroupUnsupported, Change
from agent.qos.knobs import CgroupVersion, CPUMax, Knob
from agent.qos.policy import CgroupSettings

__all__ = ["Applied", "apply", "apply_tree", "cap_under", "effective_limit", "limit_subtree"]

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(slots=True)
class Applied:
    """What one application did: the writes made, and the knobs this kernel does not have."""

    changes: list[Change] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)

    def extend(self, other: Applied) -> None:
        self.changes += other.changes
        self.unsupported += other.unsupported


def apply(cg: Cgroup, settings: CgroupSettings) -> Applied:
    """Bring `cg` to `settings` (None fields untouched). Idempotent; raises CgroupError."""
    out = Applied()
    idle_supported = settings.cpu_idle is not None and cg.supports(knobs.CPU_IDLE)
    if idle_supported and not settings.cpu_idle:
        _write(cg, knobs.CPU_IDLE, False, out)
    elif settings.cpu_idle and not idle_supported:
        out.unsupported.append(knobs.CPU_IDLE.name)
    if settings.cpu_shares is not None and not (settings.cpu_idle and idle_supported):
        _write(cg, knobs.CPU_SHARES, settings.cpu_shares, out)
    if settings.cpu_max is not None:
        _write(cg, knobs.CPU_MAX, effective_limit(cg, settings.cpu_max), out)
    if idle_supported and settings.cpu_idle:
        _write(cg, knobs.CPU_IDLE, True, out)
    for knob, value in (
        (knobs.MEMORY_MAX, settings.memory_max),
        (knobs.MEMORY_MIN, settings.memory_min),
        (knobs.MEMORY_LOW, settings.memory_low),
        (knobs.MEMORY_HIGH, settings.memory_high),
    ):
        if value is not None:
            _write(cg, knob, value, out)
    return out


def apply_tree(entries: Sequence[tuple[Cgroup, CgroupSettings]]) -> Applied:
    """Apply settings to a parent-first list of cgroups (a pod, then its containers).

    CPU limits that go down are written first, children before parents (so v1 accepts them);
    then every cgroup gets `apply`, parents first (so raised limits make room for children).
    """
    out = Applied()
    for cg, settings in reversed(entries):
        if settings.cpu_max is not None and cg.read(knobs.CPU_MAX).exceeds(settings.cpu_max):
            out.changes += limit_subtree(cg, settings.cpu_max)
    for cg, settings in entries:
        out.extend(apply(cg, settings))
    return out


def limit_subtree(cg: Cgroup, limit: CPUMax) -> list[Change]:
    """Set `cg`'s CPU limit, first lowering any descendant above it (v1 requires it; v2 does not).

    Used by BE suppression on the BestEffort QoS cgroup, and by `apply_tree` for decreases.
    The limit itself is capped at the ancestors' on v1 (`effective_limit`). Raising a limit
    never touches descendants: the reconciler restores their own values on its next pass.
    """
    changes: list[Change] = []
    limit = effective_limit(cg, limit)
    if cg.hierarchy.version is CgroupVersion.V1 and cg.read(knobs.CPU_MAX).exceeds(limit):
        for sub in cg.walk_bottom_up():
            if sub.rel == cg.rel:
                continue
            try:
                current = sub.read(knobs.CPU_MAX)
                change = sub.write(knobs.CPU_MAX, current.scaled_to(limit)) if _above(current, limit) else None
            except CgroupNotFound:
                continue  # a container exited while we walked; nothing left to limit
            if change is not None:
                changes.append(change)
    change = cg.write(knobs.CPU_MAX, limit)
    if change is not None:
        changes.append(change)
    return changes


def effective_limit(cg: Cgroup, wanted: CPUMax) -> CPUMax:
    """`wanted`, capped on cgroup v1 at the nearest limited ancestor of `cg` (the kernel refuses more)."""
    parent = cg.parent()
    return wanted if parent is None else cap_under(parent, wanted)


def cap_under(parent: Cgroup, wanted: CPUMax) -> CPUMax:
    """The most of `wanted` a (new or existing) child of `parent` may have.

    On cgroup v1 a finite CFS quota may not exceed the nearest limited ancestor's (`parent`
    included); on v2, or when no ancestor is limited, `wanted` itself. An unlimited child is
    always accepted (it inherits the ancestor's limit). Reads one file per ancestor level.
    """
    if parent.hierarchy.version is not CgroupVersion.V1 or wanted.unlimited:
        return wanted
    ancestor: Cgroup | None = parent
    while ancestor is not None:
        if ancestor.exists():
            limit = ancestor.read(knobs.CPU_MAX)
            if not limit.unlimited:
                return wanted.scaled_to(limit) if wanted.exceeds(limit) else wanted
        ancestor = ancestor.parent()
    return wanted


def _above(current: CPUMax, limit: CPUMax) -> bool:
    """A finite limit above `limit` (an unlimited child inherits its parent's limit, so it is fine)."""
    return not current.unlimited and current.exceeds(limit)


def _write(cg: Cgroup, knob: Knob[T], value: T, out: Applied) -> None:
    try:
        change = cg.write(knob, value)
    except CgroupUnsupported:
        out.unsupported.append(knob.name)
        return
    if change is not None:
        out.changes.append(change)
