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

An `Enforcer` is cheap; make one per reconcile pass (or per hook call, per suppression step). It
remembers, for its lifetime only, the ancestor limits it read (one read of `kubepods/burstable`
per pass instead of one per pod) and the knobs the kernel lacks (probed once, not failed on per
cgroup). Everything is idempotent: `Cgroup.write` skips values that already hold. Errors other
than "unsupported" propagate as CgroupError (CgroupNotFound when the cgroup vanished).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, TypeVar

from agent.qos import knobs
from agent.qos.cgroups import Cgroup, CgroupNotFound, CgroupUnsupported, Change
from agent.qos.knobs import CgroupVersion, CPUMax, Knob, KnobFiles
from agent.qos.policy import CgroupSettings

__all__ = ["Applied", "Enforcer", "lacking"]

T = TypeVar("T")

#: Knobs a kernel may lack; probed once per pass by `lacking`.
_OPTIONAL: Final[tuple[KnobFiles, ...]] = (knobs.CPU_IDLE, knobs.MEMORY_MIN, knobs.MEMORY_LOW, knobs.MEMORY_HIGH)


@dataclass(slots=True)
class Applied:
    """What one application did: the writes made, and the knobs this kernel does not have."""

    changes: list[Change] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)

    def extend(self, other: Applied) -> None:
        self.changes += other.changes
        self.unsupported += other.unsupported


def lacking(probe: Cgroup) -> frozenset[str]:
    """Names of the optional knobs this kernel does not have, seen on `probe` (e.g. kubepods).

    Empty when `probe` does not exist (nothing can be concluded; each write then finds out).
    """
    if not probe.exists():
        return frozenset()
    return frozenset(k.name for k in _OPTIONAL if not probe.supports(k))


class Enforcer:
    """Applies settings for one pass; see the module docstring. Not thread-safe."""

    def __init__(self, *, lacking: frozenset[str] = frozenset()) -> None:
        self._lacking = lacking
        self._limits: dict[str, CPUMax] = {}

    def apply(self, cg: Cgroup, settings: CgroupSettings) -> Applied:
        """Bring `cg` to `settings` (None fields untouched). Idempotent; raises CgroupError."""
        out = Applied()
        idle = settings.cpu_idle
        idle_supported = idle is not None and knobs.CPU_IDLE.name not in self._lacking and cg.supports(knobs.CPU_IDLE)
        if idle_supported and not idle:
            self._write(cg, knobs.CPU_IDLE, False, out)
        elif idle and not idle_supported:
            out.unsupported.append(knobs.CPU_IDLE.name)
        if settings.cpu_shares is not None and not (idle and idle_supported):
            self._write(cg, knobs.CPU_SHARES, settings.cpu_shares, out)
        if settings.cpu_max is not None:
            self._write(cg, knobs.CPU_MAX, self.effective_limit(cg, settings.cpu_max), out)
        if idle_supported and idle:
            self._write(cg, knobs.CPU_IDLE, True, out)
        for knob, value in (
            (knobs.MEMORY_MAX, settings.memory_max),
            (knobs.MEMORY_MIN, settings.memory_min),
            (knobs.MEMORY_LOW, settings.memory_low),
            (knobs.MEMORY_HIGH, settings.memory_high),
        ):
            if value is not None:
                self._write(cg, knob, value, out)
        return out

    def apply_tree(self, entries: Sequence[tuple[Cgroup, CgroupSettings]]) -> Applied:
        """Apply settings to a parent-first list of cgroups (a pod, then its containers).

        CPU limits that go down are written first, children before parents (so v1 accepts
        them); then every cgroup gets `apply`, parents first (so raised limits make room).
        """
        out = Applied()
        for cg, settings in reversed(entries):
            if settings.cpu_max is not None and cg.read(knobs.CPU_MAX).exceeds(settings.cpu_max):
                out.changes += self.limit_subtree(cg, settings.cpu_max)
        for cg, settings in entries:
            out.extend(self.apply(cg, settings))
        return out

    def limit_subtree(self, cg: Cgroup, limit: CPUMax) -> list[Change]:
        """Set `cg`'s CPU limit, first lowering any descendant above it (v1 requires it; v2 does not).

        Used by BE suppression on the BestEffort QoS cgroup, and by `apply_tree` for decreases.
        The limit itself is capped at the ancestors' on v1 (`effective_limit`). Raising a limit
        never touches descendants: the reconciler restores their own values on its next pass.
        """
        changes: list[Change] = []
        limit = self.effective_limit(cg, limit)
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
                    self._limits.pop(sub.rel, None)
                    changes.append(change)
        change = cg.write(knobs.CPU_MAX, limit)
        self._limits.pop(cg.rel, None)
        if change is not None:
            changes.append(change)
        return changes

    def effective_limit(self, cg: Cgroup, wanted: CPUMax) -> CPUMax:
        """`wanted`, capped on cgroup v1 at the nearest limited ancestor of `cg` (the kernel refuses more)."""
        parent = cg.parent()
        return wanted if parent is None else self.cap_under(parent, wanted)

    def cap_under(self, parent: Cgroup, wanted: CPUMax) -> CPUMax:
        """The most of `wanted` a (new or existing) child of `parent` may have.

        On cgroup v1 a finite CFS quota may not exceed the nearest limited ancestor's (`parent`
        included); on v2, or when no ancestor is limited, `wanted` itself. An unlimited child is
        always accepted (it inherits the ancestor's limit).
        """
        if parent.hierarchy.version is not CgroupVersion.V1 or wanted.unlimited:
            return wanted
        ancestor: Cgroup | None = parent
        while ancestor is not None:
            limit = self._limit_of(ancestor)
            if limit is not None and not limit.unlimited:
                return wanted.scaled_to(limit) if wanted.exceeds(limit) else wanted
            ancestor = ancestor.parent()
        return wanted

    def _limit_of(self, cg: Cgroup) -> CPUMax | None:
        """`cg`'s CPU limit, read once per Enforcer; None when it does not exist (or is the root)."""
        cached = self._limits.get(cg.rel)
        if cached is not None:
            return cached
        if not cg.rel or not cg.exists():
            return None
        limit = self._limits[cg.rel] = cg.read(knobs.CPU_MAX)
        return limit

    def _write(self, cg: Cgroup, knob: Knob[T], value: T, out: Applied) -> None:
        if knob.name in self._lacking:
            out.unsupported.append(knob.name)
            return
        try:
            change = cg.write(knob, value)
        except CgroupUnsupported:
            out.unsupported.append(knob.name)
            return
        if knob is knobs.CPU_MAX:
            self._limits.pop(cg.rel, None)
        if change is not None:
            out.changes.append(change)


def _above(current: CPUMax, limit: CPUMax) -> bool:
    """A finite limit above `limit` (an unlimited child inherits its parent's limit, so it is fine)."""
    return not current.unlimited and current.exceeds(limit)
