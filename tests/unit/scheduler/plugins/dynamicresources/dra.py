"""Builders for DynamicResources tests: GPU nodes with their slices, claims, pods that use them,
and a Scheduler whose DRA feed is given them as the informers would (`Feeds.deliver`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from apis.crds.device import Device, DeviceType
from apis.dra import DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_SLICES, gpus
from apis.dra.claim import DeviceClass, ResourceClaim
from apis.k8s.core import Node, Pod, PodResourceClaim
from apis.k8s.meta import OwnerReference
from scheduler.core import Scheduler
from scheduler.framework.config import SchedulerConfig
from scheduler.plugins.dynamicresources import STORE, ClaimStore
from tests.support.builders import make_pod

GIB = 2**30
GPU_CLASS = DeviceClass.from_dict(
    {"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{gpus.DRIVER}"'}}]}}
)


def scheduler_with(
    *nodes: tuple[Node, Device], config: SchedulerConfig | None = None, classes: Iterable[DeviceClass] = (GPU_CLASS,)
) -> Scheduler:
    """A Scheduler over `nodes`, each with its GPUs published as a ResourceSlice, and `classes`."""
    scheduler = Scheduler(config)
    for node, device in nodes:
        scheduler.cache.add_node(node)
        scheduler.cache.add_device(device)
        scheduler.feeds.deliver(RESOURCE_SLICES, gpus.gpu_slice(device))
    for klass in classes:
        scheduler.feeds.deliver(DEVICE_CLASSES, klass)
    return scheduler


def store_of(scheduler: Scheduler) -> ClaimStore:
    store = scheduler.frameworks[next(iter(scheduler.frameworks))].handle.scheduler.get(STORE)
    assert isinstance(store, ClaimStore)
    return store


def claim(
    name: str,
    *selectors: str,
    count: int = 1,
    cores: int | None = None,
    memory: int | None = None,
    namespace: str = "default",
    klass: str = "gpu",
    owner: Pod | None = None,
    rv: str = "1",
    constraints: list[dict[str, Any]] | None = None,
) -> ResourceClaim:
    """A claim with one request `gpu` for `count` devices of `klass`, selected by `selectors`
    (CEL), taking `cores`/`memory` of a shared GPU when given."""
    exactly: dict[str, Any] = {"deviceClassName": klass, "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    capacity = {k: str(v) for k, v in (("cores", cores), ("memory", memory)) if v is not None}
    if capacity:
        exactly["capacity"] = {"requests": capacity}
    devices: dict[str, Any] = {"requests": [{"name": "gpu", "exactly": exactly}]}
    if constraints:
        devices["constraints"] = constraints
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-claim-{name}", "resourceVersion": rv}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner.name, "uid": owner.uid}]
    return ResourceClaim.from_dict({"metadata": meta, "spec": {"devices": devices}})


def with_claims(pod: Pod, *names: str, templates: dict[str, str | None] | None = None) -> Pod:
    """`pod` using the claims `names` (by resourceClaimName) and, for `templates` (pod claim name
    -> generated claim name, None: not generated yet), claims from a template."""
    refs = [PodResourceClaim(f"c{i}", resource_claim_name=n) for i, n in enumerate(names)]
    statuses: dict[str, str | None] = {}
    for pod_claim, generated in (templates or {}).items():
        refs.append(PodResourceClaim(pod_claim, resource_claim_template_name="gpu-template"))
        if generated is not None:
            statuses[pod_claim] = generated
    return dataclasses.replace(pod, resource_claims=tuple(refs), resource_claim_statuses=statuses)


def claim_pod(name: str, *claims: str, **kw: Any) -> Pod:
    return with_claims(make_pod(name, cpu=100, **kw), *claims)


def owned_by(claim: ResourceClaim, pod: Pod) -> ResourceClaim:
    meta = dataclasses.replace(claim.meta, owner_references=(OwnerReference("v1", "Pod", pod.name, pod.uid),))
    return dataclasses.replace(claim, meta=meta)


def add_claims(scheduler: Scheduler, *claims: ResourceClaim) -> None:
    for c in claims:
        scheduler.feeds.deliver(RESOURCE_CLAIMS, c)


def gpu_holders(scheduler: Scheduler, node: str) -> dict[int, list[str]]:
    """GPU minor -> pods the cache counts on it (both protocols)."""
    return {
        u.minor: [h.pod for h in u.holders]
        for u in scheduler.cache.device_usage(node)
        if u.type is DeviceType.GPU and u.holders
    }


def results(scheduler: Scheduler, key: str) -> list[str]:
    """The devices the store says claim `key` is allocated."""
    found = store_of(scheduler).claim(key)
    assert found is not None and found.allocation is not None, f"{key} is not allocated"
    return [r.device for r in found.allocation.results]
