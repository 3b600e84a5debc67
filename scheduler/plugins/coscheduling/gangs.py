"""Every gang the scheduler knows, with its members counted before any is scheduled.

A `Gang` counts its members three ways — created (pods that exist, pending or not), waiting
(reserved and held at Permit, or allowed and on their way to be bound) and bound — and keeps
Koordinator's scheduling cycle for Strict gangs: once one member fails, the gang's cycle is
invalid and the members not yet tried in it are turned away at PreFilter (they would only hold
room the failed member's gang cannot use); when every pending member has been tried, the cycle
advances and is valid again.

`GangBook` maps pods to gangs and gangs to their specs; a gang from a PodGroup label waits for
its PodGroup (`spec` None until it exists): Koordinator's (`scheduling.sigs.k8s.io`) or
scheduler-plugins' (`scheduling.x-k8s.io`), whichever its members name. PodGroups of both groups
with one `namespace/name` make the gang ambiguous (`Gang.pod_group_twice`). Plain bookkeeping, no
I/O, not thread-safe (the scheduling cycle's one thread, or its lock).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from apis.crds.podgroup import PodGroup
from apis.extension import names
from apis.extension.gang import (
    UPSTREAM_DEFAULT_WAITING_SECONDS,
    GangMode,
    GangSpec,
    MatchPolicy,
    gang_name,
    joins_pod_group,
    joins_upstream_pod_group,
    spec_from_pod,
    spec_from_pod_group,
)
from apis.k8s.core import Pod

__all__ = ["Gang", "GangBook"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Gang:
    name: str
    #: None while the PodGroup its members name does not exist.
    spec: GangSpec | None = None
    #: Its members name a scheduler-plugins PodGroup (its first member says; a PodGroup that
    #: comes before any member says until then).
    upstream: bool = False
    #: PodGroups of both API groups exist under its name.
    pod_group_twice: bool = False
    #: ident -> pod, every member that exists
    members: dict[str, Pod] = field(default_factory=dict)
    waiting: set[str] = field(default_factory=set)
    bound: set[str] = field(default_factory=set)
    #: Set when the group was allowed once (match policy once-satisfied lets later members pass).
    once_satisfied: bool = False
    #: Members the group had waiting when it was allowed (the bind-gang-member-count annotation).
    binding_count: int = 0
    #: Koordinator's Strict scheduling cycle: its number, whether it is valid, each member's last.
    cycle: int = 1
    cycle_valid: bool = True
    member_cycles: dict[str, int] = field(default_factory=dict)
    #: The last reason a member failed or the gang was rejected ("" when none).
    last_failure: str = ""
    #: When its first member of this round began to wait at Permit (the plugin's clock).
    first_waiting_at: float | None = None

    @property
    def minimum(self) -> int:
        return (self.spec.min_available or 0) if self.spec is not None else 0

    @property
    def strict(self) -> bool:
        return self.spec is not None and self.spec.mode is GangMode.STRICT

    @property
    def groups(self) -> tuple[str, ...]:
        return self.spec.groups if self.spec is not None else (self.name,)

    @property
    def problems(self) -> tuple[str, ...]:
        """What is wrong with its values: each one ignored for its default, then the error that
        keeps it from being scheduled, if any."""
        if self.spec is None:
            return ()
        return (*self.spec.problems, self.spec.error) if self.spec.error else self.spec.problems

    @property
    def passes_once_satisfied(self) -> bool:
        """Once satisfied under match policy once-satisfied: later members need no wait."""
        return self.spec is not None and self.spec.match_policy is MatchPolicy.ONCE_SATISFIED and self.once_satisfied

    def valid_for_permit(self) -> bool:
        """Are enough members waiting (or bound, per the match policy) to let the gang go?"""
        if self.spec is None or self.spec.error:
            return False
        policy = self.spec.match_policy
        if policy is MatchPolicy.ONLY_WAITING:
            return len(self.waiting) >= self.minimum
        if policy is MatchPolicy.WAITING_AND_RUNNING:
            return len(self.waiting) + len(self.bound) >= self.minimum
        return len(self.waiting) >= self.minimum or self.once_satisfied

    def try_advance_cycle(self) -> bool:
        """Every pending member was tried in this cycle: the next one starts, valid. Returns
        whether it did."""
        pending = [ident for ident in self.members if ident not in self.bound]
        if not all(self.member_cycles.get(ident, 0) >= self.cycle for ident in pending):
            return False
        self.cycle += 1
        self.cycle_valid = True
        return True


class GangBook:
    """Gangs by name, the gang of each pod, and the PodGroups seen."""

    def __init__(
        self,
        *,
        default_wait: float,
        default_policy: MatchPolicy,
        upstream_wait: float = UPSTREAM_DEFAULT_WAITING_SECONDS,
    ) -> None:
        self._default_wait = default_wait
        self._default_policy = default_policy
        self._upstream_wait = upstream_wait
        self.gangs: dict[str, Gang] = {}
        self._pod_gang: dict[str, str] = {}
        #: (upstream?, namespace/name) -> PodGroup
        self._pod_groups: dict[tuple[bool, str], PodGroup] = {}

    def gang_of(self, ident: str) -> Gang | None:
        name = self._pod_gang.get(ident)
        return self.gangs.get(name) if name is not None else None

    def gang_named(self, pod: Pod) -> Gang | None:
        """The gang the pod names, without counting the pod in it."""
        name = gang_name(pod)
        return self.gangs.get(name) if name is not None else None

    def group_of(self, gang: Gang) -> list[tuple[str, Gang | None]]:
        """Every gang of `gang`'s group, by name (None for one nobody created)."""
        return [(name, self.gangs.get(name)) for name in gang.groups]

    def add_pod(self, pod: Pod) -> Gang | None:
        """Count the pod in its gang (created; bound when it has a node). Returns the gang."""
        name = gang_name(pod)
        ident = pod.uid or pod.key
        if name is None:
            self.delete_pod(pod)
            return None
        if self._pod_gang.get(ident, name) != name:
            self.delete_pod(pod)
        gang = self.gangs.get(name)
        if gang is None:
            gang = self.gangs[name] = Gang(name)
        if not gang.members and gang.upstream != (upstream := joins_upstream_pod_group(pod)):
            # The first member names the other kind than the PodGroup seen so far under this name.
            gang.upstream, gang.spec = upstream, None
        if gang.spec is None or (gang.spec.error and not gang.spec.from_pod_group):
            self._init_spec(gang, pod)
        gang.members[ident] = pod
        self._pod_gang[ident] = name
        if pod.node_name and not pod.is_terminal:
            gang.waiting.discard(ident)
            gang.bound.add(ident)
            self._restore_allowed(gang, pod)
        return gang

    @staticmethod
    def _restore_allowed(gang: Gang, pod: Pod) -> None:
        """A bound member that carries the bind-gang annotations was allowed with its group: after
        a restart the gang is known to be satisfied once, so the members still pending complete
        it rather than wait for a min that will never be waiting again (a gang half bound when
        the scheduler died)."""
        count = pod.annotations.get(names.ANNOTATION_BIND_GANG_MEMBER_COUNT, "")
        if pod.annotations.get(names.ANNOTATION_BIND_GANG_GROUP_ID):
            gang.once_satisfied = True
            if count.isdigit() and not gang.binding_count:
                gang.binding_count = int(count)

    def delete_pod(self, pod: Pod) -> None:
        ident = pod.uid or pod.key
        name = self._pod_gang.pop(ident, None)
        gang = self.gangs.get(name) if name is not None else None
        if gang is None:
            return
        gang.members.pop(ident, None)
        gang.waiting.discard(ident)
        gang.bound.discard(ident)
        gang.member_cycles.pop(ident, None)
        if not gang.members and not self._has_pod_group(gang.name):
            del self.gangs[gang.name]

    def _has_pod_group(self, name: str) -> bool:
        return (False, name) in self._pod_groups or (True, name) in self._pod_groups

    def add_pod_group(self, group: PodGroup) -> None:
        key = group.meta.key
        self._pod_groups[(group.upstream, key)] = group
        gang = self.gangs.get(key)
        if gang is None:
            gang = self.gangs[key] = Gang(key, upstream=group.upstream)
        elif not gang.members:
            gang.upstream = group.upstream
        gang.pod_group_twice = (not group.upstream, key) in self._pod_groups
        if gang.upstream == group.upstream:
            gang.spec = self._pod_group_spec(group)

    def delete_pod_group(self, group: PodGroup) -> None:
        key = group.meta.key
        self._pod_groups.pop((group.upstream, key), None)
        gang = self.gangs.get(key)
        if gang is None:
            return
        gang.pod_group_twice = False
        other = self._pod_groups.get((not group.upstream, key))
        if not gang.members:
            if other is None:
                del self.gangs[key]
            else:
                gang.upstream, gang.spec = other.upstream, self._pod_group_spec(other)
        elif gang.upstream == group.upstream and gang.spec is not None and gang.spec.from_pod_group:
            gang.spec = None

    def _init_spec(self, gang: Gang, pod: Pod) -> None:
        """The first member with the annotations sets the gang up, as in Koordinator."""
        if joins_pod_group(pod):
            group = self._pod_groups.get((gang.upstream, gang.name))
            gang.spec = self._pod_group_spec(group) if group is not None else None
            return
        spec = spec_from_pod(pod, gang.name, default_wait=self._default_wait, default_policy=self._default_policy)
        gang.spec = spec
        for problem in (*spec.problems, spec.error):
            if problem:
                log.warning("Gang annotation ignored", extra={"gang": gang.name, "pod": pod.key, "problem": problem})

    def _pod_group_spec(self, group: PodGroup) -> GangSpec:
        return spec_from_pod_group(
            group,
            default_wait=self._default_wait,
            default_policy=self._default_policy,
            upstream_wait=self._upstream_wait,
        )
