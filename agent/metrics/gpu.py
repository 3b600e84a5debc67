"""GPU metrics for Prometheus: per GPU, per container on shared GPUs, and the agent's own cost.

`GPUMetrics.refresh` reads NVML for every GPU through cached handles and keeps the readings as an
immutable snapshot; `collect` (called by prometheus_client at scrape time) renders that snapshot,
the tracker's health and the XID counts. A container's series disappear with it, without stale
label sets. `start` runs `refresh` every `interval_s` on a background thread.

A container's series name its pod and container when the agent knows the pod (`pods`, a lookup
by UID that the agent backs with its informer of the node's pods); until then, or without a
lookup, `namespace`, `pod` and `container` are empty and `pod_uid`/`container_id` identify it.

    tessera_gpu_utilization_ratio            {node, minor, uuid, model}           0..1
    tessera_gpu_memory_used_bytes            {node, minor, uuid, model}
    tessera_gpu_memory_total_bytes           {node, minor, uuid, model}
    tessera_gpu_temperature_celsius          {node, minor, uuid, model}
    tessera_gpu_power_watts                  {node, minor, uuid, model}
    tessera_gpu_healthy                      {node, minor, uuid, model}           1 or 0
    tessera_gpu_xid_errors_total             {node, minor, uuid, model, xid}
    tessera_container_gpu_memory_used_bytes  {node, minor, uuid, model, pod_uid, container_id,
                                              namespace, pod, container}
    tessera_container_gpu_utilization_ratio  {... as above}
    tessera_agent_collection_duration_seconds  histogram {collector}
    tessera_agent_collection_errors_total      {collector}
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from agent.discovery.model import GPU
from agent.discovery.nvmllib import NVML, Handle, HandleCache, NVMLCallError, if_supported
from agent.health.tracker import HealthTracker
from agent.metrics.containers import ContainerResolver
from agent.periodic import Periodic
from apis.k8s.core import Pod

__all__ = ["ContainerReading", "GPUMetrics", "GPUReading", "PodByUID"]

log = logging.getLogger(__name__)

_GPU_LABELS = ("node", "minor", "uuid", "model")
_CONTAINER_LABELS = (*_GPU_LABELS, "pod_uid", "container_id", "namespace", "pod", "container")
_COLLECTOR = "gpu"

#: One pod of this node by metadata.uid, from memory (called at scrape time); None when unknown.
PodByUID = Callable[[str], Pod | None]


@dataclass(frozen=True, slots=True)
class GPUReading:
    """One GPU's readings; None where the GPU cannot tell (NVML: not supported)."""

    gpu: GPU
    utilization_percent: int | None
    memory_used_bytes: int
    memory_total_bytes: int
    temperature_celsius: int | None
    power_watts: float | None


@dataclass(frozen=True, slots=True)
class ContainerReading:
    gpu: GPU
    pod_uid: str
    container_id: str
    memory_used_bytes: int
    utilization_percent: int


