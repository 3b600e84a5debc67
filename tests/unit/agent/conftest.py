"""Fixtures of the agent's unit tests.

- The fixture node (profile, sysfs tree, FakeNVML) and the NVML environment a test runs in
  (`tests/support/nvml.py`, shared with the integration tests).
- Hook servers on real unix sockets (short socket directories) and hook requests.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import grpc
import pytest

from agent.hooks import HookPlugin, HookServer
from apis.extension import names
from proto.runtime.v1alpha1 import api_pb2, api_pb2_grpc
from tests.support.nvml import fake_nvml, nvml, nvml_env, profile, sysfs

__all__ = ["container_request", "fake_nvml", "nvml", "nvml_env", "profile", "serve", "start_hook_server", "sysfs"]

Stub = api_pb2_grpc.RuntimeHookServiceStub


# --- hook servers ---------------------------------------------------------------------------------


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
    """Factory: a PreCreateContainer request for a pod with the given device allocation (UID `uid-<name>`)."""

    def make(
        allocated: object | None = None,
        *,
        raw_annotation: str | None = None,
        name: str = "train-0",
        namespace: str = "default",
        uid: str | None = None,
        container: str = "main",
        labels: Mapping[str, str] | None = None,
    ) -> api_pb2.ContainerResourceHookRequest:
        annotations = {}
        if raw_annotation is not None:
            annotations[names.ANNOTATION_DEVICE_ALLOCATED] = raw_annotation
        elif allocated is not None:
            annotations[names.ANNOTATION_DEVICE_ALLOCATED] = json.dumps(allocated)
        return api_pb2.ContainerResourceHookRequest(
            pod_meta=api_pb2.PodSandboxMetadata(name=name, namespace=namespace, uid=uid or f"uid-{name}"),
            container_meta=api_pb2.ContainerMetadata(name=container),
            pod_annotations=annotations,
            pod_labels=dict(labels or {}),
        )

    return make
