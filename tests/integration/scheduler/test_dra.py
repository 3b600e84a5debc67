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

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from apis.dra import DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_SLICES, gpus
from apis.dra.claim import ResourceClaim
from apis.dra.extended import claim_name
from apis.dra.names import DELETE_PROTECTION_FINALIZER, EXTENDED_RESOURCE_CLAIM_ANNOTATION
from apis.dra.slice import ResourceSlice
from apis.extension import names
from apis.k8s.core import Pod
from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.controller import ControllerProcess
from cli.launchers.scheduler import SchedulerProcess, node_manifest, pod_manifest
from kube import Client, resources
from scheduler.simulation.cluster import NodeShape, gpu_node
from tests.support.cluster import PodWatch, create_gpu_nodes, create_namespace, create_pod
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

GIB = 2**30


def _claim(name: str, *, selector: str = "", capacity: Mapping[str, str] | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu"}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    if capacity:
        exactly["capacity"] = {"requests": dict(capacity)}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }


def _claim_pod(client: Client, ns: str, name: str, claim: str, *, pool: str = "") -> None:
    manifest = pod_manifest(name, {names.CPU: "1", names.MEMORY: "1Gi"}, namespace=ns)
    if pool:
        manifest["spec"]["nodeSelector"] = {"pool": pool}
    manifest["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    manifest["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    client.resource(resources.PODS).create(manifest, namespace=ns)


def _read(client: Client, ns: str, name: str) -> ResourceClaim:
    return ResourceClaim.from_dict(client.resource(RESOURCE_CLAIMS).get(name, namespace=ns))


def test_claims_are_allocated_shared_and_kept_apart_from_koordinator_pods(
    apiserver: EmbeddedAPIServer, client: Client, work_dir: Path
) -> None:
    (device,) = create_gpu_nodes(client, "dra-a", shape=NodeShape(gpus=2, gpu_memory=16 * GIB))
    client.resource(RESOURCE_SLICES).create(gpus.gpu_slice(device).to_dict())
    client.resource(DEVICE_CLASSES).create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{gpus.DRIVER}"'}}]},
        }
    )
    ns = create_namespace(client)
    claims = client.resource(RESOURCE_CLAIMS)
    watch = PodWatch(client, ns)
    try:
        with SchedulerProcess(apiserver.kubeconfig, work_dir) as scheduler:
            # A Koordinator pod takes GPU 0 whole; a claim selecting "minor <= 1" gets GPU 1.
            create_pod(client, ns, "koord", {names.NVIDIA_GPU: "1"})
            watch.wait_bound(1)
            claims.create(_claim("by-cel", selector=f'device.attributes["{gpus.DRIVER}"].minor <= 1'), namespace=ns)
            _claim_pod(client, ns, "p-cel", "by-cel")
            watch.wait_bound(2)
            by_cel = _read(client, ns, "by-cel")
            assert by_cel.allocation is not None
            assert [r.device for r in by_cel.allocation.results] == ["gpu-1"]
            assert [c.name for c in by_cel.reserved_for] == ["p-cel"]
            assert DELETE_PROTECTION_FINALIZER in by_cel.meta.finalizers
            # Nothing is left whole: a second whole-GPU claim waits, with the allocator's reason.
            claims.create(_claim("whole"), namespace=ns)
            _claim_pod(client, ns, "p-whole", "whole")
            message = watch.wait_for(
                lambda pods: any("claim" in (_condition(p) or "") for p in pods if p.name == "p-whole"),
                "p-whole pending with the claim's reason",
            )
            assert message
            scheduler.stop()
        # Restarted: the claims allocated before are held (from their status), so a Koordinator
        # pod asking for a whole GPU waits; the whole-GPU claim still does.
        with SchedulerProcess(apiserver.kubeconfig, work_dir):
            create_pod(client, ns, "koord-2", {names.NVIDIA_GPU: "1"})
            watch.wait_for(
                lambda pods: any(p.name == "koord-2" and _condition(p) for p in pods), "koord-2 judged by the scheduler"
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


def _condition(pod: Any) -> str:
    for c in pod.conditions:
        if c.type == "PodScheduled" and c.status == "False":
            return str(c.message)
    return ""


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
    client.resource(DEVICE_CLASSES).create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "vendor-gpu"},
            "spec": {
                "selectors": [{"cel": {"expression": f'device.driver == "{vendor}"'}}],
                "extendedResourceName": names.NVIDIA_GPU,
            },
        }
    )
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
            claim = _read(client, ns, pod.extended_resource_claim)
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


