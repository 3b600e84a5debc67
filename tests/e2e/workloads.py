"""The workloads the end-to-end tests submit: pods as a user writes them (manifests for the
official client), a mixed set of requests that fits the 3-node cluster but for one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apis.extension import names
from cli.launchers.scheduler import pod_manifest

__all__ = ["MIXED", "UNSCHEDULABLE", "manifests"]

#: Mixed requests (created in this order): whole GPUs first, then shares, then CPU only.
#: 7 whole GPUs + at most 14 GPUs touched by shares fit 24 GPUs however the shares spread.
MIXED: tuple[tuple[str, Mapping[str, str], Mapping[str, str]], ...] = (
    *((f"whole-{i}", {names.NVIDIA_GPU: "1"}, {}) for i in range(3)),
    ("whole-pair", {names.NVIDIA_GPU: "2"}, {}),
    *(
        (
            f"mpi-{i}",
            {names.NVIDIA_GPU: "1", names.RDMA: "1"},
            {names.ANNOTATION_DEVICE_JOINT_ALLOCATE: '{"deviceTypes":["gpu","rdma"],"requiredScope":"SamePCIe"}'},
        )
        for i in range(2)
    ),
    *((f"half-{i}", {names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50"}, {}) for i in range(6)),
    *((f"quarter-{i}", {names.GPU_CORE: "25", names.GPU_MEMORY: "20Gi"}, {}) for i in range(4)),
    *((f"memory-{i}", {names.GPU_MEMORY: "8Gi"}, {}) for i in range(2)),
    ("spread", {names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50", names.GPU_SHARED: "2"}, {}),
    *((f"cpu-{i}", {names.CPU: "100m", names.MEMORY: "64Mi"}, {}) for i in range(10)),
    ("too-big", {names.NVIDIA_GPU: "16"}, {}),
)
UNSCHEDULABLE = "too-big"


def manifests(
    workload: tuple[tuple[str, Mapping[str, str], Mapping[str, str]], ...] = MIXED,
    *,
    node_selector: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    out = []
    for name, requests, extra_annotations in workload:
        manifest = pod_manifest(name, requests, annotations=extra_annotations, labels={"test": "e2e"})
        del manifest["metadata"]["namespace"]  # the API call says where
        if node_selector:
            manifest["spec"]["nodeSelector"] = dict(node_selector)
        out.append(manifest)
    return out
