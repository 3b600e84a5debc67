"""gpu-and-rdma-joint-allocation.md: koordlet's Device CR of k8s-node1 — RDMA virtual functions
with `minor: -1`, `socketID: -1` — is accepted, and the manual's pod-vf01 gets a GPU and a VF of
the same PCIe root, the VF named by its PCI address.

k8s-node1 is a Node object made here (no kubelet runs it: its pods are bound, not started; the
manual's RDMA/NCCL checks inside the pods are out of scope), labelled `koo: node1` as the manual
labels it, and deleted at the end with its Device. Its Device is the manual's, entry for entry.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conformance.koordinator.koord import Koord

GPU = """    resources:
      koordinator.sh/gpu-core: "100"
      koordinator.sh/gpu-memory: 23040Mi
      koordinator.sh/gpu-memory-ratio: "100"
    type: gpu
"""


def entry(kind: str, minor: int, ident: str, bus: str, pcie: str, *, extra: str = "") -> str:
    resources = GPU if kind == "gpu" else '    resources:\n      koordinator.sh/rdma: "100"\n    type: rdma\n'
    return (
        f'  - health: true\n    id: "{ident}"\n    minor: {minor}\n{resources}'
        f'    topology:\n      busID: "{bus}"\n      nodeID: 0\n      pcieID: {pcie}\n      socketID: -1\n{extra}'
    )


VF = '    vfGroups:\n    - vfs:\n      - busID: "0000:01:00.2"\n        minor: -1\n'
DEVICE = (
    "apiVersion: scheduling.koordinator.sh/v1alpha1\nkind: Device\nmetadata:\n  name: k8s-node1\nspec:\n  devices:\n"
    + entry("gpu", 0, "GPU-989aa251-1dfe-5bbc-7c12-46e817b1de9a", "0000:02:00.0", "pci0000:00")
    + entry("rdma", 0, "0000:01:00.0", "0000:01:00.0", "pci0000:00", extra=VF)
    + entry("gpu", 1, "GPU-e8a40bd0-e484-2d1b-cad9-75b043139b0c", "0000:03:00.0", "pci0000:00")
    + entry("rdma", 1, "0000:01:00.1", "0000:01:00.1", "pci0000:00")
    + entry("gpu", 2, "GPU-5293b3a7-2bbb-e135-c6ab-c548b5c5b0a6", "0000:82:00.0", "pci0000:80")
    + entry("rdma", 2, "0000:05:00.0", "0000:05:00.0", "pci0000:00")
    + entry("gpu", 3, "GPU-d60a283a-a846-eaa7-f551-c0c4f6f4402a", "0000:83:00.0", "pci0000:80")
)

#: pod-vf01 as the manual writes it, `//` remarks included.
POD_VF01 = """
apiVersion: v1
kind: Pod
metadata:
  name: pod-vf01
  annotations:
    k8s.v1.cni.cncf.io/networks: sriov-attach-k8s-node1-ens11f0np0-kubeflow-conf
    scheduling.koordinator.sh/device-joint-allocate: |-
      {
        "deviceTypes": ["gpu","rdma"]
      }
    scheduling.koordinator.sh/device-allocate-hint: |-
      {
       "rdma": {
         "vfSelector": {} //apply VF
       }
      }
  labels:
    selector-type: pod
spec:
  nodeSelector:
    koo: node1     //Directional scheduling to 1 node
  schedulerName: koord-scheduler //Uses the koordlet scheduling plug-in
  containers:
  - name: container-vf
    image: nvcr.io/nvidia/pytorch:24.04-py3
    securityContext:
      capabilities:
        add: [ "IPC_LOCK" ]
    imagePullPolicy: IfNotPresent
    command: [ "/bin/bash", "-c", "--" ]
    args: [ "while true; do sleep 300000; done;" ]
    volumeMounts:
    - mountPath: /dev/shm
      name: shm
    resources:
      requests:
        koordinator.sh/gpu: 100//apply a GPU
        koordinator.sh/rdma: 100//apply a VF
      limits:
        koordinator.sh/gpu: 100
        koordinator.sh/rdma: 100
  volumes:
  - name: shm
    emptyDir:
      medium: Memory
      sizeLimit: "10Gi"
