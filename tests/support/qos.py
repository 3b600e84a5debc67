"""Factories for QoS tests: pods (through the real `Pod.from_dict` parser) and cgroup-v2 fixture trees.

Shared by the unit tests in tests/unit/agent/qos and the real-cgroup integration tests in tests/integration/qos.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent.qos.cgroups import Hierarchy
from agent.qos.layout import Driver, KubeCgroups, parse_container_id
from apis.extension import names
from apis.extension.qos import kube_qos_class
from apis.k8s.core import Pod

_counter = itertools.count(1)

#: The files a cgroup-v2 directory has (cpu, cpuset, memory controllers enabled), with the kernel's
#: defaults. A fixture tree is built from this table: the v2 file names are the point of the test.
V2_FILES: Mapping[str, str] = {
    "cgroup.controllers": "cpuset cpu io memory pids\n",
    "cgroup.procs": "",
    "cpu.weight": "100\n",
    "cpu.max": "max 100000\n",
    "cpu.idle": "0\n",
    "cpu.stat": "usage_usec 0\nuser_usec 0\nsystem_usec 0\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n",
    "cpuset.cpus": "\n",
    "memory.max": "max\n",
    "memory.min": "0\n",
    "memory.low": "0\n",
    "memory.high": "max\n",
}


def ctr(
    name: str = "app", requests: Mapping[str, str] | None = None, limits: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A container spec as Kubernetes JSON (quantities as strings)."""
    return {"name": name, "resources": {"requests": dict(requests or {}), "limits": dict(limits or {})}}


def batch_ctr(
    name: str = "app",
    *,
    cpu_request: str | None = None,
    cpu_limit: str | None = None,
    memory_request: str | None = None,
    memory_limit: str | None = None,
) -> dict[str, Any]:
    """A BE container asking for Koordinator's batch resources (batch-cpu in milli, batch-memory in bytes)."""
    amounts = {
        "requests": {names.BATCH_CPU: cpu_request, names.BATCH_MEMORY: memory_request},
        "limits": {names.BATCH_CPU: cpu_limit, names.BATCH_MEMORY: memory_limit},
    }
    requests, limits = ({k: v for k, v in amounts[kind].items() if v is not None} for kind in ("requests", "limits"))
    return ctr(name, requests, limits)


def make_pod(
    *containers: dict[str, Any],
    name: str | None = None,
    uid: str | None = None,
    qos: str | None = None,
    phase: str = "Running",
    pod_ip: str = "",
    host_network: bool = False,
    init: list[dict[str, Any]] | None = None,
    overhead: Mapping[str, str] | None = None,
    container_ids: Mapping[str, str] | None = None,
) -> Pod:
    """A parsed Pod; container ids default to `containerd://<uid>-<container>` (hex-ish, unique)."""
    n = next(_counter)
    name = name or f"pod-{n}"
    uid = uid or f"00000000-0000-0000-0000-{n:012d}"
    specs = list(containers) or [ctr()]
    ids = (
        dict(container_ids)
        if container_ids is not None
        else {c["name"]: f"containerd://{uid.replace('-', '')}{i:04d}" for i, c in enumerate(specs)}
    )
    labels = {names.LABEL_QOS_CLASS: qos} if qos is not None else {}
    raw = {
        "metadata": {"name": name, "namespace": "default", "uid": uid, "labels": labels},
        "spec": {
            "containers": specs,
            "initContainers": init or [],
            "hostNetwork": host_network,
            "overhead": dict(overhead or {}),
        },
        "status": {
            "phase": phase,
            "podIP": pod_ip,
            "containerStatuses": [{"name": k, "containerID": v} for k, v in ids.items()],
        },
    }
    return Pod.from_dict(raw)


class V2Tree:
    """A cgroup-v2 fixture directory: make cgroups with the real file names and default contents."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.hierarchy = Hierarchy.v2(root)
        self.make("")

    def make(self, rel: str, **files: str) -> Path:
        """Create `rel` (and missing parents) with every v2 file; `files` overrides contents
        (keyword names use `_` for `.`: `cpu_max="50000 100000"`)."""
        parts = [p for p in rel.split("/") if p]
        for depth in range(len(parts) + 1):
            path = self.root.joinpath(*parts[:depth])
            if not (path / "cpu.max").exists():
                path.mkdir(parents=True, exist_ok=True)
                for fname, content in V2_FILES.items():
                    (path / fname).write_text(content)
        path = self.root.joinpath(*parts)
        for key, content in files.items():
            (path / key.replace("_", ".", 1)).write_text(content)
        return path

    def read(self, rel: str, fname: str) -> str:
        return (self.root / rel / fname).read_text().strip()

    def kube(self, driver: Driver = Driver.SYSTEMD) -> KubeCgroups:
        """Create the kubepods QoS tree for `driver` and return its layout."""
        if driver is Driver.SYSTEMD:
            for rel in ("kubepods.slice/kubepods-burstable.slice", "kubepods.slice/kubepods-besteffort.slice"):
                self.make(rel)
        else:
            for rel in ("kubepods/burstable", "kubepods/besteffort"):
                self.make(rel)
        return KubeCgroups.detect(self.hierarchy)

    def add_pod(self, kube: KubeCgroups, pod: Pod, *, containers: bool = True) -> str:
        """Create the pod's cgroup (and its containers') where kubelet would; returns the pod's rel path."""
        pod_cg = kube.pod_dir(pod.uid, kube_qos_class(pod))
        self.make(pod_cg.rel)
        if containers:
            for raw in pod.container_ids.values():
                self.make(pod_cg.child(kube.container_names(parse_container_id(raw))[0]).rel)
        return pod_cg.rel
