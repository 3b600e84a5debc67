"""Dynamic Resource Allocation live: the embedded API server serving `resource.k8s.io/v1` and the
scheduler as a real process.

A claim selecting a GPU by a CEL expression, referenced by a pod, is allocated on the node and
the pod binds: the claim's `status.allocation` and `reservedFor` are written by the scheduler, with
the delete-protection finalizer; a claim asking part of a shared GPU's memory shares it with
another claim; a GPU a Koordinator-protocol pod holds is not given to a claim; and a scheduler
restarted learns the claims' holdings from the API server (a Koordinator pod gets no GPU a claim
holds). A plain `nvidia.com/gpu` pod is served through DRA where a DeviceClass names the
resource and the node has no other way to give it (the scheduler creates its claim), and by
DeviceShare where the node's Device CR has GPUs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from apis.dra import RESOURCE_CLAIMS, RESOURCE_SLICES, gpus
from apis.dra.extended import claim_name
from apis.dra.names import DELETE_PROTECTION_FINALIZER, EXTENDED_RESOURCE_CLAIM_ANNOTATION
from apis.dra.slice import ResourceSlice
from apis.extension import names
from apis.k8s.core import Pod
from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.scheduler import SchedulerProcess, node_manifest, pod_manifest
from kube import Client, resources
from scheduler.simulation.cluster import NodeShape, gpu_node
from tests.support.cluster import PodWatch, create_gpu_nodes, create_namespace, create_pod
from tests.support.draclaims import claim_manifest, claim_pod, create_class, read_claim, scheduling_message

pytestmark = pytest.mark.integration

GIB = 2**30


def test_claims_are_allocated_shared_and_kept_apart_from_koordinator_pods(
    apiserver: EmbeddedAPIServer, client: Client, work_dir: Path
) -> None:
    (device,) = create_gpu_nodes(client, "dra-a", shape=NodeShape(gpus=2, gpu_memory=16 * GIB))
    client.resource(RESOURCE_SLICES).create(gpus.gpu_slice(device).to_dict())
    create_class(client, "gpu", gpus.DRIVER)
    ns = create_namespace(client)
    claims = client.resource(RESOURCE_CLAIMS)
    watch = PodWatch(client, ns)
    try:
        with SchedulerProcess(apiserver.kubeconfig, work_dir) as scheduler:
            # A Koordinator pod takes GPU 0 whole; a claim selecting "minor <= 1" gets GPU 1.
            create_pod(client, ns, "koord", {names.NVIDIA_GPU: "1"})
            watch.wait_bound(1)
            claims.create(
                claim_manifest("by-cel", selector=f'device.attributes["{gpus.DRIVER}"].minor <= 1'), namespace=ns
            )
            claim_pod(client, ns, "p-cel", "by-cel")
            watch.wait_bound(2)
            by_cel = read_claim(client, ns, "by-cel")
            assert by_cel.allocation is not None
            assert [r.device for r in by_cel.allocation.results] == ["gpu-1"]
            assert [c.name for c in by_cel.reserved_for] == ["p-cel"]
            assert DELETE_PROTECTION_FINALIZER in by_cel.meta.finalizers
            # Nothing is left whole: a second whole-GPU claim waits, with the allocator's reason.
            claims.create(claim_manifest("whole"), namespace=ns)
            claim_pod(client, ns, "p-whole", "whole")
            message = watch.wait_for(
                lambda pods: any("claim" in (scheduling_message(p) or "") for p in pods if p.name == "p-whole"),
                "p-whole pending with the claim's reason",
            )
            assert message
            scheduler.stop()
        # Restarted: the claims allocated before are held (from their status), so a Koordinator
        # pod asking for a whole GPU waits; the whole-GPU claim still does.
        with SchedulerProcess(apiserver.kubeconfig, work_dir):
            create_pod(client, ns, "koord-2", {names.NVIDIA_GPU: "1"})
            watch.wait_for(
                lambda pods: any(p.name == "koord-2" and scheduling_message(p) for p in pods),
                "koord-2 judged by the scheduler",
            )
            assert not watch.pod("koord-2").node_name
            assert not watch.pod("p-whole").node_name
            # Deleting the Koordinator pod frees GPU 0: the waiting claim gets it.
            client.resource(resources.PODS).delete("koord", namespace=ns)
            watch.wait_for(
                lambda pods: any(p.name in ("p-whole", "koord-2") and p.node_name for p in pods),
                "a pod placed on the freed GPU",
            )
    finally:
        watch.stop()


def test_a_plain_gpu_pod_is_served_by_a_claim_the_scheduler_makes_where_only_dra_has_gpus(
    apiserver: EmbeddedAPIServer, client: Client, work_dir: Path
) -> None:
    vendor = "gpu.example.com"  # another vendor's DRA driver: no Device CR, nothing for DeviceShare
    node, _ = gpu_node("ext-dra", NodeShape(gpus=0, labels={"pool": "ext-dra"}))
    client.resource(resources.NODES).create(node_manifest(node))
    _, inventory = gpu_node("ext-dra", NodeShape(gpus=2))
    published = gpus.gpu_slice(inventory).to_dict()
    published["spec"]["driver"] = vendor
    client.resource(RESOURCE_SLICES).create(ResourceSlice.from_dict(published).to_dict())
    create_gpu_nodes(client, "ext-koord", shape=NodeShape(gpus=1, labels={"pool": "ext-koord"}))
    create_class(client, "vendor-gpu", vendor, extended_resource=names.NVIDIA_GPU)
    ns = create_namespace(client)
    pods = client.resource(resources.PODS)
    watch = PodWatch(client, ns)
    try:
        with SchedulerProcess(apiserver.kubeconfig, work_dir):
            for name, pool in (("via-dra", "ext-dra"), ("via-koord", "ext-koord")):
                manifest = pod_manifest(name, {names.CPU: "1", names.NVIDIA_GPU: "1"}, namespace=ns)
                manifest["spec"]["nodeSelector"] = {"pool": pool}
                pods.create(manifest, namespace=ns)
            watch.wait_bound(2)
            # DRA: the claim made for the pod, owned by it, allocated and reserved for it; the
            # pod's status names it.
            pod = Pod.from_dict(pods.get("via-dra", namespace=ns))
            assert pod.node_name == "ext-dra"
            assert pod.extended_resource_claim == claim_name(pod)
            assert [(m.container_name, m.resource_name) for m in pod.extended_resource_requests] == [
                ("main", names.NVIDIA_GPU)
            ]
            claim = read_claim(client, ns, pod.extended_resource_claim)
            assert claim.meta.annotations[EXTENDED_RESOURCE_CLAIM_ANNOTATION] == "true"
            assert [(o.kind, o.name, o.uid, o.controller) for o in claim.meta.owner_references] == [
                ("Pod", "via-dra", pod.uid, True)
            ]
            assert claim.allocation is not None
            ((driver, device),) = [(r.driver, r.device) for r in claim.allocation.results]
            assert driver == vendor and device in ("gpu-0", "gpu-1")
            assert [c.name for c in claim.reserved_for] == ["via-dra"]
            assert DELETE_PROTECTION_FINALIZER in claim.meta.finalizers
            # Koordinator's protocol where the Device CR has GPUs: DeviceShare's record, no claim.
            koord = Pod.from_dict(pods.get("via-koord", namespace=ns))
            assert koord.node_name == "ext-koord"
            assert names.ANNOTATION_DEVICE_ALLOCATED in koord.annotations
            assert not koord.extended_resource_claim
            made = [c for c in client.resource(RESOURCE_CLAIMS).list(namespace=ns).items]
            assert len(made) == 1
    finally:
        watch.stop()
