"""The elastic quota state of one cluster view: quotas, pods, request, used, runtime.

Stateful and thread-safe, so not in `apis/` (the protocol, pure): the rules it applies are
`apis.quota`'s — the tree, a pod's charge, the runtime algorithm, the tree's rules — and this is
the one bookkeeping over them that the scheduler (the ElasticQuota plugin, what-if, the simulator)
and the controller (quota status, reclaim, the admission webhook) share, so both compute the same
numbers. It does no I/O and imports only `apis`: the scheduler's pure core may use it (an import
contract allows it `kube.quotas` and nothing else of kube).

Fed by whoever knows the cluster — the scheduler's informers, what-if from a snapshot, the
controller's — and read by the ElasticQuota plugin and the controller's quota status writer.
Every pod the manager is told of counts in its quota's *request* (pending or placed: the runtime
is shared out by demand, as in Koordinator); a pod counts in *used* once it is bound (it has a
node) or reserved by a scheduling cycle, and stops when it is unreserved or deleted. What it
counts is its charge (`apis.quota.charge`): every spelling of a device resource in the names
quotas count. A quota's used is kept for it alone and for its subtree (it and every quota below
it: what `status.used` shows, and what admission checks against each ancestor's max). Thread-safe:
informer threads and the scheduling loop share it.

`drain_changes()` names the quotas whose figures (request, used, runtime) may have moved since
it was last called, so that a reader that shows every quota (the controller) redoes only those.

A quota that breaks the tree's rules (created before any webhook refused it) is kept and
reported through `problems()`; it never raises out of here.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from apis.crds.elasticquota import ElasticQuota
from apis.errors import AnnotationError
from apis.extension import quota as quota_labels
from apis.extension.gang import GangSpec, gang_from_pod
from apis.extension.quotacount import Capacity
from apis.k8s import resources
from apis.k8s.core import Pod
from apis.quota import rules
from apis.quota.charge import charge_of
from apis.quota.tree import OUTSIDE_TREE, QuotaSpec, QuotaTree, namespace_index, resolve_quota

__all__ = ["Admission", "QuotaManager"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Admission:
    """The quota check for one pod: `message` is empty when it fits."""

    quota: str
    message: str = ""
    exceeded: tuple[str, ...] = ()

    @property
    def admitted(self) -> bool:
        return not self.message


@dataclass(slots=True)
class _Charge:
    quota: str
    request: dict[str, int]
    preemptible: bool
    bound: bool
    reserved: bool = False
    #: The pod's gang (`namespace/name`) and the gangs of its gang group (its own included);
    #: empty for a pod on its own.
    gang: str = ""
    gangs: tuple[str, ...] = ()
    #: The GPU memory ratio in `request` is an estimate from the cluster's smallest GPU.
    estimated: bool = False

    @property
    def used(self) -> bool:
        return self.bound or self.reserved

    def same_claim(self, other: _Charge) -> bool:
        """Same quota, request, preemptibility and gang: only used may differ."""
        return (
            self.quota == other.quota
            and self.request == other.request
            and self.preemptible == other.preemptible
            and self.gang == other.gang
            and self.gangs == other.gangs
        )


class QuotaManager:
    """See the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._quotas: dict[str, ElasticQuota] = {}
        self._specs: dict[str, QuotaSpec] = {}
        #: namespace -> the quota whose `namespaces` annotation claims it (`namespace_index`)
        self._listed: dict[str, str] = {}
        self._bad: dict[str, list[str]] = {}
        self._tree = QuotaTree()
        self._pods: dict[str, tuple[Pod, _Charge]] = {}
        self._request: dict[str, dict[str, int]] = {}
        self._used: dict[str, dict[str, int]] = {}
        self._non_preemptible_used: dict[str, dict[str, int]] = {}
        #: The same two for each quota's subtree (the quota and every quota below it).
        self._subtree_used: dict[str, dict[str, int]] = {}
        self._subtree_non_preemptible: dict[str, dict[str, int]] = {}
        #: Bytes of the cluster's smallest GPU (`Capacity.gpu_memory`), for estimated charges.
        self._gpu_memory = 0
        #: Idents of the pods whose charge holds an estimate (redone when `_gpu_memory` changes).
        self._estimated: set[str] = set()
        #: Quotas whose figures may have changed since `drain_changes` (the tree keeps its own).
        self._changed: set[str] = set()
        #: gang name (`namespace/name`) -> idents of its pods, for the gang-wide check
        self._gang_pods: dict[str, set[str]] = {}
        self._limited: frozenset[str] = frozenset()
        self._stale = False

    @contextlib.contextmanager
    def _current(self) -> Iterator[None]:
        """Hold the lock, with the tree rebuilt if quotas changed since it was built."""
        with self._lock:
            if self._stale:
                self._stale = False
                self._rebuild()
            yield

    # --- quotas -----------------------------------------------------------------------------------
    # Quota changes only mark the tree stale; the next read or pod change rebuilds it once, so an
    # informer's first list of N quotas costs one rebuild, not N.
    def set_quota(self, quota: ElasticQuota) -> None:
        with self._lock:
            self._quotas[quota.meta.name] = quota
            self._stale = True
            self._changed.add(quota.meta.name)

    def remove_quota(self, name: str) -> None:
        with self._lock:
            if self._quotas.pop(name, None) is not None:
                self._stale = True
                self._changed.add(name)

    def set_quotas(self, quotas: Iterable[ElasticQuota]) -> None:
        with self._lock:
            self._changed.update(self._quotas)
            self._quotas = {q.meta.name: q for q in quotas}
            self._stale = True

    def set_cluster_total(self, total: Mapping[str, int]) -> None:
        """The cluster's allocatable in the names quotas count (`quotacount.capacity_of`)."""
        with self._lock:
            self._tree.set_total(total)

    def set_capacity(self, capacity: Capacity) -> None:
        """The cluster as quotas see it (`quotacount.capacity_of` over the nodes' allocatable):
        the root's total, and the smallest GPU that estimated charges are made against."""
        with self._current():
            self._tree.set_total(capacity.total)
            if capacity.gpu_memory == self._gpu_memory:
                return
            self._gpu_memory = capacity.gpu_memory
            for ident in sorted(self._estimated):
                pod, charge = self._pods[ident]
                self._remove(ident)
                self._add(pod, reserved=charge.reserved)

    @property
    def has_quotas(self) -> bool:
        """Whether any ElasticQuota exists (without one, every pod's quota limits nothing)."""
        return bool(self._quotas)

    def problems(self) -> dict[str, list[str]]:
        """Per quota, the rules it breaks (a bad annotation included)."""
        with self._current():
            return {name: list(found) for name, found in self._bad.items()}

    def _rebuild(self) -> None:
        specs: dict[str, QuotaSpec] = {}
        bad: dict[str, list[str]] = {}
        for name, quota in self._quotas.items():
            try:
                specs[name] = QuotaSpec.of(quota)
            except AnnotationError as e:
                bad[name] = [str(e)]
        for name, found in rules.validate_tree(specs).items():
            bad.setdefault(name, []).extend(found)
        for name, found in bad.items():
            if self._bad.get(name) != found:
                log.warning("Invalid quota", extra={"quota": name, "problems": found})
        self._changed.update(self._specs, specs)
        self._specs, self._bad = specs, bad
        self._limited = frozenset(r for spec in specs.values() for r in spec.max)
        self._listed = namespace_index(specs)
        # Pods may resolve to other quotas now: account every one again on a fresh tree.
        self._tree = QuotaTree(specs.values(), total=self._tree.total)
        charges = [(pod, charge.reserved) for pod, charge in self._pods.values()]
        self._pods.clear()
        self._request.clear()
        self._used.clear()
        self._non_preemptible_used.clear()
        self._subtree_used.clear()
        self._subtree_non_preemptible.clear()
        self._gang_pods.clear()
        self._estimated.clear()
        for pod, reserved in charges:
            self._add(pod, reserved=reserved)

    # --- pods ---------------------------------------------------------------------------------------
    def update_pod(self, pod: Pod) -> None:
        """A pod was added or changed: pending pods count in request; bound ones in used too."""
        with self._current():
            ident = pod.uid or pod.key
            entry = self._pods.get(ident)
            if entry is not None and not pod.is_terminal:
                new = self._charge_of(pod, reserved=entry[1].reserved)
                if new.same_claim(entry[1]):
                    # The common update (bound, a status change): only used may move. The request,
                    # and so every runtime, stays as it is.
                    self._pods[ident] = (pod, entry[1])
                    self._set_used(entry[1], bound=new.bound, reserved=new.reserved)
                    return
            old = self._remove(ident)
            if not pod.is_terminal:
                self._add(pod, reserved=old is not None and old.reserved)

    def remove_pod(self, pod: Pod) -> None:
        with self._current():
            self._remove(pod.uid or pod.key)

    def reserve(
        self, pod: Pod, requests: Mapping[str, int] | None = None, *, claims: Mapping[str, int] | None = None
    ) -> None:
        """A scheduling cycle placed the pod (assumed, not yet bound): it counts in used.
        `requests` is the pod's effective request when the caller has it (saves recomputing);
        `claims` what the claims the cycle allocated charge (`apis.dra.quota`), before the pod's
        record says it."""
        with self._current():
            ident = pod.uid or pod.key
            if ident in self._pods and claims:
                self._remove(ident)
            if ident not in self._pods:
                self._add(pod, reserved=True, requests=requests, claims=claims)
            else:
                self._set_reserved(ident, True)

    def unreserve(self, pod: Pod) -> None:
        """Undo `reserve` (the cycle failed after Reserve). Idempotent."""
        with self._current():
            self._set_reserved(pod.uid or pod.key, False)

    def _set_reserved(self, ident: str, reserved: bool) -> None:
        entry = self._pods.get(ident)
        if entry is None or entry[1].reserved == reserved:
            return
        self._set_used(entry[1], bound=entry[1].bound, reserved=reserved)

    def _set_used(self, charge: _Charge, *, bound: bool, reserved: bool) -> None:
        """Move a charge in or out of used (bound, reserved); its request is untouched."""
        was = charge.used
        charge.bound, charge.reserved = bound, reserved and not bound
        if charge.used != was:
            self._account_used(charge, +1 if charge.used else -1)

    def _charge_of(
        self,
        pod: Pod,
        *,
        reserved: bool,
        requests: Mapping[str, int] | None = None,
        claims: Mapping[str, int] | None = None,
    ) -> _Charge:
        asked = charge_of(pod, requests, gpu_memory=self._gpu_memory, claims=claims)
        charge = _Charge(
            resolve_quota(pod, self._specs, self._listed),
            asked.amounts,
            quota_labels.is_preemptible(pod),
            bool(pod.node_name),
            estimated=asked.estimated,
        )
        charge.reserved = reserved and not charge.bound
        gang = _gang_of(pod)
        if gang is not None:
            charge.gang, charge.gangs = gang.name, gang.groups
        return charge

    def _add(
        self,
        pod: Pod,
        *,
        reserved: bool,
        requests: Mapping[str, int] | None = None,
        claims: Mapping[str, int] | None = None,
    ) -> None:
        self._put(pod, self._charge_of(pod, reserved=reserved, requests=requests, claims=claims))

    def _put(self, pod: Pod, charge: _Charge) -> None:
        ident = pod.uid or pod.key
        self._pods[ident] = (pod, charge)
        if charge.gang:
            self._gang_pods.setdefault(charge.gang, set()).add(ident)
        if charge.estimated:
            self._estimated.add(ident)
        self._account(charge, +1)

    def _remove(self, ident: str) -> _Charge | None:
        entry = self._pods.pop(ident, None)
        if entry is None:
            return None
        self._estimated.discard(ident)
        gang = entry[1].gang
        if gang:
            members = self._gang_pods.get(gang, set())
            members.discard(ident)
            if not members:
                self._gang_pods.pop(gang, None)
        self._account(entry[1], -1)
        return entry[1]

    def _account(self, charge: _Charge, sign: int) -> None:
        if not charge.request:
            return
        delta = resources.scale(charge.request, sign)
        self._request[charge.quota] = _nonzero(resources.add(self._request.get(charge.quota, {}), delta))
        self._changed.add(charge.quota)
        if charge.quota not in OUTSIDE_TREE:
            self._tree.set_own_request(charge.quota, self._request[charge.quota])
        if charge.used:
            self._account_used(charge, sign)

    def _chain(self, quota: str) -> list[str]:
        """The quota and its ancestors below the root (the quota alone outside the tree)."""
        return self._tree.path(quota) or [quota]

    def _account_used(self, charge: _Charge, sign: int) -> None:
        if not charge.request:
            return
        delta = resources.scale(charge.request, sign)
        self._used[charge.quota] = _nonzero(resources.add(self._used.get(charge.quota, {}), delta))
        chain = self._chain(charge.quota)
        self._changed.update(chain)
        for name in chain:
            self._subtree_used[name] = _nonzero(resources.add(self._subtree_used.get(name, {}), delta))
        if not charge.preemptible:
            table = self._non_preemptible_used
            table[charge.quota] = _nonzero(resources.add(table.get(charge.quota, {}), delta))
            for name in chain:
                subtree = self._subtree_non_preemptible
                subtree[name] = _nonzero(resources.add(subtree.get(name, {}), delta))
        if charge.quota in OUTSIDE_TREE:
            # The root's total is the cluster less what the system and default quotas *use*
            # (Koordinator's totalResourceExceptSystemAndDefaultUsed): their pending pods take
            # nothing. Other quotas' used never moves a runtime.
            self._tree.set_own_request(charge.quota, self._used[charge.quota])

    # --- reads ----------------------------------------------------------------------------------------
    def quota_of(self, pod: Pod) -> str:
        with self._current():
            entry = self._pods.get(pod.uid or pod.key)
            return entry[1].quota if entry is not None else resolve_quota(pod, self._specs, self._listed)

    def has_quota(self, name: str) -> bool:
        """Whether an ElasticQuota of this name exists (the default quota, without one, limits
        nothing)."""
        with self._current():
            return name in self._specs

    def used(self, name: str) -> dict[str, int]:
        with self._current():
            return dict(self._used.get(name, {}))

    def non_preemptible_used(self, name: str) -> dict[str, int]:
        """What the quota's own non-preemptible pods use (bound or reserved)."""
        with self._current():
            return dict(self._non_preemptible_used.get(name, {}))

    def subtree_used(self, name: str) -> dict[str, int]:
        """What the pods of the quota and of every quota below it use (`status.used`)."""
        with self._current():
            return dict(self._subtree_used.get(name, {}))

    def subtree_non_preemptible_used(self, name: str) -> dict[str, int]:
        with self._current():
            return dict(self._subtree_non_preemptible.get(name, {}))

    def charge(self, pod: Pod) -> dict[str, int]:
        """What the pod is charged (as the manager counts it now; computed for a pod it was not
        told of)."""
        with self._current():
            entry = self._pods.get(pod.uid or pod.key)
            if entry is not None:
                return dict(entry[1].request)
            return charge_of(pod, gpu_memory=self._gpu_memory).amounts

    def is_leaf(self, name: str) -> bool:
        """Whether pods may use the quota and reclaim may take from it: it exists, is in the
        tree, is no parent and breaks no rule."""
        with self._current():
            spec = self._specs.get(name)
            return spec is not None and not spec.is_parent and name not in OUTSIDE_TREE and name not in self._bad

    def drain_changes(self) -> set[str]:
        """The quotas (names; the root's included) whose request, used or runtime may have
        changed since the last call, with every stale runtime recomputed first."""
        with self._current():
            self._tree.refresh()
            changed = self._changed | self._tree.drain_changed()
            self._changed = set()
            return changed

    def runtime(self, name: str) -> dict[str, int]:
        with self._current():
            return self._tree.runtime(name)

    def request(self, name: str) -> dict[str, int]:
        with self._current():
            return self._tree.request(name)

    def recompute(self) -> None:
        """Recompute every quota's runtime from the current requests (a full recompute: reads
        otherwise recompute only the stale partitions on their own path)."""
        with self._current():
            self._tree.refresh(everything=True)

    def limited_resources(self) -> frozenset[str]:
        """The resources some quota limits (has in its max)."""
        with self._current():
            return self._limited

    def spec(self, name: str) -> QuotaSpec | None:
        """The quota as the algorithm sees it (None: no such quota, or it does not parse)."""
        with self._current():
            return self._specs.get(name)

    def specs(self) -> dict[str, QuotaSpec]:
        with self._current():
            return dict(self._specs)

    def admit(
        self,
        pod: Pod,
        requests: Mapping[str, int] | None = None,
        *,
        without: Iterable[Pod] = (),
        ahead: Iterable[Pod] = (),
        claims: Mapping[str, int] | None = None,
    ) -> Admission:
        """Does the pod fit its quota? `used + request ≤ runtime` in every resource the quota
        limits that the pod asks for; a non-preemptible pod must also fit within min.

        `without`: pods to count as gone from used (preemption asks whether evicting them
        would make room; the runtime is left as it is now, as Koordinator's check does).
        `ahead`: pods nominated by preemption that this pod must leave room for (those of at
        least its priority): not placed yet, they count in their quota's used for this check,
        so the room their victims free stays theirs.
        `claims`: what the pod's claims charge, as a cycle allocated them (`apis.dra.quota`): the
        pod is checked with them (its account is left as it was).

        Changes nothing: a pod the manager was not told of (explain, the gRPC what-if, a
        caller that feeds no pods) counts in its quota's request only for this answer."""
        with self._current():
            others = _Others(self._charges(without), self._charges(ahead))
            ident = pod.uid or pod.key
            known = self._pods.get(ident)
            if known is not None and claims:
                self._remove(ident)
                self._add(known[0], reserved=False, requests=requests, claims=claims)
                try:
                    return self._check(self._pods[ident][1], others)
                finally:
                    self._remove(ident)
                    self._put(*known)
            if known is not None:
                return self._check(known[1], others)
            name = resolve_quota(pod, self._specs, self._listed)
            if name not in self._specs:
                return Admission(name)  # the default quota, unless a CR gives it a max
            self._add(pod, reserved=False, requests=requests, claims=claims)
            try:
                return self._check(self._pods[ident][1], others)
            finally:
                self._remove(ident)

    def _charges(self, pods: Iterable[Pod]) -> list[_Charge]:
        return [entry[1] for p in pods if (entry := self._pods.get(p.uid or p.key)) is not None]

    def _check(self, charge: _Charge, others: _Others) -> Admission:
        """The pod's check; for a member of a gang not yet placed, the gang's: every member of
        its gang group that is not placed (bound or reserved) yet must fit together, in each
        quota they draw on — the pod's own quota first — and then within the max of every
        ancestor of those quotas, with everything below that ancestor."""
        counted = charge if charge.used else None
        by_quota: dict[str, list[_Charge]] = {}
        if charge.used or not charge.gangs:
            by_quota[charge.quota] = [charge]
            gang: tuple[str, ...] = ()
        else:
            for member in self._unplaced(charge):
                by_quota.setdefault(member.quota, []).append(member)
            gang = charge.gangs
        for name in sorted(by_quota, key=lambda q: (q != charge.quota, q)):
            verdict = self._check_quota(name, by_quota[name], others, counted=counted, gang=gang)
            if not verdict.admitted:
                return verdict
        if charge.quota not in self._specs:
            return Admission(charge.quota)
        # Ancestors, nearest the pod's own quota first: what their subtree uses, plus the pods
        # asking below them, within their max (runtimes below already partition theirs; this
        # holds where a child does not limit a resource its parent does).
        below: dict[str, list[_Charge]] = {}
        order: list[str] = []
        for name in sorted(by_quota, key=lambda q: (q != charge.quota, q)):
            for ancestor in self._tree.path(name)[1:]:
                if ancestor not in below:
                    order.append(ancestor)
                below.setdefault(ancestor, []).extend(by_quota[name])
        for ancestor in order:
            verdict = self._check_ancestor(ancestor, charge.quota, below[ancestor], others, counted=counted, gang=gang)
            if not verdict.admitted:
                return verdict
        return Admission(charge.quota)

    def _check_ancestor(
        self,
        name: str,
        quota: str,
        asking: list[_Charge],
        others: _Others,
        *,
        counted: _Charge | None,
        gang: tuple[str, ...],
    ) -> Admission:
        """Do the `asking` pods fit ancestor `name`'s max, with what its whole subtree uses?"""
        spec = self._specs.get(name)
        if spec is None:
            return Admission(quota)
        total = resources.sum_of([c.request for c in asking]) if len(asking) > 1 else asking[0].request
        asked = {r: v for r, v in total.items() if r in spec.max}
        if not asked:
            return Admission(quota)
        used = self._subtree_used.get(name, {})
        if counted is not None:
            used = resources.sub(used, counted.request)
        used, held = others.adjust(used, lambda q: name in self._chain(q), asking, protected_only=False)
        over = tuple(sorted(r for r, v in asked.items() if used.get(r, 0) + v > spec.max[r]))
        if not over:
            return Admission(quota)
        path = self._tree.path(quota)
        topo = [name, *reversed(path[: path.index(name)])] if name in path else [name]

        def show(amounts: Mapping[str, int]) -> str:
            return _show({r: amounts.get(r, 0) for r in asked})

        whose = "gang's request" if len(asking) > 1 else "pod's request"
        message = (
            f"Insufficient quotas, quotaNameTopo: [{' '.join(topo)}], max: {show(spec.max)}, used: {show(used)}, "
            f"{whose}: {show(asked)}, exceedDimensions: [{', '.join(over)}]: quota {name} limits its whole subtree"
        )
        if len(asking) > 1:
            message += f", gang: {', '.join(gang)} ({len(asking)} pods not yet placed)"
        if held:
            message += f", used includes pods nominated ahead: {_show({r: held.get(r, 0) for r in asked})}"
        return Admission(quota, message, over)

    def _unplaced(self, charge: _Charge) -> list[_Charge]:
        """The members of the charge's gang group not placed yet (the charge itself included)."""
        out = [charge]
        for gang in charge.gangs:
            for ident in self._gang_pods.get(gang, ()):
                member = self._pods[ident][1]
                if member is not charge and not member.used:
                    out.append(member)
        return out

    def _check_quota(
        self,
        name: str,
        asking: list[_Charge],
        others: _Others,
        *,
        counted: _Charge | None = None,
        gang: tuple[str, ...] = (),
    ) -> Admission:
        """Do the `asking` pods (of quota `name`) fit it together? `counted`: a pod asked again
        after Reserve, already in used (not counted twice)."""
        spec = self._specs.get(name)
        if spec is None:
            return Admission(name)
        if name in self._bad:
            return Admission(name, f"quota {name} is invalid: {'; '.join(self._bad[name])}")
        on_parent = rules.pod_on_parent(spec)
        if on_parent:
            return Admission(name, on_parent)
        total = resources.sum_of([c.request for c in asking]) if len(asking) > 1 else asking[0].request
        asked = {r: v for r, v in total.items() if r in spec.max}
        runtime = self._tree.runtime(name)
        checks: list[tuple[str, Mapping[str, int], dict[str, dict[str, int]]]] = [("runtime", runtime, self._used)]
        if any(not c.preemptible for c in asking):
            checks.append(("min", spec.min, self._non_preemptible_used))
        for label, limit, table in checks:
            used = table.get(name, {})
            if counted is not None:  # asked again after Reserve: do not count the pod twice
                used = resources.sub(used, counted.request)
            used, held = others.adjust(used, lambda q: q == name, asking, protected_only=label == "min")
            wanted = asked
            if label == "min" and len(asking) > 1:
                protected = resources.sum_of([c.request for c in asking if not c.preemptible])
                wanted = {r: v for r, v in protected.items() if r in spec.max}
            over = tuple(sorted(r for r, v in wanted.items() if used.get(r, 0) + v > limit.get(r, 0)))
            if over:
                message = _message(spec, label, limit=limit, runtime=runtime, used=used, asked=wanted, over=over)
                if len(asking) > 1:
                    message = message.replace("pod's request", "gang's request", 1)
                    message += f", gang: {', '.join(gang)} ({len(asking)} pods not yet placed)"
                if held:
                    message += f", used includes pods nominated ahead: {_show({r: held.get(r, 0) for r in wanted})}"
                return Admission(name, message, over)
        return Admission(name)