class GPUMetrics(Collector):
    """Registers itself (and its self-metrics) on `registry` — never the global one."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        node_name: str,
        nvml: NVML,
        gpus: Sequence[GPU],
        tracker: HealthTracker,
        containers: ContainerResolver,
        interval_s: float = 10.0,
        pods: PodByUID | None = None,
    ) -> None:
        self.node_name = node_name
        self._nvml = nvml
        self._handles = HandleCache(nvml)
        self._gpus = tuple(gpus)
        self._tracker = tracker
        self._containers = containers
        self._pods = pods
        self.interval_s = interval_s
        self._readings: tuple[GPUReading, ...] = ()
        self._container_readings: tuple[ContainerReading, ...] = ()
        self._xids: dict[tuple[str, int], int] = {}
        self._xid_lock = threading.Lock()
        self._duration = Histogram(
            "tessera_agent_collection_duration_seconds",
            "Time one metrics collection pass took.",
            ["collector"],
            registry=registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
        )
        self._errors = Counter(
            "tessera_agent_collection_errors",
            "Device readings that failed during metrics collection.",
            ["collector"],
            registry=registry,
        )
        self._errors.labels(_COLLECTOR)  # exported as 0 from the start
        self._loop = Periodic("metrics", self.refresh, interval_s)
        registry.register(self)

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop()

    def set_gpus(self, gpus: Sequence[GPU]) -> None:
        """Read these GPUs from the next pass on (a discovery pass found new ones). Thread-safe."""
        self._gpus = tuple(gpus)

    def count_xid(self, gpu: GPU, xid: int) -> None:
        """Count one XID event (subscribed to the NVML watcher's `on_xid`). Thread-safe."""
        with self._xid_lock:
            self._xids[(gpu.uuid, xid)] = self._xids.get((gpu.uuid, xid), 0) + 1

    def refresh(self) -> None:
        """Read every GPU once. A GPU that fails is left out of this snapshot and counted."""
        started = time.perf_counter()
        readings: list[GPUReading] = []
        containers: list[ContainerReading] = []
        since_us = int((time.time() - self.interval_s) * 1_000_000)
        for gpu in self._gpus:
            try:
                readings.append(self._read(gpu))
                containers.extend(self._per_container(gpu, self._handles.get(gpu.uuid), since_us))
            except NVMLCallError as e:
                self._errors.labels(_COLLECTOR).inc()
                if e.gpu_lost:
                    self._handles.forget(gpu.uuid)
                log.debug("GPU reading failed", extra={"gpu": gpu.uuid, "error": str(e)})
        self._readings = tuple(readings)
        self._container_readings = tuple(containers)
        self._duration.labels(_COLLECTOR).observe(time.perf_counter() - started)

    def _read(self, gpu: GPU) -> GPUReading:
        handle = self._handles.get(gpu.uuid)
        total, used = self._nvml.memory(handle)
        return GPUReading(
            gpu=gpu,
            utilization_percent=if_supported(lambda: self._nvml.utilization_percent(handle)),
            memory_used_bytes=used,
            memory_total_bytes=total,
            temperature_celsius=if_supported(lambda: self._nvml.temperature_celsius(handle)),
            power_watts=if_supported(lambda: self._nvml.power_watts(handle)),
        )

    def _per_container(self, gpu: GPU, handle: Handle, since_us: int) -> list[ContainerReading]:
        processes = if_supported(lambda: self._nvml.processes(handle))
        if not processes:
            return []
        utilization = self._nvml.process_utilization(handle, since_us)
        totals: dict[tuple[str, str], tuple[int, int]] = {}
        for p in processes:
            ref = self._containers.container_of(p.pid)
            if ref is None:
                continue
            key = (ref.pod_uid, ref.container_id)
            memory, util = totals.get(key, (0, 0))
            totals[key] = (memory + (p.used_memory_bytes or 0), util + utilization.get(p.pid, 0))
        return [
            ContainerReading(gpu, pod_uid, container_id, memory, min(util, 100))
            for (pod_uid, container_id), (memory, util) in sorted(totals.items())
        ]

    def collect(self) -> Iterator[Metric]:
        node = self.node_name
        families = {
            "utilization": GaugeMetricFamily(
                "tessera_gpu_utilization_ratio", "GPU compute utilisation (0-1).", labels=_GPU_LABELS
            ),
            "used": GaugeMetricFamily("tessera_gpu_memory_used_bytes", "GPU memory in use.", labels=_GPU_LABELS),
            "total": GaugeMetricFamily("tessera_gpu_memory_total_bytes", "GPU memory in all.", labels=_GPU_LABELS),
            "temperature": GaugeMetricFamily(
                "tessera_gpu_temperature_celsius", "GPU core temperature.", labels=_GPU_LABELS
            ),
            "power": GaugeMetricFamily("tessera_gpu_power_watts", "GPU power draw.", labels=_GPU_LABELS),
        }
        for r in self._readings:
            labels = _gpu_labels(node, r.gpu)
            families["used"].add_metric(labels, r.memory_used_bytes)
            families["total"].add_metric(labels, r.memory_total_bytes)
            if r.utilization_percent is not None:
                families["utilization"].add_metric(labels, r.utilization_percent / 100)
            if r.temperature_celsius is not None:
                families["temperature"].add_metric(labels, r.temperature_celsius)
            if r.power_watts is not None:
                families["power"].add_metric(labels, r.power_watts)
        yield from families.values()

        healthy = GaugeMetricFamily("tessera_gpu_healthy", "1 while the GPU is healthy, else 0.", labels=_GPU_LABELS)
        for gpu in self._gpus:
            healthy.add_metric(_gpu_labels(node, gpu), 1.0 if self._tracker.health(gpu.uuid).healthy else 0.0)
        yield healthy

        xids = CounterMetricFamily(
            "tessera_gpu_xid_errors", "XID errors NVML reported, critical or not.", labels=(*_GPU_LABELS, "xid")
        )
        by_uuid = {g.uuid: g for g in self._gpus}
        with self._xid_lock:
            counts = sorted(self._xids.items())
        for (uuid, xid), count in counts:
            xids.add_metric([*_gpu_labels(node, by_uuid[uuid]), str(xid)], count)
        yield xids

        memory = GaugeMetricFamily(
            "tessera_container_gpu_memory_used_bytes",
            "GPU memory a container's processes use.",
            labels=_CONTAINER_LABELS,
        )
        utilization = GaugeMetricFamily(
            "tessera_container_gpu_utilization_ratio",
            "GPU compute utilisation of a container's processes (0-1).",
            labels=_CONTAINER_LABELS,
        )
        for c in self._container_readings:
            labels = [*_gpu_labels(node, c.gpu), c.pod_uid, c.container_id, *self._pod_labels(c)]
            memory.add_metric(labels, c.memory_used_bytes)
            utilization.add_metric(labels, c.utilization_percent / 100)
        yield memory
        yield utilization

    def _pod_labels(self, reading: ContainerReading) -> tuple[str, str, str]:
        """namespace, pod and container name of a reading; empty where the pod is not known."""
        pod = self._pods(reading.pod_uid) if self._pods is not None and reading.pod_uid else None
        if pod is None:
            return "", "", ""
        suffix = f"://{reading.container_id}"
        container = next((name for name, cid in pod.container_ids.items() if cid.endswith(suffix)), "")
        return pod.namespace, pod.name, container


def _gpu_labels(node: str, gpu: GPU) -> list[str]:
    return [node, str(gpu.minor), gpu.uuid, gpu.model]
