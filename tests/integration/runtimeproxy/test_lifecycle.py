"""Every hook point fires once, with the pod's identity, across a pod's life on real containerd."""

from __future__ import annotations

import grpc
import pytest
from cri_api.v1 import api_pb2 as cri

from tests.integration.runtimeproxy.rig import Recorder, Rig, gpu_annotation

pytestmark = [pytest.mark.integration, pytest.mark.root]


def test_hooks_fire_in_kubelet_order_and_see_the_pod(rig: Rig) -> None:
    recorder = Recorder()
    rig.hook_server(recorder)
    rig.proxy()
    kubelet = rig.kubelet()
    pod, config = rig.run_pod(kubelet, "life", annotations=gpu_annotation(4), labels={"app": "life"})
    container = kubelet.run_container(pod, config, "main")
    update = cri.UpdateContainerResourcesRequest(
        container_id=container, linux=cri.LinuxContainerResources(cpu_shares=256)
    )
    kubelet.runtime.UpdateContainerResources(update, timeout=30)
    kubelet.stop_container(container)
    kubelet.runtime.RemoveContainer(cri.RemoveContainerRequest(container_id=container), timeout=30)
    kubelet.remove_pod(pod)

    assert recorder.hooks() == [
        "PreRunPodSandbox",
        "PreCreateContainer",
        "PreStartContainer",
        "PostStartContainer",
        "PreUpdateContainerResources",
        "PostStopContainer",
        "PostStopPodSandbox",
    ]
    for name, request in recorder.calls:
        assert (request.pod_meta.namespace, request.pod_meta.name) == ("default", "life"), name
        assert request.pod_meta.uid == config.metadata.uid, name
    containers = [r for _, r in recorder.calls if isinstance(r, type(recorder.calls[1][1]))]
    for request in containers:
        assert dict(request.pod_annotations) == gpu_annotation(4)
        assert request.pod_labels["app"] == "life"
        assert request.container_meta.name == "main"
    # After creation, hooks name the container by the id the runtime gave it.
    assert {r.container_meta.id for r in containers[1:]} == {container}
    update_request = dict(recorder.calls)["PreUpdateContainerResources"]
    assert update_request.container_resources.cpu_shares == 256


def test_runtime_errors_of_intercepted_calls_reach_kubelet_unchanged(rig: Rig) -> None:
    rig.hook_server(Recorder())
    rig.proxy()
    kubelet = rig.kubelet()
    pod, _ = rig.run_pod(kubelet, "gone")
    kubelet.remove_pod(pod)
    stop = cri.StopPodSandboxRequest(pod_sandbox_id=pod)
    with pytest.raises(grpc.RpcError) as through_proxy:
        kubelet.runtime.StopPodSandbox(stop, timeout=30)
    with pytest.raises(grpc.RpcError) as direct:
        rig.direct.runtime.StopPodSandbox(stop, timeout=30)
    assert through_proxy.value.code() == direct.value.code() == grpc.StatusCode.NOT_FOUND
    assert through_proxy.value.details() == direct.value.details()
