"""Fixtures for agent tests: short socket directories, hook servers on real unix sockets, requests."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import grpc
import pytest

from agent.hooks import HookPlugin, HookServer
from apis import names
from proto.runtime.v1alpha1 import api_pb2, api_pb2_grpc
from tests.support import sockets

Stub = api_pb2_grpc.RuntimeHookServiceStub


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    """A short temporary directory: unix socket paths must stay under 108 bytes."""
    with sockets.temporary() as path:
        yield path


@pytest.fixture
def start_hook_server(sock_dir: Path) -> Iterator[Callable[[Sequence[HookPlugin]], HookServer]]:
    """Factory: start a HookServer with the given plugins on a fresh socket; stopped at teardown."""
    servers: list[HookServer] = []

    def start(plugins: Sequence[HookPlugin]) -> HookServer:
        server = HookServer(plugins, socket_path=sock_dir / f"hooks-{len(servers)}.sock")
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop(grace_s=None)


@pytest.fixture
def serve(start_hook_server: Callable[[Sequence[HookPlugin]], HookServer]) -> Iterator[Callable[..., Stub]]:
    """Factory: serve `plugins` and return a RuntimeHookService client over the unix socket."""
    channels: list[grpc.Channel] = []

    def make(*plugins: HookPlugin) -> Stub:
        server = start_hook_server(plugins)
        channel = grpc.insecure_channel(server.address)
        channels.append(channel)
        return Stub(channel)

    yield make
    for channel in channels:
        channel.close()


@pytest.fixture
def container_request() -> Callable[..., api_pb2.ContainerResourceHookRequest]:
    """Factory: a PreCreateContainer request for a pod with the given device allocation."""

    def make(
        allocated: object | None = None,
        *,
        raw_annotation: str | None = None,
        name: str = "train-0",
        namespace: str = "default",
        labels: Mapping[str, str] | None = None,
    ) -> api_pb2.ContainerResourceHookRequest:
        annotations = {}
        if raw_annotation is not None:
            annotations[names.ANNOTATION_DEVICE_ALLOCATED] = raw_annotation
        elif allocated is not None:
            annotations[names.ANNOTATION_DEVICE_ALLOCATED] = json.dumps(allocated)
        return api_pb2.ContainerResourceHookRequest(
            pod_meta=api_pb2.PodSandboxMetadata(name=name, namespace=namespace, uid="uid-1"),
            container_meta=api_pb2.ContainerMetadata(name="main"),
            pod_annotations=annotations,
            pod_labels=dict(labels or {}),
        )

    return make
