"""runtime proxy latency: CreateContainer through the proxy against the runtime directly.

Runs against a real CRI runtime (`--runtime-endpoint`) and an image it already has (`--image`),
the way a node runs the parts: the proxy in its own process, a hook server with the GPU env and
RDMA plugins (failure policy Fail) in this one, and this process playing kubelet. In one
host-network sandbox whose pod holds two GPUs it creates containers alternately straight at the
runtime and through the proxy (so drift hits both series alike); they go with the sandbox at the
end. The proxy's added latency is the difference of the two series' percentiles. Target: added
p99 <= 5 ms. The runtime's own tail (fsync of its metadata) dominates both p99s on slow disks;
put its state on tmpfs to see the proxy's share.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import grpc
from cri_api.v1 import api_pb2 as cri
from cri_api.v1 import api_pb2_grpc as cri_grpc

import runtimeproxy
from agent.hooks import GPUEnvPlugin, HookServer, RDMADevicesPlugin
from apis.extension import names
from cli.bench._report import Latencies, Report, Timer
from kube import unixsocket
from runtimeproxy import HookType, ProxySettings

_READY_TIMEOUT_S = 30.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runtime-endpoint", required=True, help="the runtime's CRI socket")
    parser.add_argument("--image", required=True, help="an image the runtime already has")
    parser.add_argument("--iterations", type=int, default=1000, help="containers created each way (default 1000)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed creations each way first (default 20)")
    parser.add_argument("--cgroup-parent", default="", help="cgroup parent of the benchmark's sandbox")


def sandbox_config(cgroup_parent: str) -> cri.PodSandboxConfig:
    allocated = {"gpu": [{"minor": 2}, {"minor": 3}]}
    config = cri.PodSandboxConfig(
        metadata=cri.PodSandboxMetadata(name="tessera-bench", namespace="default", uid=uuid.uuid4().hex),
        annotations={names.ANNOTATION_DEVICE_ALLOCATED: json.dumps(allocated)},
    )
    config.linux.cgroup_parent = cgroup_parent
    config.linux.security_context.namespace_options.network = cri.NamespaceMode.NODE
    return config


def measure(
    runtime_endpoint: str, image: str, *, iterations: int, warmup: int, cgroup_parent: str = ""
) -> tuple[Latencies, Latencies]:
    """(direct, through the proxy) latencies of CreateContainer. Removes what it created."""
    with tempfile.TemporaryDirectory(prefix="tessera-bench-", dir="/tmp") as name:
        workdir = Path(name)
        (workdir / "hooks").mkdir()
        doc = {
            "remote-endpoint": str(workdir / "agent.sock"),
            "failure-policy": "Fail",
            "runtime-hooks": [h.value for h in HookType],
        }
        (workdir / "hooks" / "agent.json").write_text(json.dumps(doc))
        settings = ProxySettings(
            listen=workdir / "proxy.sock", runtime_endpoint=runtime_endpoint, hook_config_dir=workdir / "hooks"
        )
        proxy = multiprocessing.get_context("spawn").Process(target=runtimeproxy.run, args=(settings,))
        with HookServer([GPUEnvPlugin(), RDMADevicesPlugin()], socket_path=workdir / "agent.sock"):
            proxy.start()
            try:
                _wait_ready(unixsocket.target(str(settings.listen)), proxy)
                return _run(
                    runtime_endpoint,
                    str(settings.listen),
                    image=image,
                    iterations=iterations,
                    warmup=warmup,
                    cgroup_parent=cgroup_parent,
                )
            finally:
                proxy.terminate()  # SIGTERM: the proxy stops cleanly
                proxy.join(_READY_TIMEOUT_S)


def _wait_ready(target: str, process: multiprocessing.process.BaseProcess) -> None:
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while time.monotonic() < deadline and process.is_alive():
        with grpc.insecure_channel(target) as channel:  # fresh channel: no reconnect backoff
            try:
                stub = cri_grpc.RuntimeServiceStub(channel)  # type: ignore[no-untyped-call]
                stub.Version(cri.VersionRequest(), timeout=1)
                return
            except grpc.RpcError:
                time.sleep(0.05)
    raise RuntimeError(f"runtime proxy at {target} did not become ready (exit code {process.exitcode})")


def _run(
    runtime_endpoint: str, proxy_socket: str, *, image: str, iterations: int, warmup: int, cgroup_parent: str
) -> tuple[Latencies, Latencies]:
    with (
        grpc.insecure_channel(unixsocket.target(runtime_endpoint)) as direct_channel,
        grpc.insecure_channel(unixsocket.target(proxy_socket)) as proxy_channel,
    ):
        direct = cri_grpc.RuntimeServiceStub(direct_channel)  # type: ignore[no-untyped-call]
        proxied = cri_grpc.RuntimeServiceStub(proxy_channel)  # type: ignore[no-untyped-call]
        config = sandbox_config(cgroup_parent)
        sandbox = direct.RunPodSandbox(cri.RunPodSandboxRequest(config=config), timeout=60).pod_sandbox_id
        creator = _Creator(direct, proxied, sandbox, config, image)
        direct_timer, proxied_timer = Timer(), Timer()
        try:
            for index in range(warmup):
                creator.create(f"warmup-direct-{index}", via_proxy=False)
                creator.create(f"warmup-proxied-{index}", via_proxy=True)
            for index in range(iterations):
                with direct_timer.time():
                    creator.create(f"direct-{index}", via_proxy=False)
                with proxied_timer.time():
                    creator.create(f"proxied-{index}", via_proxy=True)
        finally:
            # Removing containers makes the runtime clean up in the background; doing it only
            # after the timed loop keeps that noise out of both series.
            direct.StopPodSandbox(cri.StopPodSandboxRequest(pod_sandbox_id=sandbox), timeout=60)
            direct.RemovePodSandbox(cri.RemovePodSandboxRequest(pod_sandbox_id=sandbox), timeout=60)
    return direct_timer.summary(), proxied_timer.summary()


@dataclass(frozen=True, slots=True)
class _Creator:
    direct: cri_grpc.RuntimeServiceStub
    proxy: cri_grpc.RuntimeServiceStub
    sandbox: str
    config: cri.PodSandboxConfig
    image: str

    def create(self, name: str, *, via_proxy: bool) -> None:
        """One CreateContainer (removing the sandbox removes the container)."""
        config = cri.ContainerConfig(metadata=cri.ContainerMetadata(name=name), image=cri.ImageSpec(image=self.image))
        request = cri.CreateContainerRequest(pod_sandbox_id=self.sandbox, config=config, sandbox_config=self.config)
        stub = self.proxy if via_proxy else self.direct
        stub.CreateContainer(request, timeout=60)


def run(args: argparse.Namespace, report: Report) -> int:
    report.setting(
        runtime_endpoint=args.runtime_endpoint, image=args.image, iterations=args.iterations, warmup=args.warmup
    )
    direct, proxied = measure(
        args.runtime_endpoint,
        args.image,
        iterations=args.iterations,
        warmup=args.warmup,
        cgroup_parent=args.cgroup_parent,
    )
    report.latencies(direct, "create_direct", label="CreateContainer direct")
    report.latencies(proxied, "create_via_proxy", label="CreateContainer via proxy")
    report.value(
        "proxy_added_p50_ms",
        proxied.p50_ms - direct.p50_ms,
        "ms",
        label="proxy added, p50",
        proxy_added_p99_ms=proxied.p99_ms - direct.p99_ms,
    )
    return 0
