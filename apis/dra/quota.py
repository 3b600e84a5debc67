"""What a pod's ResourceClaims charge its ElasticQuota: what their allocations hold, in the names
quotas count (`apis.extension.quotacount`).

- Devices of Tessera's driver (`gpu.tessera.dev`): the GPUs they are, as the scheduler's cache
  counts them beside Koordinator-protocol pods (`gpus.koordinator_usage`): a whole GPU is
  `gpu-core: 100`, `gpu-memory-ratio: 100` and its bytes in `gpu-memory`; a share is the cores
  and bytes it consumes and their percent of the GPU's memory (rounded up). So a quota in
  `nvidia.com/gpu`, `gpu-core` or `gpu-memory-ratio` limits claims and Koordinator pods alike.
- Devices of any other driver: one `<class>.deviceclass.resource.k8s.io/devices` per device, the
  class being the one its request named (kube's ResourceQuota name for DRA devices), so a quota
  may limit them by class (`max: {fpga.deviceclass.resource.k8s.io/devices: 4}`).
- Admin-access results charge nothing (they hold nothing). A claim shared by several pods is
  charged to the first of its `reservedFor` (the pod it was allocated for), as the cache counts
  it; the claim the scheduler makes for a pod's extended resources is not charged: the pod's
  own request of that resource is (`nvidia.com/gpu: 1` counts `gpu-core: 100`, ...), so it is
  counted once.

The charge is decided when the claims are allocated (the scheduler's Reserve) and recorded on the
pod (`ANNOTATION_CLAIMS_QUOTA_CHARGE`, written with the binding), where both the scheduler's and
the controller's quota accounts read it (`apis.quota.charge`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Final

from apis.dra import gpus
from apis.dra.claim import ResourceClaim
from apis.dra.slice import ResourceSlice
from apis.errors import AnnotationError, TesseraError
from apis.extension import names
from apis.k8s import resources

__all__ = ["DEVICES_SUFFIX", "charge", "decode", "encode"]

#: kube's ResourceQuota name for the devices of a class: `<class>` + this.
DEVICES_SUFFIX: Final = ".deviceclass.resource.k8s.io/devices"


def charge(claims: Iterable[ResourceClaim], slices: Iterable[ResourceSlice], *, node: str) -> dict[str, int]:
    """What the allocations of `claims` (on `node`, with its `slices`) charge; see the module
    docstring. Claims not allocated charge nothing."""
    allocated = [c for c in claims if c.allocation is not None]
    out: dict[str, int] = {}
    usage = gpus.koordinator_usage((c.allocation for c in allocated if c.allocation), list(slices), node=node)
    for per_gpu in usage.values():
        out = resources.add(out, per_gpu)
    for claim in allocated:
        assert claim.allocation is not None
        classes = {sub.name: sub.device_class_name for r in claim.spec.requests for sub in r.alternatives}
        for r in claim.spec.requests:
            for sub in r.first_available:
                classes[f"{r.name}/{sub.name}"] = sub.device_class_name
        for result in claim.allocation.results:
            if result.driver == gpus.DRIVER or result.admin_access:
                continue
            klass = classes.get(result.request) or classes.get(result.request.partition("/")[0], "")
            if klass:
                key = f"{klass}{DEVICES_SUFFIX}"
                out[key] = out.get(key, 0) + 1
    return {k: v for k, v in out.items() if v}


def encode(amounts: Mapping[str, int]) -> str:
    """The annotation's value."""
    return json.dumps(resources.format_list(amounts), sort_keys=True, separators=(",", ":"))


def decode(annotations: Mapping[str, str], *, obj: str = "") -> dict[str, int]:
    """The charge a pod's annotation records ({} without one). Raises AnnotationError."""
    raw = annotations.get(names.ANNOTATION_CLAIMS_QUOTA_CHARGE)
    if raw is None:
        return {}
    try:
        return resources.parse_list(json.loads(raw), field=names.ANNOTATION_CLAIMS_QUOTA_CHARGE, obj=obj)
    except (ValueError, TesseraError) as e:
        raise AnnotationError(names.ANNOTATION_CLAIMS_QUOTA_CHARGE, str(e), obj=obj) from e
