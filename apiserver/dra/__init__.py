"""Dynamic Resource Allocation's kinds (resource.k8s.io/v1, declared in `apis.dra`) as
kube-apiserver serves them: each kind's defaults and validation (`classes`, `claims`, `slices`,
with the checks they share in `checks`) and a pod's claims (`podclaims`, used by the pod
strategy). Their schemas (`kubectl explain`, decoding, server-side apply) come, as for every
built-in kind, from `apiserver/schema/builtin.json`; their columns from `tables.py`."""

from __future__ import annotations

from collections.abc import Mapping

from apis import dra
from apis.extension.names import GroupVersionResource
from apiserver.dra.claims import ResourceClaimStrategy, ResourceClaimTemplateStrategy
from apiserver.dra.classes import DeviceClassStrategy
from apiserver.dra.slices import ResourceSliceStrategy
from apiserver.strategy import Strategy

__all__ = ["STRATEGIES"]


def _storage_id(resource: GroupVersionResource) -> str:
    return f"{resource.plural}.{resource.group}"


#: The kinds' strategies by storage id (`resourceclaims.resource.k8s.io`).
STRATEGIES: Mapping[str, Strategy] = {
    _storage_id(dra.DEVICE_CLASSES): DeviceClassStrategy(),
    _storage_id(dra.RESOURCE_CLAIMS): ResourceClaimStrategy(),
    _storage_id(dra.RESOURCE_CLAIM_TEMPLATES): ResourceClaimTemplateStrategy(),
    _storage_id(dra.RESOURCE_SLICES): ResourceSliceStrategy(),
}
