"""What the DynamicResources plugin knows of `resource.k8s.io`: DeviceClasses, ResourceClaims and
ResourceSlices, fed by its watches (`feed.py`) — and the claims its cycles allocated that the API
has not shown back yet.

One store per scheduler (every profile's plugin shares it, `Handle.scheduler_object`), as the
claims and the devices they hold are one account whatever profile placed a pod.

**Assumed claims** (kube's assume cache): Reserve records the claim as the cycle allocated it
(`status.allocation` and the pod in `status.reservedFor`), PreBind asks the binder to write just
that, and until the watch delivers a newer version of the claim, the assumed one is what every
reader sees — so the next cycle never gives its devices again, and the holdings source finds the
pod's devices when the binding is confirmed before the claim's event arrives. A newer version
from the watch replaces the assumption (it has our write, or our write will fail: PreBind's
write is conditional on the version the allocation was made from). Unreserve forgets it.

**Per-node generations**: a claim's devices belong to pools, and a node-local pool to one node;
changes bump only the generations of the nodes they touch (`node_key`), so the plugin's per-node
memo survives a placement on another node. Changes that can touch every node (a DeviceClass, a
slice or a claim's devices not local to one node) bump the global generation.

Not thread-safe: the feed's handlers run under the cache lock, as the cycle does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from apis.dra.claim import DeviceClass, ResourceClaim
from apis.dra.ledger import Held, Rounding, held_by_claims
from apis.dra.slice import ResourceSlice

__all__ = ["ClaimStore"]

_Pool = tuple[str, str]  # (driver, pool)


@dataclass(slots=True)
class _Assumed:
    claim: ResourceClaim
    #: The resourceVersion of the claim the assumption was made from.
    base: str
    #: The pod (ident) whose cycle made it.
    pod: str


@dataclass(slots=True)
class ClaimStore:
    classes: dict[str, DeviceClass] = field(default_factory=dict)
    _claims: dict[str, ResourceClaim] = field(default_factory=dict)
    _assumed: dict[str, _Assumed] = field(default_factory=dict)
    _slices: dict[str, ResourceSlice] = field(default_factory=dict)
    #: node -> slice name -> slice, for slices with a nodeName; the others in `_shared_slices`.
    _node_slices: dict[str, dict[str, ResourceSlice]] = field(default_factory=dict)
    _shared_slices: dict[str, ResourceSlice] = field(default_factory=dict)
    #: (driver, pool) -> the nodes whose slices publish it.
    _pool_nodes: dict[_Pool, set[str]] = field(default_factory=dict)
    #: claim key -> the nodes its (effective) allocation's devices are on; "" for a device not
    #: local to one node.
    _claim_nodes: dict[str, frozenset[str]] = field(default_factory=dict)
    #: node -> keys of allocated claims with devices there ("": devices reachable from anywhere).
    _node_claims: dict[str, set[str]] = field(default_factory=dict)
    generation: int = 0
    _global_generation: int = 0
    _node_generation: dict[str, int] = field(default_factory=dict)

    # --- reads ------------------------------------------------------------------------------------
    def claim(self, key: str) -> ResourceClaim | None:
        """The claim `namespace/name` as the scheduler must see it: the assumed version while
        the watch has not shown a newer one, else the watch's."""
        assumed = self._assumed.get(key)
        return assumed.claim if assumed is not None else self._claims.get(key)

    def assumed_by(self, key: str) -> str | None:
        """The pod (ident) whose cycle's assumption the claim is, if any."""
        assumed = self._assumed.get(key)
        return assumed.pod if assumed is not None else None

    def claims(self) -> list[ResourceClaim]:
        """Every claim, as `claim` sees it, by key."""
        keys = sorted(self._claims.keys() | self._assumed.keys())
        return [c for c in (self.claim(k) for k in keys) if c is not None]

    def slices_for(self, node: str) -> list[ResourceSlice]:
        """The slices whose devices may be reachable from `node`: its own, and those of no node."""
        return [*self._node_slices.get(node, {}).values(), *self._shared_slices.values()]

    def slices(self) -> list[ResourceSlice]:
        return [self._slices[name] for name in sorted(self._slices)]

    def has_slices(self, node: str) -> bool:
        return bool(self._node_slices.get(node)) or bool(self._shared_slices)

    def node_key(self, node: str) -> tuple[int, int]:
        """Changes whenever what the allocator sees on `node` of this store may have changed."""
        return self._global_generation, self._node_generation.get(node, 0)

    def held_on(self, node: str, *, besides: Iterable[str] = (), rounding: Rounding | None = None) -> Held:
        """What allocated claims hold of devices reachable from `node` (claims `besides` left
        out: a claim being allocated again does not count against itself), each share counted
        by `rounding`."""
        keys = self._node_claims.get(node, set()) | self._node_claims.get("", set())
        claims = (c for c in (self.claim(k) for k in sorted(keys)) if c is not None)
        return held_by_claims(claims, besides=besides, rounding=rounding)

    # --- the feed ---------------------------------------------------------------------------------
    def put_class(self, klass: DeviceClass) -> None:
        self.classes[klass.name] = klass
        self._bump_all()

    def delete_class(self, klass: DeviceClass) -> None:
        self.classes.pop(klass.name, None)
        self._bump_all()

    def put_claim(self, claim: ResourceClaim) -> None:
        key = claim.key
        self._claims[key] = claim
        assumed = self._assumed.get(key)
        if assumed is not None and assumed.base != claim.meta.resource_version:
            del self._assumed[key]  # newer than what the assumption was made from
        self._reindex(key)

    def delete_claim(self, claim: ResourceClaim) -> None:
        self._claims.pop(claim.key, None)
        self._assumed.pop(claim.key, None)
        self._reindex(claim.key)

    def put_slice(self, s: ResourceSlice) -> None:
        self._drop_slice(s.name)
        self._slices[s.name] = s
        if s.node_name:
            self._node_slices.setdefault(s.node_name, {})[s.name] = s
            self._pool_nodes.setdefault((s.driver, s.pool.name), set()).add(s.node_name)
            self._bump(s.node_name)
        else:
            self._shared_slices[s.name] = s
            self._bump_all()

    def delete_slice(self, s: ResourceSlice) -> None:
        self._drop_slice(s.name)

    # --- the cycle --------------------------------------------------------------------------------
    def assume(self, claim: ResourceClaim, *, base: str, pod: str) -> None:
        """Record `claim` as a cycle of `pod` allocated or reserved it (Reserve), made from the
        claim at resourceVersion `base`."""
        self._assumed[claim.key] = _Assumed(claim, base, pod)
        self._reindex(claim.key)

    def forget(self, key: str, *, pod: str) -> None:
        """Undo `assume` of `pod` (Unreserve). Idempotent; another pod's assumption stays."""
        assumed = self._assumed.get(key)
        if assumed is not None and assumed.pod == pod:
            del self._assumed[key]
            self._reindex(key)

    # --- internals --------------------------------------------------------------------------------
    def _drop_slice(self, name: str) -> None:
        old = self._slices.pop(name, None)
        if old is None:
            return
        if old.node_name:
            self._node_slices.get(old.node_name, {}).pop(name, None)
            if not self._node_slices.get(old.node_name):
                self._node_slices.pop(old.node_name, None)
            pool = (old.driver, old.pool.name)
            still = any(
                s.driver == pool[0] and s.pool.name == pool[1]
                for s in self._node_slices.get(old.node_name, {}).values()
            )
            if not still:
                self._pool_nodes.get(pool, set()).discard(old.node_name)
            self._bump(old.node_name)
        else:
            self._shared_slices.pop(name, None)
            self._bump_all()

    def _nodes_of(self, claim: ResourceClaim | None) -> frozenset[str]:
        if claim is None or claim.allocation is None:
            return frozenset()
        out: set[str] = set()
        for result in claim.allocation.results:
            nodes = self._pool_nodes.get((result.driver, result.pool))
            out |= nodes if nodes else {""}
        return frozenset(out)

    def _reindex(self, key: str) -> None:
        old = self._claim_nodes.pop(key, frozenset())
        new = self._nodes_of(self.claim(key))
        if new:
            self._claim_nodes[key] = new
        for node in old - new:
            self._node_claims.get(node, set()).discard(key)
        for node in new - old:
            self._node_claims.setdefault(node, set()).add(key)
        for node in old | new:
            if node:
                self._bump(node)
            else:
                self._bump_all()
        self.generation += 1

    def _bump(self, node: str) -> None:
        self.generation += 1
        self._node_generation[node] = self.generation

    def _bump_all(self) -> None:
        self.generation += 1
        self._global_generation = self.generation
