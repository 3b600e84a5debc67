"""DynamicResources' feeds (`scheduler.framework.feeds`): DeviceClasses, ResourceClaims and
ResourceSlices into the scheduler's one `ClaimStore`, and what each change means.

Registered once for every profile (`key`): the store is one per scheduler. The three watches are
required (scheduling waits for their first lists, so claims allocated before a restart are known
before any pod is placed) — on a cluster without `resource.k8s.io` they fail to list, as any
informer of a missing kind, and the scheduler says so.

- a claim changed: the consumers it names (before and after) are counted again in the cache
  (`ClusterCache.refresh_holdings`: the holdings source reads their claims), and `CLAIM_CHANGED`
  moves pods DynamicResources refused (a claim created, allocated, deallocated);
- a slice changed: the pods holding claims on its node are counted again (which DRA device is
  which GPU may have changed) and `SLICE_CHANGED` moves pods; a DeviceClass: `CLASS_CHANGED`,
  and the scheduler's index of the classes serving extended resources is rebuilt.

An object that does not parse is a Warning Event on it (`FailedParsing`), and the store keeps
its last valid version (the informer's contract).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from apis.dra import DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_SLICES
from apis.dra.claim import DeviceClass, ResourceClaim
from apis.dra.slice import ResourceSlice
from apis.errors import TesseraError
from apis.extension.names import GroupVersionResource
from scheduler.cache import ClusterCache
from scheduler.framework.events import ClusterEvent, EventAction
from scheduler.framework.extended import ExtendedClasses
from scheduler.framework.feeds import About, Feeds, Handlers, Watch
from scheduler.plugins.dynamicresources.store import ClaimStore

__all__ = ["CLAIMS", "CLAIM_CHANGED", "CLASSES", "CLASS_CHANGED", "SLICES", "SLICE_CHANGED", "watch"]

CLASSES: Final = Watch(DEVICE_CLASSES, DeviceClass.from_dict)
CLAIMS: Final = Watch(RESOURCE_CLAIMS, ResourceClaim.from_dict)
SLICES: Final = Watch(RESOURCE_SLICES, ResourceSlice.from_dict)
CLASS_CHANGED: Final = ClusterEvent(DEVICE_CLASSES.kind, EventAction.ALL, "DeviceClassChange")
CLAIM_CHANGED: Final = ClusterEvent(RESOURCE_CLAIMS.kind, EventAction.ALL, "ResourceClaimChange")
SLICE_CHANGED: Final = ClusterEvent(RESOURCE_SLICES.kind, EventAction.ALL, "ResourceSliceChange")
REASON_FAILED_PARSING: Final = "FailedParsing"


def watch(
    feeds: Feeds, store: ClaimStore, cache: ClusterCache, *, key: str, classes: ExtendedClasses | None = None
) -> None:
    """Keep `store` current from the three watches (once per scheduler: `key`), and `classes`
    (the scheduler's index of the classes serving extended resources) with the store's classes."""

    def refresh(claims: Iterable[ResourceClaim | None]) -> None:
        for uid in sorted({c.uid for claim in claims if claim is not None for c in claim.reserved_for}):
            cache.refresh_holdings(uid)

    def claim_added(claim: ResourceClaim) -> None:
        store.put_claim(claim)
        refresh([claim])
        feeds.emit(CLAIM_CHANGED)

    def claim_updated(old: ResourceClaim, new: ResourceClaim) -> None:
        before = store.claim(new.key)
        store.put_claim(new)
        refresh([old, before, new])
        feeds.emit(CLAIM_CHANGED)

    def claim_deleted(claim: ResourceClaim) -> None:
        before = store.claim(claim.key)
        store.delete_claim(claim)
        refresh([claim, before])
        feeds.emit(CLAIM_CHANGED)

    def slice_changed(s: ResourceSlice, *, deleted: bool = False) -> None:
        (store.delete_slice if deleted else store.put_slice)(s)
        if s.node_name:
            refresh(c for c in store.claims() if c.allocation is not None and _on(c, s))
        feeds.emit(SLICE_CHANGED)

    def class_changed(klass: DeviceClass, *, deleted: bool = False) -> None:
        (store.delete_class if deleted else store.put_class)(klass)
        if classes is not None:
            classes.set(store.classes.values())
        feeds.emit(CLASS_CHANGED)

    def invalid(resource: GroupVersionResource) -> Any:
        def said(raw: Mapping[str, Any], error: TesseraError) -> None:
            feeds.warn(About.raw(resource, raw), REASON_FAILED_PARSING, f"{resource.kind} ignored: {error}")

        return said

    feeds.watch(
        CLASSES,
        Handlers(
            added=class_changed,
            updated=lambda _old, new: class_changed(new),
            deleted=lambda k: class_changed(k, deleted=True),
            invalid=invalid(DEVICE_CLASSES),
        ),
        key=(key, DEVICE_CLASSES),
    )
    feeds.watch(
        CLAIMS,
        Handlers(added=claim_added, updated=claim_updated, deleted=claim_deleted, invalid=invalid(RESOURCE_CLAIMS)),
        key=(key, RESOURCE_CLAIMS),
    )
    feeds.watch(
        SLICES,
        Handlers(
            added=slice_changed,
            updated=lambda _old, new: slice_changed(new),
            deleted=lambda s: slice_changed(s, deleted=True),
            invalid=invalid(RESOURCE_SLICES),
        ),
        key=(key, RESOURCE_SLICES),
    )


def _on(claim: ResourceClaim, s: ResourceSlice) -> bool:
    assert claim.allocation is not None
    return any(r.driver == s.driver and r.pool == s.pool.name for r in claim.allocation.results)
