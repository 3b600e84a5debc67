"""Fixtures of the agent's unit tests.

- The fixture node (profile, sysfs tree, FakeNVML) and the NVML environment a test runs in:
  `nvml_env` runs a test twice, on FakeNVML over the fixture sysfs tree (always) and on real
  `pynvml` over `/sys` where an NVIDIA GPU and driver are present (skipped with the reason
  elsewhere). Tests that inject faults skip the real run through `env.require_fake()`.
- Hook servers on real unix sockets (short socket directories) and hook requests.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
import pynvml
import pytest

from agent.discovery.fake_nvml import FakeNVML
from agent.discovery.nvmllib import NVML, NVMLLibrary
from agent.discovery.simulated import Profile, load_profile
from agent.hooks import HookPlugin, HookServer
from apis.extension import names
from proto.runtime.v1alpha1 import api_pb2, api_pb2_grpc
from tests.unit.agent.sysfs_tree import SysfsTree

FIXTURE_PROFILE = Path(__file__).parent / "fixtures" / "gpu-node.yaml"
NODE = "gpu-node-1"


@pytest.fixture
def profile() -> Profile:
    return load_profile(str(FIXTURE_PROFILE))


@pytest.fixture
def sysfs(tmp_path: Path, profile: Profile) -> SysfsTree:
    return SysfsTree(tmp_path / "sys").write(profile)


@pytest.fixture
def fake_nvml(profile: Profile) -> FakeNVML:
    """The fixture node's 8 GPUs, not yet initialised (as pynvml before `nvmlInit`)."""
    return profile.fake_nvml(NODE)


@dataclass
class NVMLEnv:
    lib: NVMLLibrary
    sysfs_root: Path
    fake: FakeNVML | None
    profile: Profile | None

    def require_fake(self) -> FakeNVML:
        if self.fake is None:
            pytest.skip("needs fault injection, which only the fake NVML offers")
        return self.fake


def real_nvml_or_skip() -> None:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        pytest.skip(f"no NVIDIA GPU and driver on this machine (nvmlInit: {e})")
    pynvml.nvmlShutdown()


@pytest.fixture(params=["fake", "real"])
def nvml_env(request: pytest.FixtureRequest, tmp_path: Path, profile: Profile) -> NVMLEnv:
    if request.param == "fake":
        tree = SysfsTree(tmp_path / "sys").write(profile)
        fake = profile.fake_nvml(NODE)
        return NVMLEnv(fake, tree.root, fake, profile)
    real_nvml_or_skip()
    return NVMLEnv(pynvml, Path("/sys"), None, None)


@pytest.fixture
def nvml(nvml_env: NVMLEnv) -> Iterator[NVML]:
    """`nvml_env`'s library, initialised for the test and shut down after it."""
    nvml = NVML(nvml_env.lib)
    nvml.init()
    yield nvml
    nvml.shutdown()


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