QUOTA_CONFIG = (
    "profiles:\n  - schedulerName: tessera-scheduler\n    plugins: {multiPoint: {enabled: [{name: ElasticQuota}]}}\n"
)


def test_a_quota_charges_what_claims_allocate_and_tessera_quota_shows_it(
    apiserver: EmbeddedAPIServer, client: Client, work_dir: Path
) -> None:
    # Our agent's node: the Device CR and the slice of the same GPUs.
    (device,) = create_gpu_nodes(client, "q-dra", shape=NodeShape(gpus=2, gpu_memory=16 * GIB, labels={"pool": "q"}))
    client.resource(RESOURCE_SLICES).create(gpus.gpu_slice(device).to_dict())
    client.resource(DEVICE_CLASSES).create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "quota-gpu"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{gpus.DRIVER}"'}}]},
        }
    )
    ns = create_namespace(client)
    client.resource(names.ELASTIC_QUOTAS).create(
        {
            "apiVersion": names.ELASTIC_QUOTAS.api_version,
            "kind": names.ELASTIC_QUOTAS.kind,
            "metadata": {"name": ns, "namespace": ns},
            "spec": {"min": {names.NVIDIA_GPU: "1"}, "max": {names.NVIDIA_GPU: "1"}},
        },
        namespace=ns,
    )
    claims = client.resource(RESOURCE_CLAIMS)
    pods = client.resource(resources.PODS)
    config = work_dir / "config.yaml"
    config.write_text(QUOTA_CONFIG)
    watch = PodWatch(client, ns)
    try:
        with (
            SchedulerProcess(apiserver.kubeconfig, work_dir, extra_args=["--config", str(config)]),
            ControllerProcess(apiserver.kubeconfig, directory=work_dir / "controller"),
        ):
            for name in ("first", "second"):
                body = _claim(name)
                body["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "quota-gpu"
                claims.create(body, namespace=ns)
            # Under quota (one GPU of one): placed, its claim charged on the pod.
            _claim_pod(client, ns, "p-first", "first", pool="q")
            watch.wait_bound(1)
            pod = pods.get("p-first", namespace=ns)
            charge = json.loads(pod["metadata"]["annotations"][names.ANNOTATION_CLAIMS_QUOTA_CHARGE])
            assert charge == {names.GPU_CORE: "100", names.GPU_MEMORY: "16Gi", names.GPU_MEMORY_RATIO: "100"}
            # Over quota: a second whole GPU waits with the quota's reason; its claim stays pending.
            _claim_pod(client, ns, "p-second", "second", pool="q")
            watch.wait_for(
                lambda found: any(
                    p.name == "p-second" and "Insufficient quotas, quotaName: " + ns in _condition(p) for p in found
                ),
                "p-second refused by the quota",
            )
            assert _read(client, ns, "second").allocation is None
            # `tessera quota` shows the charge in the quota's used (the controller's status.used).
            shown = wait_for(
                lambda: _used_gpu_core(apiserver, ns).get(names.GPU_CORE) and _used_gpu_core(apiserver, ns),
                what="the quota's used written",
                poll_s=1.0,
            )
            assert shown == {names.GPU_CORE: "100", names.GPU_MEMORY_RATIO: "100", names.GPU_MEMORY: "16Gi"}
    finally:
        watch.stop()


def _used_gpu_core(apiserver: EmbeddedAPIServer, ns: str) -> dict[str, str]:
    """The quota's used as `tessera quota -o json` prints it (GPU names only)."""
    command = [sys.executable, "-m", "cli", "quota", "--kubeconfig", str(apiserver.kubeconfig), "-n", ns, "-o", "json"]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 0, result.stderr
    (row,) = [q for q in json.loads(result.stdout)["quotas"] if q["name"] == ns]
    used = row.get("used") or {}
    return {k: v for k, v in used.items() if "gpu" in k}
