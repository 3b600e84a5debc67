"""ResourceClaims and the pods that use them, through a real API server (integration tests)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apis.dra import DEVICE_CLASSES, RESOURCE_CLAIMS
from apis.dra.claim import ResourceClaim
from apis.extension import names
from apis.k8s.core import Pod
from cli.launchers.scheduler import pod_manifest
from kube import Client, resources

__all__ = ["claim_manifest", "claim_pod", "create_class", "read_claim", "scheduling_message"]


def claim_manifest(
    name: str, *, selector: str = "", capacity: Mapping[str, str] | None = None, klass: str = "gpu"
) -> dict[str, Any]:
    """A claim with one request `gpu` for a device of `klass`, selected by the CEL `selector`,
    taking `capacity` of a shared device when given."""
    exactly: dict[str, Any] = {"deviceClassName": klass}
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


def claim_pod(client: Client, ns: str, name: str, claim: str, *, pool: str = "") -> None:
    """A pod whose container uses the claim `claim`; on nodes labelled `pool=<pool>` when given."""
    manifest = pod_manifest(name, {names.CPU: "1", names.MEMORY: "1Gi"}, namespace=ns)
    if pool:
        manifest["spec"]["nodeSelector"] = {"pool": pool}
    manifest["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    manifest["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    client.resource(resources.PODS).create(manifest, namespace=ns)


def read_claim(client: Client, ns: str, name: str) -> ResourceClaim:
    return ResourceClaim.from_dict(client.resource(RESOURCE_CLAIMS).get(name, namespace=ns))


def scheduling_message(pod: Pod) -> str:
    """The message of the pod's `PodScheduled=False` condition ("" without one)."""
    return pod.pending_message


def create_class(client: Client, name: str, driver: str, *, extended_resource: str = "") -> None:
    """A DeviceClass selecting the devices of `driver`, serving `extended_resource` when given."""
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}
    if extended_resource:
        spec["extendedResourceName"] = extended_resource
    manifest = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}
    client.resource(DEVICE_CLASSES).create(manifest)
