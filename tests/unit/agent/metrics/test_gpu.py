"""GPU metrics from NVML readings, per GPU and per container, rendered by a private registry."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from agent.discovery.fake_nvml import FakeProcess
from agent.discovery.model import GPU
from agent.discovery.nvml import NVMLSource
from agent.discovery.nvmllib import NVML
from agent.discovery.pci import PCIBus
from agent.health.clock import ManualClock
from agent.health.tracker import HealthTracker
from agent.metrics.containers import ContainerResolver
from agent.metrics.gpu import GPUMetrics
from apis.k8s.core import Pod
from tests.support.nvml import NVMLEnv

CID = "a" * 64
POD = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    for pid, cgroup in ((100, f"0::/kubepods/pod{POD}/{CID}"), (101, f"0::/kubepods/pod{POD}/{CID}"), (7, "0::/")):
        (tmp_path / "proc" / str(pid)).mkdir(parents=True)
        (tmp_path / "proc" / str(pid) / "cgroup").write_text(cgroup + "\n")
    return tmp_path / "proc"


@pytest.fixture
def gpus(nvml_env: NVMLEnv, nvml: NVML) -> tuple[GPU, ...]:
    return NVMLSource(nvml, PCIBus(nvml_env.sysfs_root)).discover().gpus


@pytest.fixture
def tracker() -> HealthTracker:
    return HealthTracker(ManualClock())


@pytest.fixture
def metrics(
    nvml: NVML, gpus: tuple[GPU, ...], tracker: HealthTracker, proc: Path
) -> tuple[GPUMetrics, CollectorRegistry]:
    registry = CollectorRegistry()
    m = GPUMetrics(registry, node_name="n1", nvml=nvml, gpus=gpus, tracker=tracker, containers=ContainerResolver(proc))
    return m, registry


def labels(gpu: GPU, **extra: str) -> dict[str, str]:
    return {"node": "n1", "minor": str(gpu.minor), "uuid": gpu.uuid, "model": gpu.model, **extra}


def test_every_gpu_is_read(metrics: tuple[GPUMetrics, CollectorRegistry], gpus: tuple[GPU, ...]) -> None:
    collector, registry = metrics
    collector.refresh()
    for gpu in gpus:
        total = registry.get_sample_value("tessera_gpu_memory_total_bytes", labels(gpu))
        assert total == gpu.memory_bytes
        for name in ("utilization_ratio", "memory_used_bytes", "temperature_celsius", "power_watts"):
            assert registry.get_sample_value(f"tessera_gpu_{name}", labels(gpu)) is not None, name
        assert registry.get_sample_value("tessera_gpu_healthy", labels(gpu)) == 1.0
    assert registry.get_sample_value("tessera_agent_collection_duration_seconds_count", {"collector": "gpu"}) == 1


def test_readings_have_prometheus_units(
    nvml_env: NVMLEnv, metrics: tuple[GPUMetrics, CollectorRegistry], gpus: tuple[GPU, ...]
) -> None:
    fake = nvml_env.require_fake()
    gpu = fake.gpus[0]
    gpu.utilization, gpu.memory_used, gpu.temperature, gpu.power_mw = 75, 3 * 2**30, 61, 312_500
    collector, registry = metrics
    collector.refresh()
    assert registry.get_sample_value("tessera_gpu_utilization_ratio", labels(gpus[0])) == 0.75
    assert registry.get_sample_value("tessera_gpu_memory_used_bytes", labels(gpus[0])) == 3 * 2**30
    assert registry.get_sample_value("tessera_gpu_temperature_celsius", labels(gpus[0])) == 61
    assert registry.get_sample_value("tessera_gpu_power_watts", labels(gpus[0])) == 312.5


def test_processes_of_one_container_add_up_and_host_processes_are_left_out(
    nvml_env: NVMLEnv, metrics: tuple[GPUMetrics, CollectorRegistry], gpus: tuple[GPU, ...]
) -> None:
    fake = nvml_env.require_fake()
    fake.set_processes(
        gpus[2].uuid,
        [FakeProcess(100, 2 * 2**30, 30), FakeProcess(101, 2**30, 15), FakeProcess(7, 2**30, 50)],
    )
    collector, registry = metrics
    collector.refresh()
    container = labels(gpus[2], pod_uid=POD, container_id=CID, namespace="", pod="", container="")
    assert registry.get_sample_value("tessera_container_gpu_memory_used_bytes", container) == 3 * 2**30
    assert registry.get_sample_value("tessera_container_gpu_utilization_ratio", container) == 0.45
    text = generate_latest(registry).decode()
    assert text.count("tessera_container_gpu_memory_used_bytes{") == 1
    fake.set_processes(gpus[2].uuid, [])
    collector.refresh()
    assert "tessera_container_gpu_memory_used_bytes{" not in generate_latest(registry).decode()


def test_container_series_name_the_pod_and_container_the_agent_knows(
    nvml_env: NVMLEnv, nvml: NVML, gpus: tuple[GPU, ...], tracker: HealthTracker, proc: Path
) -> None:
    fake = nvml_env.require_fake()
    fake.set_processes(gpus[0].uuid, [FakeProcess(100, 2**30, 10)])
    pod = Pod.from_dict(
        {
            "metadata": {"name": "train-0", "namespace": "ml", "uid": POD},
            "status": {"containerStatuses": [{"name": "main", "containerID": f"containerd://{CID}"}]},
        }
    )
    registry = CollectorRegistry()
    collector = GPUMetrics(
        registry,
        node_name="n1",
        nvml=nvml,
        gpus=gpus,
        tracker=tracker,
        containers=ContainerResolver(proc),
        pods={POD: pod}.get,
    )
    collector.refresh()
    container = labels(gpus[0], pod_uid=POD, container_id=CID, namespace="ml", pod="train-0", container="main")
    assert registry.get_sample_value("tessera_container_gpu_memory_used_bytes", container) == 2**30


def test_gpus_found_later_are_read_from_the_next_pass(
    metrics: tuple[GPUMetrics, CollectorRegistry], gpus: tuple[GPU, ...]
) -> None:
    collector, registry = metrics
    collector.set_gpus(gpus[:2])
    collector.refresh()
    assert generate_latest(registry).decode().count("tessera_gpu_memory_total_bytes{") == len(gpus[:2])
    collector.set_gpus(gpus)
    collector.refresh()
    assert generate_latest(registry).decode().count("tessera_gpu_memory_total_bytes{") == len(gpus)


def test_a_lost_gpu_is_left_out_counted_and_shown_unhealthy(
    nvml_env: NVMLEnv,
    metrics: tuple[GPUMetrics, CollectorRegistry],
    gpus: tuple[GPU, ...],
    tracker: HealthTracker,
) -> None:
    fake = nvml_env.require_fake()
    fake.vanish(gpus[4].uuid)
    tracker.problem(gpus[4].uuid, "test", reason="GPULost", message="gone")
    collector, registry = metrics
    collector.refresh()
    assert registry.get_sample_value("tessera_gpu_memory_total_bytes", labels(gpus[4])) is None
    assert registry.get_sample_value("tessera_gpu_memory_total_bytes", labels(gpus[5])) is not None
    assert registry.get_sample_value("tessera_agent_collection_errors_total", {"collector": "gpu"}) == 1
    assert registry.get_sample_value("tessera_gpu_healthy", labels(gpus[4])) == 0.0
    fake.reset(gpus[4].uuid)
    collector.refresh()  # the handle is looked up again
    assert registry.get_sample_value("tessera_gpu_memory_total_bytes", labels(gpus[4])) is not None


def test_xids_are_counted_per_gpu_and_xid(metrics: tuple[GPUMetrics, CollectorRegistry], gpus: tuple[GPU, ...]) -> None:
    collector, registry = metrics
    gpu = gpus[-1]  # the last GPU: not the first on the fake's 8, and there on a one-GPU machine
    collector.count_xid(gpu, 13)
    collector.count_xid(gpu, 13)
    collector.count_xid(gpu, 79)
    assert registry.get_sample_value("tessera_gpu_xid_errors_total", labels(gpu, xid="13")) == 2
    assert registry.get_sample_value("tessera_gpu_xid_errors_total", labels(gpu, xid="79")) == 1


def test_the_loop_collects_on_its_own(metrics: tuple[GPUMetrics, CollectorRegistry]) -> None:
    collector, registry = metrics
    collector.start()
    collector.stop()
    assert registry.get_sample_value("tessera_agent_collection_duration_seconds_count", {"collector": "gpu"}) == 1


def test_a_reading_the_gpu_cannot_give_is_left_out_alone(
    nvml_env: NVMLEnv, metrics: tuple[GPUMetrics, CollectorRegistry], gpus: tuple[GPU, ...]
) -> None:
    fake = nvml_env.require_fake()
    fake.gpus[0].mig_enabled = True  # NVML: utilisation NOT_SUPPORTED in MIG mode
    collector, registry = metrics
    collector.refresh()
    assert registry.get_sample_value("tessera_gpu_utilization_ratio", labels(gpus[0])) is None
    assert registry.get_sample_value("tessera_gpu_memory_total_bytes", labels(gpus[0])) == gpus[0].memory_bytes
    assert registry.get_sample_value("tessera_agent_collection_errors_total", {"collector": "gpu"}) == 0