"""


def without_remarks(manifest: str) -> str:
    """The manual's `//` remarks are not YAML comments (`#` is): they become part of the values."""
    return re.sub(r"\s*//.*$", "", manifest, flags=re.MULTILINE)


@pytest.fixture
def node1(koord: Koord) -> Iterator[str]:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": now}
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "k8s-node1", "labels": {"koo": "node1"}},
        "status": {
            "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
            "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
            "conditions": [{**ready, "lastTransitionTime": now, "message": "no kubelet: a conformance test's"}],
        },
    }
    koord.up.kubectl("create", "-f", "-", stdin=json.dumps(node))
    try:
        yield "k8s-node1"
    finally:
        koord.delete("device", "k8s-node1")
        koord.delete("node", "k8s-node1")


def test_koordlets_device_is_accepted_and_its_vf_allocated_jointly(koord: Koord, node1: str) -> None:
    assert koord.apply(DEVICE).strip() == "device.scheduling.koordinator.sh/k8s-node1 created"
    stored = koord.get("device", node1)
    nic = next(d for d in stored["spec"]["devices"] if d["type"] == "rdma" and d["minor"] == 0)
    assert nic["vfGroups"] == [{"vfs": [{"busID": "0000:01:00.2", "minor": -1}]}]
    # The controller turns it into allocatable: 4 GPUs, 3 RDMA physical functions.
    koord.wait(
        "node",
        node1,
        lambda n: n["status"]["allocatable"].get("koordinator.sh/rdma") == "300",
        what="k8s-node1's device resources",
    )
    ns = koord.namespace("kubeflow")
    refused = koord.try_apply(POD_VF01, namespace=ns)
    assert "quantities must match the regular expression" in refused and '"100//apply a GPU"' in refused
    koord.apply(without_remarks(POD_VF01), namespace=ns)

    def bound(p: dict[str, Any]) -> Any:
        return p["spec"].get("nodeName") and p["metadata"]["annotations"].get(
            "scheduling.koordinator.sh/device-allocated"
        )

    text = koord.wait("pod", "pod-vf01", bound, namespace=ns, what="pod-vf01 bound")
    assert koord.get("pod", "pod-vf01", namespace=ns)["spec"]["nodeName"] == node1
    # GPU 0 and the VF 0000:01:00.2 of RDMA 0, both on pci0000:00, as the manual shows — in
    # Koordinator's JSON as its scheduler writes it today: with each device's `id`, and the
    # RDMA amount asked for (100); the manual's "rdma": "1" and missing ids are an older one's.
    assert text == (
        '{"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"100","koordinator.sh/gpu-memory":"23040Mi",'
        '"koordinator.sh/gpu-memory-ratio":"100"},"id":"GPU-989aa251-1dfe-5bbc-7c12-46e817b1de9a"}],'
        '"rdma":[{"minor":0,"resources":{"koordinator.sh/rdma":"100"},"id":"0000:01:00.0",'
        '"extension":{"vfs":[{"minor":-1,"busID":"0000:01:00.2"}]}}]}'
    )
    # The node's only VF is taken: another such pod is not placed (a VF is never given twice).
    koord.apply(without_remarks(POD_VF01).replace("pod-vf01", "pod-vf03"), namespace=ns)
    message = koord.wait_event("pod-vf03", "FailedScheduling", namespace=ns)
    assert message.startswith("0/") and "rdma" in message.lower(), message
    assert not koord.get("pod", "pod-vf03", namespace=ns)["spec"].get("nodeName")
    koord.delete("pods", "--all", namespace=ns)
