"""hook server latency: PreCreateContainerHook over a unix socket, GPU env and RDMA plugins loaded.

Measures what the runtime proxy waits for on every CreateContainer: one call to the agent's hook
server with a pod that holds two GPUs, or with `--hami-core` half a GPU isolated by HAMi-core (its
env, preload and mounts; a stand-in library file, and the lock directory made ready on every call,
as on a node). Target: p99 <= 2 ms.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import grpc

from agent.hooks import GPUEnvPlugin, HookServer, RDMADevicesPlugin
from agent.hooks.hamicore import HAMiCore
from apis.extension import names
from cli.bench._report import Latencies, Report, Timer
from proto.runtime.v1alpha1 import api_pb2, api_pb2_grpc


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--iterations", type=int, default=5000, help="timed calls (default 5000)")
    parser.add_argument("--warmup", type=int, default=200, help="untimed calls first (default 200)")
    parser.add_argument(
        "--hami-core", action="store_true", help="a pod labelled for HAMi-core isolation, with a share of a GPU"
    )


def request(*, hami_core: bool = False) -> api_pb2.ContainerResourceHookRequest:
    allocated: dict[str, list[dict[str, object]]] = {
        "gpu": [{"minor": 2, "resources": {names.GPU_CORE: "100"}}, {"minor": 3}]
    }
    labels = {}
    if hami_core:
        half = {names.GPU_CORE: "50", names.GPU_MEMORY: "40Gi", names.GPU_MEMORY_RATIO: "50"}
        allocated = {"gpu": [{"minor": 2, "resources": half}]}
        labels = {names.LABEL_GPU_ISOLATION_PROVIDER: names.GPU_ISOLATION_PROVIDER_HAMI_CORE}
    return api_pb2.ContainerResourceHookRequest(
        pod_meta=api_pb2.PodSandboxMetadata(name="bench", namespace="default", uid="uid"),
        container_meta=api_pb2.ContainerMetadata(name="main"),
        pod_annotations={names.ANNOTATION_DEVICE_ALLOCATED: json.dumps(allocated)},
        pod_labels=labels,
    )


def measure(iterations: int, warmup: int, *, hami_core: bool = False) -> Latencies:
    with tempfile.TemporaryDirectory(prefix="tessera-bench-", dir="/tmp") as workdir:
        library = Path(workdir) / "vgpu" / "libvgpu.so"
        library.parent.mkdir()
        library.write_bytes(b"stand-in")
        plugins = [GPUEnvPlugin(HAMiCore(library=library, lock_dir=Path(workdir) / "vgpulock")), RDMADevicesPlugin()]
        with (
            HookServer(plugins, socket_path=Path(workdir) / "agent.sock") as server,
            grpc.insecure_channel(server.address) as channel,
        ):
            stub = api_pb2_grpc.RuntimeHookServiceStub(channel)  # type: ignore[no-untyped-call]
            call = stub.PreCreateContainerHook
            message = request(hami_core=hami_core)
            for _ in range(warmup):
                call(message, timeout=5)
            timer = Timer()
            for _ in range(iterations):
                with timer.time():
                    call(message, timeout=5)
    return timer.summary()


def run(args: argparse.Namespace, report: Report) -> int:
    report.setting(iterations=args.iterations, warmup=args.warmup, hami_core=args.hami_core)
    report.latencies(measure(args.iterations, args.warmup, hami_core=args.hami_core), label="PreCreateContainerHook")
    return 0
