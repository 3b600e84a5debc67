"""Calls the proxy does not intercept reach containerd unchanged, streaming calls included."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import aiohttp
import grpc
import pytest
from cri_api.v1 import api_pb2 as cri
from google.protobuf.message import Message

from tests.integration.runtimeproxy.rig import Rig

pytestmark = [pytest.mark.integration, pytest.mark.root]


@pytest.fixture
def running(rig: Rig) -> tuple[Rig, str, str]:
    """A proxy with a hook server, and one running container: (rig, sandbox id, container id)."""
    rig.hook_server()
    rig.proxy()
    kubelet = rig.kubelet()
    pod, config = rig.run_pod(kubelet, "streams")
    return rig, pod, kubelet.run_container(pod, config, "main")


def test_unintercepted_calls_answer_as_containerd_does(running: tuple[Rig, str, str]) -> None:
    rig, pod, container = running
    kubelet = rig.kubelet()
    image = cri.ImageSpec(image=kubelet.image)
    calls: list[tuple[str, str, Message]] = [
        ("runtime", "Version", cri.VersionRequest()),
        ("runtime", "ListPodSandbox", cri.ListPodSandboxRequest()),
        ("runtime", "ListContainers", cri.ListContainersRequest()),
        ("runtime", "PodSandboxStatus", cri.PodSandboxStatusRequest(pod_sandbox_id=pod)),
        ("images", "ImageStatus", cri.ImageStatusRequest(image=image)),
        ("images", "ListImages", cri.ListImagesRequest()),
    ]
    for service, method, request in calls:
        through_proxy = getattr(getattr(kubelet, service), method)(request, timeout=30)
        assert through_proxy == getattr(getattr(rig.direct, service), method)(request, timeout=30), method
    status = kubelet.runtime.ContainerStatus(cri.ContainerStatusRequest(container_id=container), timeout=30)
    assert status.status.state == cri.ContainerState.CONTAINER_RUNNING


def test_runtime_errors_are_relayed_with_code_and_message(running: tuple[Rig, str, str]) -> None:
    rig, _, _ = running
    request = cri.ContainerStatusRequest(container_id="no-such-container")
    with pytest.raises(grpc.RpcError) as through_proxy:
        rig.kubelet().runtime.ContainerStatus(request, timeout=30)
    with pytest.raises(grpc.RpcError) as direct:
        rig.direct.runtime.ContainerStatus(request, timeout=30)
    assert through_proxy.value.code() == direct.value.code() == grpc.StatusCode.NOT_FOUND
    assert through_proxy.value.details() == direct.value.details()


def test_streaming_and_unknown_methods_are_relayed(running: tuple[Rig, str, str]) -> None:
    rig, _, _ = running
    kubelet = rig.kubelet()
    # containerd 1.6 does not implement GetContainerEvents (server streaming) yet; the proxy must
    # say exactly that rather than fail on its own.
    with pytest.raises(grpc.RpcError) as events:
        next(iter(kubelet.runtime.GetContainerEvents(cri.GetEventsRequest(), timeout=30)))
    with pytest.raises(grpc.RpcError) as direct:
        next(iter(rig.direct.runtime.GetContainerEvents(cri.GetEventsRequest(), timeout=30)))
    assert events.value.code() == direct.value.code()
    with grpc.insecure_channel(kubelet.address) as channel:
        unknown = channel.unary_unary("/runtime.v1.RuntimeService/NoSuchMethod")
        with pytest.raises(grpc.RpcError) as info:
            unknown(b"", timeout=30)
    assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_messages_larger_than_grpc_defaults_pass(running: tuple[Rig, str, str]) -> None:
    rig, _, container = running
    # gRPC's default limit is 4 MiB; kubelet allows 16 MiB for CRI messages, and so must the proxy.
    result = rig.kubelet().exec_sync(container, ["head", "-c", str(6 * 2**20), "/dev/zero"])
    assert (result.exit_code, len(result.stdout)) == (0, 6 * 2**20)


async def _exec_over_websocket(url: str) -> tuple[bytes, bytes]:
    """Run an exec stream as kubectl does (v4 channel protocol); returns (stdout, status)."""
    stdout, status = b"", b""
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(url.replace("http", "ws", 1), protocols=("v4.channel.k8s.io",)) as ws,
    ):
        async for message in ws:
            if message.type != aiohttp.WSMsgType.BINARY or not message.data:
                continue
            channel, data = message.data[0], message.data[1:]
            if channel == 1:
                stdout += data
            elif channel == 3:
                status += data
    return stdout, status


def test_exec_attach_and_port_forward_work_through_the_proxy(running: tuple[Rig, str, str]) -> None:
    rig, pod, container = running
    kubelet = rig.kubelet()
    exec_request = cri.ExecRequest(container_id=container, cmd=["echo", "through the proxy"], stdout=True, stderr=True)
    url = kubelet.runtime.Exec(exec_request, timeout=30).url
    stdout, status = asyncio.run(_exec_over_websocket(url))
    assert stdout == b"through the proxy\n"
    assert b'"status":"Success"' in status
    attach = kubelet.runtime.Attach(cri.AttachRequest(container_id=container, stdout=True), timeout=30).url
    forward = kubelet.runtime.PortForward(cri.PortForwardRequest(pod_sandbox_id=pod, port=[8080]), timeout=30).url
    # All three are served by containerd's stream server, which kubelet reaches directly.
    assert {urlsplit(u).netloc for u in (url, attach, forward)} == {urlsplit(url).netloc}
    assert [urlsplit(u).path.split("/")[1] for u in (url, attach, forward)] == ["exec", "attach", "portforward"]
