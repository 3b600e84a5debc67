"""The cache's holdings source for pods with ResourceClaims: what their claims' `status.allocation`
holds of the node's GPUs, in Koordinator's terms — so DeviceShare, the reporter and the dashboard
count a claim's GPU as they count a Koordinator pod's, including claims allocated before a restart.

A claim shared by several pods is held once: it is counted for the first pod in its
`status.reservedFor` (the one it was allocated for, unless that one left); the others read an
empty record. When that pod goes and the resourceclaim controller takes it out of
`reservedFor`, the claim's next event counts it for the next consumer (`feed.py` refreshes every
consumer a claim change concerns). A claim allocated with no consumer (its pods gone, not yet
deallocated) is held by nobody in the cache; the DynamicResources plugin still counts it from
the store, so no claim is allocated over it.

A bound pod with claims whose record is not there (a claim missing, not allocated, or not
reserved for it) holds unknown GPUs until it is (`expects`): DeviceShare then gives none of that
node's GPUs, as for an unreadable `device-allocated` annotation. The claim the scheduler made for
a pod's extended resources (`status.extendedResourceClaimStatus`) is one of its claims here.
"""

from __future__ import annotations

from collections.abc import Mapping

from apis.crds.device import DeviceType
from apis.k8s.core import Pod
from scheduler.cache.holdings import Held, HoldingsSource
from scheduler.plugins.dynamicresources import ledger
from scheduler.plugins.dynamicresources.store import ClaimStore

__all__ = ["ClaimHoldings"]

_GPU_ONLY = frozenset({DeviceType.GPU})


class ClaimHoldings(HoldingsSource):
    name = "resourceclaims' status.allocation"

    def __init__(self, store: ClaimStore) -> None:
        self._store = store

    def read(self, pod: Pod) -> Held | None:
        if not pod.resource_claims and not pod.extended_resource_claim:
            return None
        allocations = []
        for name in _claim_names(pod):
            if name is None:
                continue
            claim = self._store.claim(f"{pod.namespace}/{name}") if name else None
            if claim is None or claim.allocation is None:
                return None
            consumers = [c.uid for c in claim.reserved_for]
            if pod.uid not in consumers:
                return None
            if consumers[0] == pod.uid:
                allocations.append(claim.allocation)
        if not allocations:
            return Held()
        found = ledger.gpu_holdings(allocations, self._store.slices_for(pod.node_name), node=pod.node_name)
        return Held({DeviceType.GPU: found} if found else {})

    def expects(self, pod: Pod, requests: Mapping[str, int]) -> frozenset[DeviceType]:
        """GPUs, for a pod with claims whose record cannot be found (see the module docstring)."""
        if (not pod.resource_claims and not pod.extended_resource_claim) or self.read(pod) is not None:
            return frozenset()
        return _GPU_ONLY

    def problem(self, pod: Pod, what: str) -> str:
        return f"pod {pod.key}: {self.name}: {what} (a claim missing, not allocated or not reserved for it)"

    def copy(self) -> ClaimHoldings:
        """The same store: snapshots read the claims as they are (the store is the plugin's)."""
        return self


def _claim_names(pod: Pod) -> list[str | None]:
    """The names of the pod's claims (`Pod.claim_name`), and of its extended-resource claim."""
    names = [pod.claim_name(c) for c in pod.resource_claims]
    return [*names, pod.extended_resource_claim] if pod.extended_resource_claim else names
