"""Extended resources served through DRA, through the whole cycle: a plain `nvidia.com/gpu` pod
gets a claim on a node whose GPUs only DRA publishes, and DeviceShare's GPUs where the node's
Device CR has them (Koordinator's protocol keeps serving the name there)."""

from __future__ import annotations

import dataclasses

from apis.crds.device import DeviceType
from apis.dra import DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_SLICES, gpus
from apis.dra.claim import DeviceClass
from apis.dra.extended import claim_name
from apis.dra.names import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from apis.dra.slice import ResourceSlice
from apis.extension import names
from apis.k8s.core import ContainerExtendedResourceRequest
from scheduler.core import Scheduler
from scheduler.framework.status import Code
from tests.support.builders import make_node, make_pod

from .dra import GPU_CLASS, results, scheduler_with, store_of

#: Another vendor's DRA driver (NVIDIA's, say): its GPUs have no Device CR, DeviceShare has none.
OTHER_DRIVER = "gpu.example.com"


def _by_name(name: str, resource: str, driver: str = OTHER_DRIVER) -> DeviceClass:
    return DeviceClass.from_dict(
        {
            "metadata": {"name": name},
            "spec": {
                "selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}],
                "extendedResourceName": resource,
            },
        }
    )


GPU_BY_NAME = _by_name("gpu-by-name", names.NVIDIA_GPU)


def _dra_only_node(scheduler: Scheduler, name: str, count: int) -> None:
    """A node whose GPUs only another vendor's DRA driver publishes (no Device CR: no DeviceShare)."""
    node, device = make_node(name, gpus=count)
    scheduler.cache.add_node(node)
    published = gpus.gpu_slice(device).to_dict()
    published["spec"]["driver"] = OTHER_DRIVER
    scheduler.feeds.deliver(RESOURCE_SLICES, ResourceSlice.from_dict(published))


def _holders(scheduler: Scheduler) -> dict[str, list[str]]:
    """Claim -> its devices, for the allocated claims of the store."""
    return {
        c.key: [r.device for r in c.allocation.results]
        for c in store_of(scheduler).claims()
        if c.allocation is not None
    }


def _gpu_pod(name: str, count: int = 1):  # type: ignore[no-untyped-def]
    return make_pod(name, cpu=100, extra={names.NVIDIA_GPU: count})


