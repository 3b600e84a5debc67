"""End-to-end fixtures: `tessera up` in the background on a short data directory of its own, and
the workloads tests submit (pods as a user writes them, through the official client)."""

from __future__ import annotations

import contextlib
import shutil
import socket
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from apis.extension import names
from cli.launchers.scheduler import pod_manifest
from tests.e2e.harness import Cluster, Up
from tests.support import sockets

#: Mixed requests (created in this order): whole GPUs first, then shares, then CPU only.
#: 7 whole GPUs + at most 14 GPUs touched by shares fit 24 GPUs however the shares spread.
MIXED: tuple[tuple[str, Mapping[str, str], Mapping[str, str]], ...] = (
    *((f"whole-{i}", {names.NVIDIA_GPU: "1"}, {}) for i in range(3)),
    ("whole-pair", {names.NVIDIA_GPU: "2"}, {}),
    *(
        (
            f"mpi-{i}",
            {names.NVIDIA_GPU: "1", names.RDMA: "1"},
            {names.ANNOTATION_DEVICE_JOINT_ALLOCATE: '{"deviceTypes":["gpu","rdma"],"requiredScope":"SamePCIe"}'},
        )
        for i in range(2)
    ),
    *((f"half-{i}", {names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50"}, {}) for i in range(6)),
    *((f"quarter-{i}", {names.GPU_CORE: "25", names.GPU_MEMORY: "20Gi"}, {}) for i in range(4)),
    *((f"memory-{i}", {names.GPU_MEMORY: "8Gi"}, {}) for i in range(2)),
    ("spread", {names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50", names.GPU_SHARED: "2"}, {}),
    *((f"cpu-{i}", {names.CPU: "100m", names.MEMORY: "64Mi"}, {}) for i in range(10)),
    ("too-big", {names.NVIDIA_GPU: "16"}, {}),
)
UNSCHEDULABLE = "too-big"


def manifests(
    workload: tuple[tuple[str, Mapping[str, str], Mapping[str, str]], ...] = MIXED,
    *,
    node_selector: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    out = []
    for name, requests, extra_annotations in workload:
        manifest = pod_manifest(name, requests, annotations=extra_annotations, labels={"test": "e2e"})
        del manifest["metadata"]["namespace"]  # the API call says where
        if node_selector:
            manifest["spec"]["nodeSelector"] = dict(node_selector)
        out.append(manifest)
    return out


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def free_port() -> int:
    """A loopback port nothing listens on now (for `--port`; taken again by chance only rarely)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    """A short directory (unix socket paths must stay under 108 bytes) with the data directory."""
    directory = sockets.short_tempdir("tessera-e2e-")
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def module_up(workdir: Path, *flags: str) -> Iterator[Up]:
    """`tessera up` with 3 simulated 8-GPU nodes (and this machine) and `flags`; at the end, no
    component may have been refused a call (403) and Ctrl-C must stop everything cleanly."""
    with Up.started(workdir / "data", "--nodes", "3", "--profile", "a100-8x", *flags) as running:
        yield running
        assert running.forbidden_calls() == [], "a component called what its role in deploy/ lacks"
        code = running.interrupt()
        assert code == 0, running.output()


@pytest.fixture(scope="module")
def up(workdir: Path) -> Iterator[Up]:
    """`tessera up` with 3 simulated 8-GPU nodes (and this machine), for the module's tests."""
    with module_up(workdir) as running:
        yield running


@pytest.fixture
def start_up() -> Iterator[Callable[..., Up]]:
    """Start `tessera up`s (`start_up(data_dir, "--demo")`); whatever a test leaves running of
    them is stopped at its end."""
    started: list[Up] = []

    def start(data_dir: Path, *args: str) -> Up:
        up = Up(data_dir, args)
        started.append(up)
        up.start()
        return up

    yield start
    for up in started:
        up.cleanup()


@pytest.fixture(scope="module")
def cluster(up: Up) -> Iterator[Cluster]:
    with up.cluster() as view:
        yield view
