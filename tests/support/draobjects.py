"""DRA objects written to a real API server as the scheduler and the agent would write them: a
node's GPUs as a ResourceSlice of `gpu.tessera.dev`, a ResourceClaim allocated by hand (its
`status.allocation`, and `reservedFor` when a pod is given); and an agent serving the DRA plugin
for such a node."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agent.kubeletsim.draclient import ClaimRef
from apis import dra
from apis.dra.gpus import DRIVER
from cli.launchers.agent import AgentProcess
from kube.client import Client

GiB = 1024**3
GPU_MEMORY = 80 * GiB


def create_gpu_slice(client: Client, node: str, *, gpus: int = 2) -> None:
    """`node`'s pool: `gpus` shareable GPUs `gpu-<minor>` of GPU_MEMORY, 100 cores each."""
    devices = [
        {
            "name": f"gpu-{m}",
            "attributes": {"minor": {"int": m}},
            "allowMultipleAllocations": True,
            "capacity": {"cores": {"value": "100"}, "memory": {"value": str(GPU_MEMORY)}},
        }
        for m in range(gpus)
    ]
    client.resource(dra.RESOURCE_SLICES).create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{DRIVER}"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": node, "generation": 0, "resourceSliceCount": 1},
                "devices": devices,
            },
        }
    )


def allocated_claim(
    client: Client,
    node: str,
    name: str,
    *,
    device: str,
    share: dict[str, str] | None,
    namespace: str = "default",
    pod: dict[str, Any] | None = None,
) -> ClaimRef:
    """A claim allocated on `device` of `node` (a share when `share` gives its capacity), reserved
    for `pod` (a created Pod object) when given."""
    claims = client.resource(dra.RESOURCE_CLAIMS)
    request: dict[str, Any] = {"name": "gpu", "exactly": {"deviceClassName": DRIVER}}
    made = claims.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"devices": {"requests": [request]}},
        },
        namespace=namespace,
    )
    result: dict[str, Any] = {"request": "gpu", "driver": DRIVER, "pool": node, "device": device}
    if share is not None:
        result["shareID"] = str(uuid.uuid4())
        result["consumedCapacity"] = share
    made["status"] = {"allocation": {"devices": {"results": [result]}}}
    if pod is not None:
        meta = pod["metadata"]
        made["status"]["reservedFor"] = [{"resource": "pods", "name": meta["name"], "uid": meta["uid"]}]
    claims.update_status(made, namespace=namespace)
    return ClaimRef(namespace, name, made["metadata"]["uid"])


@contextmanager
def dra_agent(
    kubeconfig: Path, client: Client, root: Path, prefix: str, args: Sequence[str]
) -> Iterator[tuple[str, AgentProcess, Path]]:
    """A simulated a100-8x node named `prefix-<random>` with its slice, and its agent serving the
    DRA plugin with kubelet's directories under `root` (`registry/`, `plugin/`, `cdi/`) and `args`:
    (node, agent, root)."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    create_gpu_slice(client, name)
    flags = [
        *("--simulate-devices", "a100-8x", "--dra-plugin", "--kubelet-registry-dir", str(root / "registry")),
        *("--dra-plugin-dir", str(root / "plugin"), "--cdi-dir", str(root / "cdi"), *args),
    ]
    with AgentProcess(kubeconfig, node_name=name, args=flags, directory=root / "agent") as agent:
        yield name, agent, root