def test_a_plain_gpu_pod_gets_a_claim_on_a_node_only_dra_serves() -> None:
    scheduler = scheduler_with(classes=(GPU_CLASS, GPU_BY_NAME))
    _dra_only_node(scheduler, "dra", 2)
    pod = _gpu_pod("p")
    out = scheduler.schedule_one(pod)
    assert out.scheduled and out.node == "dra", out.status.message
    name = claim_name(pod)
    create, status, finalizer, pod_status = out.writes.objects
    assert (create.verb, create.resource, create.name, create.namespace) == ("create", RESOURCE_CLAIMS, name, "default")
    assert create.undo is not None and create.undo.verb == "delete"
    body = dict(create.patch)
    assert body["metadata"]["annotations"] == {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"}  # type: ignore[index]
    assert body["spec"] == {  # type: ignore[comparison-overlap]
        "devices": {
            "requests": [
                {
                    "name": "container-0-request-1",
                    "exactly": {"deviceClassName": "gpu-by-name", "allocationMode": "ExactCount", "count": 1},
                }
            ]
        }
    }
    assert (status.name, status.subresource, finalizer.name) == (name, "status", name)
    assert (pod_status.resource, pod_status.name, pod_status.subresource) == (names.CORE_PODS, "p", "status")
    assert pod_status.patch == {
        "status": {
            "extendedResourceClaimStatus": {
                "resourceClaimName": name,
                "requestMappings": [
                    {"containerName": "main", "resourceName": names.NVIDIA_GPU, "requestName": "container-0-request-1"}
                ],
            }
        }
    }
    assert results(scheduler, f"default/{name}") == ["gpu-0"]
    # The claim holds GPU 0: the next two-GPU pod does not fit; a one-GPU pod takes GPU 1.
    out = scheduler.schedule_one(_gpu_pod("two", 2))
    assert out.status.code is Code.UNSCHEDULABLE, out.status.message
    assert "gpu-by-name" in out.status.message
    q = _gpu_pod("q")
    assert scheduler.schedule_one(q).scheduled
    assert _holders(scheduler) == {f"default/{name}": ["gpu-0"], f"default/{claim_name(q)}": ["gpu-1"]}


def test_our_drivers_gpus_on_a_node_without_device_cr_are_held_in_the_cache_too() -> None:
    scheduler = scheduler_with(classes=(GPU_CLASS, _by_name("ours", names.NVIDIA_GPU, gpus.DRIVER)))
    node, device = make_node("dra", gpus=2)
    scheduler.cache.add_node(node)
    scheduler.feeds.deliver(RESOURCE_SLICES, gpus.gpu_slice(device))
    assert scheduler.schedule_one(_gpu_pod("p", 2)).scheduled
    assert not scheduler.schedule_one(_gpu_pod("q")).scheduled


def test_the_bound_pod_holds_its_claims_gpus_through_its_status_after_a_restart() -> None:
    scheduler = scheduler_with(classes=(GPU_CLASS, GPU_BY_NAME))
    _dra_only_node(scheduler, "dra", 1)
    pod = _gpu_pod("p")
    assert scheduler.schedule_one(pod).scheduled
    claim = store_of(scheduler).claim(f"default/{claim_name(pod)}")
    assert claim is not None
    # A fresh scheduler (a restart) sees the claim as written and the pod bound, with its status.
    again = scheduler_with(classes=(GPU_CLASS, GPU_BY_NAME))
    _dra_only_node(again, "dra", 1)
    again.feeds.deliver(
        RESOURCE_CLAIMS, dataclasses.replace(claim, meta=dataclasses.replace(claim.meta, resource_version="2"))
    )
    mapping = ContainerExtendedResourceRequest("main", names.NVIDIA_GPU, "container-0-request-1")
    bound = dataclasses.replace(
        pod,
        node_name="dra",
        phase="Running",
        extended_resource_claim=claim.meta.name,
        extended_resource_requests=(mapping,),
    )
    again.cache.add_pod(bound)
    assert not again.cache.node("dra").devices.unknown_holders(DeviceType.GPU)  # type: ignore[union-attr]
    out = again.schedule_one(_gpu_pod("q"))
    assert not out.scheduled


def test_a_node_with_gpus_in_its_device_cr_serves_the_name_in_koordinators_protocol() -> None:
    scheduler = scheduler_with(make_node("koord", gpus=2), classes=(GPU_CLASS, GPU_BY_NAME))
    out = scheduler.schedule_one(_gpu_pod("p"))
    assert out.scheduled and out.node == "koord", out.status.message
    assert names.ANNOTATION_DEVICE_ALLOCATED in out.annotations
    assert not out.writes.objects  # no claim
    assert not [c for c in store_of(scheduler).claims() if c.allocation is not None]


def test_without_a_class_naming_the_resource_a_dra_only_node_does_not_serve_it() -> None:
    scheduler = scheduler_with(classes=(GPU_CLASS,))
    _dra_only_node(scheduler, "dra", 2)
    out = scheduler.schedule_one(_gpu_pod("p"))
    assert not out.scheduled
    # The class named afterwards: served.
    scheduler.feeds.deliver(DEVICE_CLASSES, GPU_BY_NAME)
    assert scheduler.schedule_one(_gpu_pod("p")).scheduled


def test_an_extended_resource_no_device_plugin_serves_passes_node_resources_fit() -> None:
    fpga = _by_name("fpga", "example.com/fpga")
    scheduler = scheduler_with(classes=(fpga,))
    _dra_only_node(scheduler, "dra", 1)
    out = scheduler.schedule_one(make_pod("p", cpu=100, extra={"example.com/fpga": 1}))
    assert out.scheduled, out.status.message
    assert out.writes.objects[0].verb == "create"
