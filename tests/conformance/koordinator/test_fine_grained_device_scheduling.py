"""fine-grained-device-scheduling.md: the Device CR, the node's device resources, a GPU pod's
`device-allocated` annotation, the other ways to ask for GPUs, and the debug API.

The manual was written with Koordinator's names before v1.2 (`kubernetes.io/gpu-core`, ...):
its pods still ask in them, and Koordinator — and Tessera — read them as the current ones; what
they write (the Device CR, the node's allocatable, the annotation) is in the current names,
`koordinator.sh/gpu-core`, ...
"""

from __future__ import annotations

import json
from typing import Any

from tests.conformance.koordinator.koord import Koord, busybox_pod

CORE = '        kubernetes.io/gpu-core: "100"\n'


def allocated(koord: Koord, ns: str, name: str) -> tuple[str, str]:
    """(node, device-allocated) once the pod is bound."""

    def bound(p: dict[str, Any]) -> Any:
        node = p["spec"].get("nodeName")
        text = (p["metadata"].get("annotations") or {}).get("scheduling.koordinator.sh/device-allocated")
        return node and text and (node, text)

    return tuple(koord.wait("pod", name, bound, namespace=ns, what=f"{name} bound"))  # type: ignore[return-value]


def gpu_id(koord: Koord, node: str, minor: int) -> str:
    device = koord.get("device", node)
    return next(d["id"] for d in device["spec"]["devices"] if d["type"] == "gpu" and d["minor"] == minor)


def test_the_device_cr_and_the_nodes_allocatable(koord: Koord) -> None:
    device = koord.get("device", "sim-1")
    gpus = [d for d in device["spec"]["devices"] if d["type"] == "gpu"]
    assert [d["minor"] for d in gpus] == list(range(8))
    for gpu in gpus:
        assert gpu["health"] is True and gpu["id"].startswith("GPU-")
        assert gpu["resources"] == {
            "koordinator.sh/gpu-core": "100",
            "koordinator.sh/gpu-memory": "80Gi",
            "koordinator.sh/gpu-memory-ratio": "100",
        }
    assert device["metadata"]["ownerReferences"][0]["kind"] == "Node"
    # "the node allocatable resource has merged each gpu card resource"
    allocatable = koord.get("node", "sim-1")["status"]["allocatable"]
    assert {k: v for k, v in allocatable.items() if k.startswith("koordinator.sh/gpu")} == {
        "koordinator.sh/gpu": "800",
        "koordinator.sh/gpu-core": "800",
        "koordinator.sh/gpu-memory": "640Gi",
        "koordinator.sh/gpu-memory-ratio": "800",
    }


def test_a_whole_gpu_pod_gets_koordinators_annotation_and_the_debug_api_shows_it(koord: Koord) -> None:
    ns = koord.namespace("device")
    koord.apply(busybox_pod("pod-example", gpu_requests='        kubernetes.io/gpu: "100"\n'), namespace=ns)
    node, text = allocated(koord, ns, "pod-example")
    minor = json.loads(text)["gpu"][0]["minor"]
    # Koordinator's exact JSON (the manual shows it in the pre-1.2 names, and without `id`, which
    # Koordinator's scheduler writes since).
    assert text == (
        f'{{"gpu":[{{"minor":{minor},"resources":{{"koordinator.sh/gpu-core":"100",'
        f'"koordinator.sh/gpu-memory":"80Gi","koordinator.sh/gpu-memory-ratio":"100"}},'
        f'"id":"{gpu_id(koord, node, minor)}"}}]}}'
    )
    koord.wait("pod", "pod-example", lambda p: p["status"].get("phase") == "Running", namespace=ns)
    summary = koord.debug(f"/apis/v1/plugins/DeviceShare/nodeDeviceSummaries/{node}")
    assert summary["allocateSet"]["gpu"][f"{ns}/pod-example"] == {
        str(minor): {
            "koordinator.sh/gpu-core": "100",
            "koordinator.sh/gpu-memory": "80Gi",
            "koordinator.sh/gpu-memory-ratio": "100",
        }
    }
    assert summary["deviceTotal"]["koordinator.sh/gpu-core"] == "800"
    assert summary["deviceUsedDetail"]["gpu"][str(minor)]["koordinator.sh/gpu-core"] == "100"


def test_the_other_ways_to_ask(koord: Koord) -> None:
    ns = koord.namespace("device-more")
    # `nvidia.com/gpu: "100"` in requests only: the API server refuses it (an extended resource
    # needs its limit), and it would be 100 whole GPUs — the manual means "1".
    refused = koord.try_apply(busybox_pod("by-nvidia", gpu_requests='        nvidia.com/gpu: "100"\n'), namespace=ns)
    assert "Limit must be set for non overcommitable resources" in refused
    koord.apply(
        busybox_pod("by-core-ratio", gpu_requests=CORE + '        kubernetes.io/gpu-memory-ratio: "100"\n'),
        namespace=ns,
    )
    koord.apply(
        busybox_pod("by-core-memory", gpu_requests=CORE + '        kubernetes.io/gpu-memory: "16Mi"\n'),
        namespace=ns,
    )
    _, whole = allocated(koord, ns, "by-core-ratio")
    assert json.loads(whole)["gpu"][0]["resources"] == {
        "koordinator.sh/gpu-core": "100",
        "koordinator.sh/gpu-memory": "80Gi",
        "koordinator.sh/gpu-memory-ratio": "100",
    }
    _, by_memory = allocated(koord, ns, "by-core-memory")
    # 16Mi of an 80Gi GPU: the ratio is the floor of 16Mi × 100 / 80Gi, as Koordinator computes it.
    assert json.loads(by_memory)["gpu"][0]["resources"] == {
        "koordinator.sh/gpu-core": "100",
        "koordinator.sh/gpu-memory": "16Mi",
        "koordinator.sh/gpu-memory-ratio": "0",
    }