@dataclass(frozen=True, slots=True)
class _Others:
    """Pods whose charges a check counts differently: `gone` (victims, as if evicted) and
    `ahead` (nominated pods, as if placed)."""

    gone: list[_Charge]
    ahead: list[_Charge]

    def adjust(
        self, used: Mapping[str, int], within: Callable[[str], bool], asking: list[_Charge], *, protected_only: bool
    ) -> tuple[dict[str, int], dict[str, int]]:
        """`used` of the quotas `within` says (one quota, or a subtree) less the gone and plus
        the pods ahead (only non-preemptible ones for the min check), and what the pods ahead
        added."""
        out = dict(used)
        for other in self.gone:
            if within(other.quota) and other.used and not (protected_only and other.preemptible):
                out = resources.sub(out, other.request)
        held: dict[str, int] = {}
        for other in self.ahead:
            wanted = within(other.quota) and not other.used and not (protected_only and other.preemptible)
            if wanted and all(other is not mine for mine in asking):
                held = resources.add(held, other.request)
        return (resources.add(out, held) if held else out), held


def _message(
    spec: QuotaSpec,
    label: str,
    *,
    limit: Mapping[str, int],
    runtime: Mapping[str, int],
    used: Mapping[str, int],
    asked: Mapping[str, int],
    over: tuple[str, ...],
) -> str:
    """Koordinator's shape, plus max (and min for a non-preemptible pod) to say why."""

    def show(amounts: Mapping[str, int]) -> str:
        return _show({r: amounts.get(r, 0) for r in asked})

    head = "Insufficient quotas" if label == "runtime" else "Insufficient non-preemptible quotas"
    return (
        f"{head}, quotaName: {spec.name}, runtime: {show(runtime)}, used: {show(used)}, "
        f"pod's request: {show(asked)}, exceedDimensions: [{', '.join(over)}], max: {show(spec.max)}"
        + (f", min: {show(limit)}" if label == "min" else "")
    )


def _show(amounts: Mapping[str, int]) -> str:
    return "{" + ", ".join(f"{r}: {q}" for r, q in sorted(resources.format_list(amounts).items())) + "}"


def _nonzero(amounts: Mapping[str, int]) -> dict[str, int]:
    return {r: v for r, v in amounts.items() if v}


def _gang_of(pod: Pod) -> GangSpec | None:
    """The pod's gang, by the one gang parser (every way a pod names one: Koordinator's PodGroup
    label, lightweight label or annotation, scheduler-plugins' PodGroup label); None for a pod
    on its own, or whose gang does not parse or is named twice (the Coscheduling plugin refuses
    it with the reason; here it is checked as a pod on its own)."""
    try:
        return gang_from_pod(pod)
    except AnnotationError:
        return None
