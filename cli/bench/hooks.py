"""hook server latency: PreCreateContainerHook over a unix socket, GPU env and RDMA plugins loaded.

Measures what the runtime proxy waits for on every CreateContainer: one call to the agent's hook
server with a pod that holds two GPUs. Target: p99 <= 2 ms.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import grpc

from agent.hooks import GPUEnvPlugin, HookServer, RDMADevicesPlugin
from apis.extension import names
from cli.bench._report import Latencies, Report, Timer
from proto.runtime.v1alpha1 import api_pb2, api_pb2_grpc


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--iterations", type=int, default=5000, help="timed calls (default 5000)")
    parser.add_argument("--warmup", type=int, default=200, help="untimed calls first (default 200)")


def request() -> api_pb2.ContainerResourceHookRequest:
    allocated = {"gpu": [{"minor": 2, "resources": {names.GPU_CORE: "100"}}, {"minor": 3}]}
    return api_pb2.ContainerResourceHookRequest(
        pod_meta=api_pb2.PodSandboxMetadata(name="bench", namespace="default", uid="uid"),
        container_meta=api_pb2.ContainerMetadata(name="main"),
        pod_annotations={names.ANNOTATION_DEVICE_ALLOCATED: json.dumps(allocated)},
    )


def measure(iterations: int, warmup: int) -> Latencies:
    plugins = [GPUEnvPlugin(), RDMADevicesPlugin()]
    with (
        tempfile.TemporaryDirectory(prefix="tessera-bench-", dir="/tmp") as workdir,
        HookServer(plugins, socket_path=Path(workdir) / "agent.sock") as server,
        grpc.insecure_channel(server.address) as channel,
    ):
        stub = api_pb2_grpc.RuntimeHookServiceStub(channel)  # type: ignore[no-untyped-call]
        call = stub.PreCreateContainerHook
        message = request()
        for _ in range(warmup):
            call(message, timeout=5)
        timer = Timer()
        for _ in range(iterations):
            with timer.time():
                call(message, timeout=5)
    return timer.summary()


def run(args: argparse.Namespace, report: Report) -> int:
    report.setting(iterations=args.iterations, warmup=args.warmup)
    report.latencies(measure(args.iterations, args.warmup), label="PreCreateContainerHook")
    return 0
