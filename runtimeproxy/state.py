"""What the proxy knows about live sandboxes and containers, by id.

Hook requests for a container need its pod's metadata, labels and annotations, but only
RunPodSandbox carries them; CreateContainer, StartContainer, StopContainer and
UpdateContainerResources name a sandbox or container by id. The proxy remembers what it
forwarded, and on a miss (after a restart of the proxy, or for objects created before it ran)
asks the runtime itself (PodSandboxStatus, ListContainers), which is the source of truth: it
holds the annotations and labels as the runtime got them, including what PreRunPodSandbox hooks
added. Entries are dropped when the sandbox or container is removed through the proxy.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

import grpc
from cri_api.v1 import api_pb2 as cri
from cri_api.v1 import api_pb2_grpc as cri_grpc

from apis.extension import names

__all__ = ["ContainerInfo", "PodInfo", "PodStore"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PodInfo:
    """A sandbox as hooks see it. `resources` is never mutated; copy it before changing."""

    name: str
    namespace: str
    uid: str
    attempt: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    cgroup_parent: str = ""
    resources: cri.LinuxContainerResources | None = None
    runtime_handler: str = ""

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def skips_hooks(self) -> bool:
        """Pods labelled `runtimeproxy.koordinator.sh/skip-hookserver=true` bypass every hook."""
        return self.labels.get(names.LABEL_SKIP_HOOKSERVER) == "true"

    @classmethod
    def from_sandbox_config(cls, config: cri.PodSandboxConfig, *, runtime_handler: str = "") -> PodInfo:
        linux = config.linux
        return cls(
            name=config.metadata.name,
            namespace=config.metadata.namespace,
            uid=config.metadata.uid,
            attempt=config.metadata.attempt,
            labels=dict(config.labels),
            annotations=dict(config.annotations),
            cgroup_parent=linux.cgroup_parent,
            resources=_copy(linux.resources) if linux.HasField("resources") else None,
            runtime_handler=runtime_handler,
        )

    @classmethod
    def from_sandbox_status(cls, status: cri.PodSandboxStatus) -> PodInfo:
        """From the runtime's view, which lacks the cgroup parent and resources."""
        return cls(
            name=status.metadata.name,
            namespace=status.metadata.namespace,
            uid=status.metadata.uid,
            attempt=status.metadata.attempt,
            labels=dict(status.labels),
            annotations=dict(status.annotations),
            runtime_handler=status.runtime_handler,
        )

    def completed_by(self, other: PodInfo) -> PodInfo:
        """This pod, with the cgroup parent and resources taken from `other` where unknown here."""
        return dataclasses.replace(
            self,
            cgroup_parent=self.cgroup_parent or other.cgroup_parent,
            resources=self.resources if self.resources is not None else other.resources,
        )


@dataclass(frozen=True, slots=True)
class ContainerInfo:
    """A container as hooks see it. `resources` is never mutated; copy it before changing."""

    sandbox_id: str
    name: str
    attempt: int = 0
    id: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)
    envs: Mapping[str, str] = field(default_factory=dict)
    resources: cri.LinuxContainerResources | None = None

    @classmethod
    def from_config(cls, sandbox_id: str, config: cri.ContainerConfig, *, container_id: str = "") -> ContainerInfo:
        linux = config.linux
        return cls(
            sandbox_id=sandbox_id,
            name=config.metadata.name,
            attempt=config.metadata.attempt,
            id=container_id,
            annotations=dict(config.annotations),
            envs={kv.key: kv.value for kv in config.envs},
            resources=_copy(linux.resources) if linux.HasField("resources") else None,
        )

    @classmethod
    def from_container(cls, container: cri.Container) -> ContainerInfo:
        """From the runtime's listing, which lacks envs and resources."""
        return cls(
            sandbox_id=container.pod_sandbox_id,
            name=container.metadata.name,
            attempt=container.metadata.attempt,
            id=container.id,
            annotations=dict(container.annotations),
        )

    def with_resources(self, resources: cri.LinuxContainerResources) -> ContainerInfo:
        return dataclasses.replace(self, resources=_copy(resources))


def _copy(resources: cri.LinuxContainerResources) -> cri.LinuxContainerResources:
    copied = cri.LinuxContainerResources()
    copied.CopyFrom(resources)
    return copied


class PodStore:
    """Sandboxes and containers by id, recovered from the runtime on a miss. Thread-safe.

    Lookups that miss call the runtime (one unary call with `timeout_s`); a sandbox or container
    the runtime does not know gives None, as does a runtime that cannot answer (logged).
    """

    def __init__(self, runtime: cri_grpc.RuntimeServiceStub, *, timeout_s: float = 2.0) -> None:
        self._runtime = runtime
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._pods: dict[str, PodInfo] = {}
        self._containers: dict[str, ContainerInfo] = {}

    def remember_pod(self, sandbox_id: str, pod: PodInfo) -> None:
        with self._lock:
            self._pods[sandbox_id] = pod

    def forget_pod(self, sandbox_id: str) -> None:
        """Drop the sandbox and its containers (idempotent)."""
        with self._lock:
            self._pods.pop(sandbox_id, None)
            for container_id in [c for c, info in self._containers.items() if info.sandbox_id == sandbox_id]:
                del self._containers[container_id]

    def pod(self, sandbox_id: str) -> PodInfo | None:
        with self._lock:
            known = self._pods.get(sandbox_id)
        if known is not None:
            return known
        recovered = self._recover_pod(sandbox_id)
        if recovered is not None:
            self.remember_pod(sandbox_id, recovered)
        return recovered

    def remember_container(self, container_id: str, container: ContainerInfo) -> None:
        with self._lock:
            self._containers[container_id] = container

    def forget_container(self, container_id: str) -> None:
        with self._lock:
            self._containers.pop(container_id, None)

    def container(self, container_id: str) -> ContainerInfo | None:
        with self._lock:
            known = self._containers.get(container_id)
        if known is not None:
            return known
        recovered = self._recover_container(container_id)
        if recovered is not None:
            self.remember_container(container_id, recovered)
        return recovered

    def __len__(self) -> int:
        with self._lock:
            return len(self._pods) + len(self._containers)

    def _recover_pod(self, sandbox_id: str) -> PodInfo | None:
        try:
            response = self._runtime.PodSandboxStatus(
                cri.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id), timeout=self._timeout_s
            )
        except grpc.RpcError as e:
            _log_miss("sandbox", sandbox_id, e)
            return None
        log.info("Recovered sandbox from the runtime", extra={"sandbox": sandbox_id})
        return PodInfo.from_sandbox_status(response.status)

    def _recover_container(self, container_id: str) -> ContainerInfo | None:
        request = cri.ListContainersRequest(filter=cri.ContainerFilter(id=container_id))
        try:
            response = self._runtime.ListContainers(request, timeout=self._timeout_s)
        except grpc.RpcError as e:
            _log_miss("container", container_id, e)
            return None
        for container in response.containers:
            if container.id == container_id:
                log.info("Recovered container from the runtime", extra={"container": container_id})
                return ContainerInfo.from_container(container)
        return None


def _log_miss(kind: str, object_id: str, error: grpc.RpcError) -> None:
    if error.code() == grpc.StatusCode.NOT_FOUND:
        return
    log.warning(
        "Runtime lookup failed; hooks get what the request carries",
        extra={"kind": kind, "id": object_id, "err": f"{error.code().name}: {error.details()}"},
    )
