"""What the proxy remembers about pods and containers, and the hook requests built from it."""

from __future__ import annotations

from cri_api.v1 import api_pb2 as cri

from apis.extension import names
from runtimeproxy import translate
from runtimeproxy.state import ContainerInfo, PodInfo


def sandbox_config(**labels: str) -> cri.PodSandboxConfig:
    config = cri.PodSandboxConfig(
        metadata=cri.PodSandboxMetadata(name="p", namespace="ns", uid="u", attempt=1),
        labels=labels,
        annotations={"a": "1"},
    )
    config.linux.cgroup_parent = "/kubepods/podu"
    config.linux.resources.cpu_shares = 256
    return config


def test_pod_from_sandbox_config() -> None:
    pod = PodInfo.from_sandbox_config(sandbox_config(app="x"), runtime_handler="runc")
    assert (pod.ref, pod.uid, pod.attempt, pod.runtime_handler) == ("ns/p", "u", 1, "runc")
    assert (dict(pod.labels), dict(pod.annotations)) == ({"app": "x"}, {"a": "1"})
    assert pod.cgroup_parent == "/kubepods/podu"
    assert pod.resources is not None and pod.resources.cpu_shares == 256


def test_skip_label_only_when_true() -> None:
    assert PodInfo.from_sandbox_config(sandbox_config(**{names.LABEL_SKIP_HOOKSERVER: "true"})).skips_hooks
    assert not PodInfo.from_sandbox_config(sandbox_config(**{names.LABEL_SKIP_HOOKSERVER: "false"})).skips_hooks
    assert not PodInfo.from_sandbox_config(sandbox_config()).skips_hooks


def test_pod_recovered_from_the_runtime_is_completed_by_the_request() -> None:
    status = cri.PodSandboxStatus(
        metadata=cri.PodSandboxMetadata(name="p", namespace="ns", uid="u"), annotations={"added-by-hook": "1"}
    )
    recovered = PodInfo.from_sandbox_status(status)
    assert recovered.cgroup_parent == "" and recovered.resources is None
    completed = recovered.completed_by(PodInfo.from_sandbox_config(sandbox_config()))
    assert dict(completed.annotations) == {"added-by-hook": "1"}
    assert completed.cgroup_parent == "/kubepods/podu"
    assert completed.resources is not None and completed.resources.cpu_shares == 256


def test_container_hook_request_carries_pod_and_container() -> None:
    config = cri.ContainerConfig(
        metadata=cri.ContainerMetadata(name="main", attempt=2),
        envs=[cri.KeyValue(key="A", value="1")],
        annotations={"c": "3"},
    )
    config.linux.resources.memory_limit_in_bytes = 1 << 20
    container = ContainerInfo.from_config("sb", config, container_id="cid")
    request = translate.container_hook_request(PodInfo.from_sandbox_config(sandbox_config(app="x")), container)
    assert (request.pod_meta.namespace, request.pod_meta.name, request.pod_meta.uid) == ("ns", "p", "u")
    assert (request.container_meta.name, request.container_meta.attempt, request.container_meta.id) == (
        "main",
        2,
        "cid",
    )
    assert dict(request.container_envs) == {"A": "1"}
    assert dict(request.container_annotations) == {"c": "3"}
    assert dict(request.pod_annotations) == {"a": "1"}
    assert dict(request.pod_labels) == {"app": "x"}
    assert request.pod_cgroup_parent == "/kubepods/podu"
    assert request.container_resources.memory_limit_in_bytes == 1 << 20
    assert request.pod_resources.cpu_shares == 256


def test_container_from_runtime_listing() -> None:
    listed = cri.Container(
        id="cid", pod_sandbox_id="sb", metadata=cri.ContainerMetadata(name="main", attempt=1), annotations={"c": "3"}
    )
    container = ContainerInfo.from_container(listed)
    assert (container.sandbox_id, container.name, container.attempt, container.id) == ("sb", "main", 1, "cid")
    assert container.resources is None
    updated = container.with_resources(cri.LinuxContainerResources(cpu_shares=2))
    assert updated.resources is not None and updated.resources.cpu_shares == 2


def test_sandbox_hook_request() -> None:
    overhead = cri.LinuxContainerResources(memory_limit_in_bytes=100)
    request = translate.sandbox_hook_request(PodInfo.from_sandbox_config(sandbox_config()), overhead=overhead)
    assert request.cgroup_parent == "/kubepods/podu"
    assert request.overhead.memory_limit_in_bytes == 100
    assert request.resources.cpu_shares == 256
