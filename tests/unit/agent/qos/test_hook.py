"""The QoS hook plugin answering runtime-hook requests (cgroup v2 fixture)."""

from agent.hooks.plugin import HookPlugin
from agent.qos import config
from agent.qos.config import QoSConfig
from agent.qos.hook import QoSHookPlugin
from apis.k8s.core import Pod
from proto.runtime.v1alpha1 import api_pb2
from tests.support.qos import V2Tree, batch_ctr, ctr, make_pod

GiB = 2**30
MEMORY_QOS = config.load(
    "resourceQOSStrategy: {lsClass: {memoryQOS: {enable: true, minLimitPercent: 50, throttlingPercent: 80}}}"
)


def plugin(v2: V2Tree, pods: list[Pod], cfg: QoSConfig | None = None) -> QoSHookPlugin:
    return QoSHookPlugin(config=cfg or QoSConfig(), pods={p.uid: p for p in pods}.get, cgroups=v2.kube())


def container_request(
    pod: Pod, name: str = "a", resources: api_pb2.LinuxContainerResources | None = None
) -> api_pb2.ContainerResourceHookRequest:
    return api_pb2.ContainerResourceHookRequest(
        pod_meta=api_pb2.PodSandboxMetadata(name=pod.name, namespace=pod.namespace, uid=pod.uid),
        container_meta=api_pb2.ContainerMetadata(name=name),
        container_resources=resources or api_pb2.LinuxContainerResources(cpu_shares=2, oom_score_adj=1000),
        pod_labels=dict(pod.labels),
    )


def test_is_a_hook_plugin() -> None:
    assert issubclass(QoSHookPlugin, HookPlugin) and QoSHookPlugin.name == "qos"


def test_be_container_gets_batch_resources(v2: V2Tree) -> None:
    be = make_pod(
        batch_ctr("a", cpu_request="1000", cpu_limit="2000", memory_limit="1Gi"),
        qos="BE",
    )
    response = api_pb2.ContainerResourceHookResponse()
    plugin(v2, [be]).pre_create_container(container_request(be), response)
    r = response.container_resources
    assert (r.cpu_shares, r.cpu_period, r.cpu_quota, r.memory_limit_in_bytes) == (1024, 100_000, 200_000, GiB)
    assert r.oom_score_adj == 1000  # what kubelet asked and QoS does not own is kept
    assert dict(r.unified) == {}  # memory QoS off


def test_memory_qos_goes_to_unified_on_v2(v2: V2Tree) -> None:
    ls = make_pod(ctr("a", {"cpu": "1", "memory": "1Gi"}, {"memory": "2Gi"}))
    response = api_pb2.ContainerResourceHookResponse()
    plugin(v2, [ls], MEMORY_QOS).pre_update_container_resources(container_request(ls), response)
    assert dict(response.container_resources.unified) == {
        "memory.min": str(GiB // 2),
        "memory.low": "0",
        "memory.high": str(int(2 * GiB * 0.8)),
    }


def test_unknown_pod_or_container_is_left_as_kubelet_asked(v2: V2Tree) -> None:
    ls = make_pod(ctr("a", {"cpu": "1"}))
    p = plugin(v2, [ls])
    stranger = make_pod(ctr("a", {"cpu": "1"}))
    response = api_pb2.ContainerResourceHookResponse()
    p.pre_create_container(container_request(stranger), response)
    assert not response.HasField("container_resources")
    p.pre_create_container(container_request(ls, name="not-in-spec"), response)
    assert not response.HasField("container_resources")


def test_composes_with_an_earlier_plugin(v2: V2Tree) -> None:
    ls = make_pod(ctr("a", {"cpu": "250m"}, {"cpu": "500m"}))
    response = api_pb2.ContainerResourceHookResponse(
        container_resources=api_pb2.LinuxContainerResources(cpuset_cpus="0-1"), container_envs={"X": "1"}
    )
    plugin(v2, [ls]).pre_create_container(container_request(ls), response)
    r = response.container_resources
    assert (r.cpuset_cpus, r.cpu_shares, r.cpu_quota) == ("0-1", 256, 50_000)
    assert dict(response.container_envs) == {"X": "1"}


def test_unlimited_is_not_set_unless_a_limit_must_be_lifted(v2: V2Tree) -> None:
    ls = make_pod(ctr("a", {"cpu": "1"}))
    p = plugin(v2, [ls])
    response = api_pb2.ContainerResourceHookResponse()
    p.pre_create_container(container_request(ls), response)
    assert (response.container_resources.cpu_quota, response.container_resources.memory_limit_in_bytes) == (0, 0)
    limited = api_pb2.LinuxContainerResources(cpu_quota=50_000, memory_limit_in_bytes=GiB)
    response = api_pb2.ContainerResourceHookResponse()
    p.pre_update_container_resources(container_request(ls, resources=limited), response)
    assert (response.container_resources.cpu_quota, response.container_resources.memory_limit_in_bytes) == (-1, -1)


def test_sandbox_gets_pod_level_resources(v2: V2Tree) -> None:
    be = make_pod(
        batch_ctr("a", cpu_request="500", cpu_limit="500"),
        batch_ctr("b", cpu_request="500", cpu_limit="1500"),
        qos="BE",
    )
    request = api_pb2.PodSandboxHookRequest(
        pod_meta=api_pb2.PodSandboxMetadata(name=be.name, namespace=be.namespace, uid=be.uid),
        resources=api_pb2.LinuxContainerResources(cpu_shares=2),
    )
    response = api_pb2.PodSandboxHookResponse(cgroup_parent="/kubepods/besteffort")
    plugin(v2, [be]).pre_run_pod_sandbox(request, response)
    assert (response.resources.cpu_shares, response.resources.cpu_quota) == (1024, 200_000)
    assert response.cgroup_parent == "/kubepods/besteffort"


def test_config_can_change(v2: V2Tree) -> None:
    ls = make_pod(ctr("a", {"memory": "1Gi"}, {"memory": "2Gi"}))
    p = plugin(v2, [ls])
    p.set_config(MEMORY_QOS)
    response = api_pb2.ContainerResourceHookResponse()
    p.pre_create_container(container_request(ls), response)
    assert "memory.min" in response.container_resources.unified
