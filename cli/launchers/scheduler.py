"""Run `tessera scheduler` as a separate process, for tests, the end-to-end benchmark and `tessera up`.

    with SchedulerProcess(server.kubeconfig, work_dir) as scheduler:  # ready (/readyz) on entry
        scheduler.get("/apis/v1/__services__")                      # the diagnostics HTTP API
        scheduler.grpc_address                                      # unix:///…/scheduler.sock
        scheduler.kill(); scheduler.start()                         # a crash, then a restart

Plus the manifests tests and the benchmark create: a Node as the controller would publish it,
and a pod asking for devices.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from apis.extension import names
from apis.k8s import resources
from apis.k8s.core import Node
from cli.launchers.base import SHORT_LEASE, KubeComponentProcess, leader_election_flags

__all__ = ["SchedulerProcess", "node_manifest", "pod_manifest"]


class SchedulerProcess(KubeComponentProcess):
    """One `tessera scheduler` process. Not thread-safe: drive it from one thread."""

    def __init__(
        self,
        kubeconfig: Path,
        work_dir: Path,
        *,
        name: str = "scheduler",
        leader_elect: bool = False,
        lease: tuple[float, float, float] = SHORT_LEASE,
        verbosity: int = 2,
        grpc_address: str = "",
        extra_args: Sequence[str] = (),
    ) -> None:
        """`lease` is (duration, renew deadline, retry period) in seconds, short for tests. The
        process's leader election identity is `name` (through POD_NAME, as in a Deployment).

        The gRPC API listens on `grpc_address`, by default a socket in `work_dir` (tests keep
        apart that way); `tessera up` passes `scheduler.service.default_address()`, where
        `tessera explain` looks without being told.
        """
        self.grpc_address = grpc_address or f"unix://{work_dir / f'{name}.sock'}"
        # The election's flags follow `extra_args`, so they win.
        args = [*extra_args, *(leader_election_flags(lease) if leader_elect else [])]
        super().__init__(
            name,
            kubeconfig,
            command="scheduler",
            directory=work_dir,
            log_name=f"{name}.log",
            address_name=f"{name}.address",
            address_flags=("--http-address", "--http-address-file"),
            flags=["--grpc-address", self.grpc_address],
            args=args,
            verbosity=verbosity,
            env={"POD_NAME": name},
        )

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM and wait; bindings in flight may take a while to finish on a loaded machine."""
        return super().stop(timeout)

    def get(self, path: str) -> tuple[int, bytes]:
        """GET a diagnostics path: (status, body)."""
        return self.request("GET", path)

    def get_json(self, path: str) -> Any:
        status, body = self.get(path)
        if status != 200:
            raise AssertionError(f"GET {path}: {status} {body[:200]!r}")
        return json.loads(body)

    def metric(self, name: str, labels: Mapping[str, str] | None = None) -> float:
        """The sum of `name` over its series that carry `labels` (0 when absent)."""
        return self.metric_sum(name, labels) or 0.0


def node_manifest(node: Node) -> dict[str, Any]:
    """A Node object as the API expects it (labels, taints, allocatable = capacity)."""
    spec: dict[str, Any] = {}
    if node.taints:
        spec["taints"] = [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.taints]
    if node.unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.name, "labels": dict(node.labels)},
        "spec": spec,
        "status": {
            "allocatable": resources.format_list(node.allocatable),
            "capacity": resources.format_list(node.capacity),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod_manifest(
    name: str,
    requests: Mapping[str, str | int],
    *,
    namespace: str = "default",
    scheduler_name: str = names.SCHEDULER_NAME,
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    priority: int | None = None,
    node_name: str = "",
) -> dict[str, Any]:
    """A one-container pod asking for `requests` (limits equal, as device resources require)."""
    quantities = {k: str(v) for k, v in requests.items()}
    spec: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "containers": [
            {"name": "main", "image": "busybox", "resources": {"requests": quantities, "limits": dict(quantities)}}
        ],
    }
    if priority is not None:
        spec["priority"] = priority
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": dict(annotations or {}),
            "labels": dict(labels or {}),
        },
        "spec": spec,
    }
