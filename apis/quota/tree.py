"""The quota tree: ElasticQuota CRs as nodes under Koordinator's root, and which quota a pod uses.

Quotas are named cluster-wide (the `parent` label names a quota, not a namespace/name pair), as
in Koordinator. Beside the user's quotas there are three of Koordinator's own:
`koordinator-root-quota` (the tree's root, whose total is the cluster's allocatable less what the
system and default quotas use), `koordinator-system-quota` and `koordinator-default-quota`; the
last two sit outside the sharing and limit nothing unless an ElasticQuota of that name gives
them a max. A pod that names no quota, in a namespace no quota claims, uses the default quota —
so without ElasticQuota objects scheduling is exactly as it would be without the plugin.

`QuotaTree` keeps each quota's request (what its pods ask for, pending or placed) and computes
runtimes lazily: a changed request marks only the partitions on its path to the root stale, and
`runtime(name)` recomputes only the stale partitions on that quota's own path.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from apis.crds.elasticquota import ElasticQuota
from apis.errors import AnnotationError
from apis.extension import names, quotacount
from apis.extension import quota as quota_labels
from apis.k8s import resources
from apis.k8s.core import Pod
from apis.quota.runtime import partition_lists

__all__ = [
    "DEFAULT_QUOTA_NAME",
    "ROOT_QUOTA_NAME",
    "SYSTEM_QUOTA_NAME",
    "QuotaSpec",
    "QuotaTree",
    "namespace_index",
    "resolve_quota",
]

ROOT_QUOTA_NAME: Final = quota_labels.ROOT_QUOTA_NAME
DEFAULT_QUOTA_NAME: Final = quota_labels.DEFAULT_QUOTA_NAME
SYSTEM_QUOTA_NAME: Final = "koordinator-system-quota"
#: Quotas outside the sharing: they take from the cluster before the tree shares the rest.
OUTSIDE_TREE: Final = frozenset({SYSTEM_QUOTA_NAME, DEFAULT_QUOTA_NAME})


@dataclass(frozen=True, slots=True)
class QuotaSpec:
    """One quota as the algorithm sees it: min, max and shared-weight in the names quotas count
    (`apis.extension.quotacount`: `nvidia.com/gpu: 2` is `gpu-core: 200` and
    `gpu-memory-ratio: 200`). A resource missing from `max` is not limited by this quota (its
    pods' requests of it are not charged here, nor passed to the parent)."""

    name: str
    namespace: str = ""
    parent: str = ROOT_QUOTA_NAME
    is_parent: bool = False
    min: resources.ResourceList = field(default_factory=dict)
    max: resources.ResourceList = field(default_factory=dict)
    #: Defaults to max, per resource (`weight`).
    shared_weight: resources.ResourceList = field(default_factory=dict)
    allow_lent: bool = True
    namespaces: tuple[str, ...] = ()

    @classmethod
    def of(cls, quota: ElasticQuota, *, counted: bool = True) -> QuotaSpec:
        """Raises AnnotationError for a bad `shared-weight` or `namespaces` annotation.

        `counted=False` keeps min, max and shared-weight in the names as written: the admission
        webhook checks Koordinator's rules as Koordinator does, per name written, so that it
        refuses only what Koordinator refuses (the manager checks the same rules on the counted
        names and reports what breaks them there, `Valid=False`)."""
        info = quota_labels.tree_info(quota)
        count = quotacount.counted if counted else dict
        return cls(
            name=quota.meta.name,
            namespace=quota.meta.namespace,
            parent=info.parent if quota.meta.name != ROOT_QUOTA_NAME else "",
            is_parent=info.is_parent,
            min=count(quota.min),
            max=count(quota.max),
            shared_weight={**count(quota.max), **count(info.shared_weight or {})},
            allow_lent=info.allow_lent_resource,
            namespaces=_namespaces(quota),
        )

    def weight(self, name: str) -> int:
        """The shared-weight for one resource: the annotation's, else max."""
        return self.shared_weight.get(name, self.max.get(name, 0))

    def limited(self, amounts: Mapping[str, int]) -> dict[str, int]:
        """`amounts` masked to this quota's resources and capped at max; raised to min when it
        does not lend (it then holds its whole min whatever its pods ask)."""
        out = {r: min(amounts.get(r, 0), cap) for r, cap in self.max.items()}
        if not self.allow_lent:
            out = {r: max(v, self.min.get(r, 0)) for r, v in out.items()}
        return out


def _namespaces(quota: ElasticQuota) -> tuple[str, ...]:
    text = quota.meta.annotations.get(names.ANNOTATION_QUOTA_NAMESPACES)
    if not text:
        return ()
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise AnnotationError(names.ANNOTATION_QUOTA_NAMESPACES, f"not JSON: {e}", obj=quota.meta.key) from None
    if not isinstance(doc, list) or not all(isinstance(n, str) for n in doc):
        reason = "expected a JSON list of namespace names"
        raise AnnotationError(names.ANNOTATION_QUOTA_NAMESPACES, reason, obj=quota.meta.key)
    return tuple(doc)


def resolve_quota(pod: Pod, quotas: Mapping[str, QuotaSpec], listed: Mapping[str, str] | None = None) -> str:
    """The quota a pod uses: its `quota.scheduling.koordinator.sh/name` label when that quota
    exists, else a quota named after its namespace, else one whose `namespaces` annotation lists
    the namespace (the smallest name, if several), else the default quota.

    `listed` is `namespace_index(quotas)` when the caller keeps one (a lookup instead of a pass
    over every quota)."""
    named = quota_labels.pod_quota_name(pod)
    if named and named in quotas:
        return named
    if pod.namespace in quotas:
        return pod.namespace
    if listed is None:
        listed = namespace_index(quotas)
    return listed.get(pod.namespace, DEFAULT_QUOTA_NAME)


def namespace_index(quotas: Mapping[str, QuotaSpec]) -> dict[str, str]:
    """namespace -> the quota whose `namespaces` annotation lists it (the smallest name, if
    several)."""
    out: dict[str, str] = {}
    for name in sorted(quotas):
        for namespace in quotas[name].namespaces:
            out.setdefault(namespace, name)
    return out


class QuotaTree:
    """Specs, per-quota requests and the cluster total; runtimes computed lazily (module doc).

    Not thread-safe: its owner (`QuotaManager`) serialises access.
    """

    def __init__(self, specs: Iterable[QuotaSpec] = (), total: Mapping[str, int] | None = None) -> None:
        self._own: dict[str, dict[str, int]] = {}
        self._outside: dict[str, int] = {}
        self._cluster: dict[str, int] = dict(total or {})
        #: Quotas whose request or runtime changed since `drain_changed`.
        self._changed: set[str] = set()
        self.set_specs(specs)

    # --- structure ------------------------------------------------------------------------------
    def set_specs(self, specs: Iterable[QuotaSpec]) -> None:
        """Replace every user quota; requests already set are kept for quotas still present."""
        self.specs: dict[str, QuotaSpec] = {ROOT_QUOTA_NAME: QuotaSpec(ROOT_QUOTA_NAME, parent="", is_parent=True)}
        for spec in specs:
            self.specs[spec.name] = spec
        self.children: dict[str, list[str]] = {}
        for spec in self.specs.values():
            if spec.name in OUTSIDE_TREE or spec.name == ROOT_QUOTA_NAME:
                continue
            parent = spec.parent if spec.parent in self.specs else ROOT_QUOTA_NAME
            self.children.setdefault(parent, []).append(spec.name)
        for kids in self.children.values():
            kids.sort()
        self._parent = {child: p for p, kids in self.children.items() for child in kids}
        #: Per parent, per resource its children limit: the children limiting it (in name
        #: order), their mins and shared-weights: what its partition reads besides requests.
        self._terms: dict[str, list[tuple[str, list[str], list[int], list[int]]]] = {}
        for parent, kids in self.children.items():
            by_resource: dict[str, tuple[list[str], list[int], list[int]]] = {}
            for k in kids:
                spec = self.specs[k]
                for r in spec.max:
                    names_, mins, weights = by_resource.setdefault(r, ([], [], []))
                    names_.append(k)
                    mins.append(spec.min.get(r, 0))
                    weights.append(spec.weight(r))
            self._terms[parent] = [(r, *by_resource[r]) for r in sorted(by_resource)]
        #: Tree quotas breadth first from the root, and those of them with children: the order
        #: partitions are recomputed in (a parent's runtime before its children's shares).
        self._breadth_first = [ROOT_QUOTA_NAME]
        for node in self._breadth_first:  # grows while it is walked
            self._breadth_first.extend(self.children.get(node, ()))
        self._parents = [node for node in self._breadth_first if node in self.children]
        self._request: dict[str, dict[str, int]] = {}
        #: What each quota passes up to its parent (`passed_up`), kept current by `_propagate`.
        self._passed: dict[str, dict[str, int]] = {}
        self._runtime: dict[str, dict[str, int]] = {}
        self._stale: set[str] = set(self.children)
        self._changed.update(self.specs)
        for name in self._bottom_up():
            self._propagate(name)
        self._runtime[ROOT_QUOTA_NAME] = self._root_total()

    def parent_of(self, name: str) -> str | None:
        return self._parent.get(name)

    def path(self, name: str) -> list[str]:
        """From `name` up to (not including) the root; empty outside the tree. Stops at a cycle."""
        out: list[str] = []
        while name in self._parent and name not in out:
            out.append(name)
            name = self._parent[name]
        return out

    # --- inputs ---------------------------------------------------------------------------------
    @property
    def total(self) -> dict[str, int]:
        """The cluster's allocatable as last set."""
        return dict(self._cluster)

    def set_total(self, total: Mapping[str, int]) -> None:
        """The cluster's allocatable (the root's total before system and default usage)."""
        self._cluster = dict(total)
        self._refresh_root()

    def set_own_request(self, name: str, request: Mapping[str, int]) -> None:
        """What the pods of quota `name` ask for, pending or placed (unmasked)."""
        self._own[name] = dict(request)
        if name in OUTSIDE_TREE:
            self._outside_changed()
        else:
            self._propagate(name)

    def _outside_changed(self) -> None:
        self._outside = resources.sum_of(self._own.get(n, {}) for n in OUTSIDE_TREE)
        self._refresh_root()

    def _refresh_root(self) -> None:
        root = self._root_total()
        if root != self._runtime.get(ROOT_QUOTA_NAME):
            self._runtime[ROOT_QUOTA_NAME] = root
            self._stale.add(ROOT_QUOTA_NAME)
            self._changed.add(ROOT_QUOTA_NAME)

    def _root_total(self) -> dict[str, int]:
        return {r: max(v - self._outside.get(r, 0), 0) for r, v in self._cluster.items()}

    def _propagate(self, name: str) -> None:
        """Carry a change of `name`'s own request up its path: each ancestor's request moves by
        what its child passes up now minus before; a partition is stale only when what one of
        its children passes up changed, and the walk stops where nothing changes any more."""
        path = self.path(name)
        if not path:
            return
        kids = self.children.get(name, ())
        self._request[name] = resources.sum_of([self._own.get(name, {}), *(self._passed.get(k, {}) for k in kids)])
        self._changed.add(name)
        for node in path:
            before = self._passed.get(node, {})
            after = self.specs[node].limited(self._request.get(node, {}))
            if after == before:
                return
            self._passed[node] = after
            parent = self._parent[node]
            self._stale.add(parent)
            if parent == ROOT_QUOTA_NAME:
                return
            self._request[parent] = resources.add(self._request.get(parent, {}), resources.sub(after, before))
            self._changed.add(parent)

    # --- outputs --------------------------------------------------------------------------------
    def request(self, name: str) -> dict[str, int]:
        """What the quota's pods and children ask for (unmasked)."""
        return dict(self._request.get(name, self._own.get(name, {})))

    def passed_up(self, name: str) -> dict[str, int]:
        """The request the quota presents to its parent: masked to max, raised to min if it keeps it."""
        return dict(self._passed.get(name, {}))

    def runtime(self, name: str) -> dict[str, int]:
        """The quota's runtime per resource of its max; recomputes the stale partitions above it.
        The root's is the cluster's total less system and default usage; outside the tree, max."""
        if name == ROOT_QUOTA_NAME:
            return dict(self._runtime[ROOT_QUOTA_NAME])
        if name not in self._parent:
            spec = self.specs.get(name)
            return dict(spec.max) if spec is not None else {}
        for node in reversed([*self.path(name)[1:], ROOT_QUOTA_NAME]):
            if node in self._stale:
                self._repartition(node)
        return dict(self._runtime.get(name, {}))

    def runtimes(self) -> dict[str, dict[str, int]]:
        """Every quota's runtime (a full recompute of whatever is stale), parents before children."""
        self.refresh()
        out = {name: dict(self._runtime.get(name, {})) for name in self._breadth_first}
        for name in self.specs:
            if name not in out:  # outside the tree
                out[name] = self.runtime(name)
        return out

    def refresh(self, *, everything: bool = False) -> None:
        """Recompute every stale partition, parents before children; with `everything`, every
        partition (a full recompute: what the benchmark times, and a check in tests)."""
        stale = self._stale
        if everything:
            stale.update(self._parents)
        for parent in self._parents:
            if parent in stale:
                self._repartition(parent)

    def drain_changed(self) -> set[str]:
        """The quotas whose request or runtime changed since the last call (runtimes as far as
        they were recomputed: call `refresh()` first for all of them)."""
        changed, self._changed = self._changed, set()
        return changed

    def _bottom_up(self) -> list[str]:
        """Tree quotas, children before parents (so one pass sets every request)."""
        return self._breadth_first[:0:-1]

    def _repartition(self, parent: str) -> None:
        """Share the parent's runtime among its children, per resource: every child's share
        depends on every sibling's request (contention), so the whole partition is redone; a
        child whose runtime changed has its own partition marked stale in turn."""
        self._stale.discard(parent)
        kids = self.children.get(parent, ())
        total = self._runtime.get(parent, {})
        parent_max = self.specs[parent].max
        passed = self._passed
        empty: dict[str, int] = {}
        result: dict[str, dict[str, int]] = {k: {} for k in kids}
        for r, names_, mins, weights in self._terms.get(parent, ()):
            requests = [passed.get(k, empty).get(r, 0) for k in names_]
            # A parent that does not limit r (no max for it) hands each child what it asks for.
            limited = parent == ROOT_QUOTA_NAME or r in parent_max
            amount = total.get(r, 0) if limited else sum(requests)
            shares = partition_lists(amount, mins, requests, weights, quotacount.granule(r))
            for k, v in zip(names_, shares, strict=True):
                result[k][r] = v
        for k, rt in result.items():
            if self._runtime.get(k) != rt:
                self._runtime[k] = rt
                self._changed.add(k)
                if k in self.children:
                    self._stale.add(k)
