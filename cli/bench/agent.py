"""The agent's background loops on simulated GPUs: CPU and RSS over a run at default intervals.

Runs what `tessera agent` runs besides its API writes — discovery and a Device CR build (every
`--discovery-interval`), the health loop (1 s), GPU metrics (10 s) and the /metrics exporter,
scraped as Prometheus would (15 s) — against a simulated profile's FakeNVML, then reports the
process's CPU use and resident memory, and how long each discovery pass and each scrape took
(each runs once at the start, then at its interval). Real NVML calls cost more CPU than the fake's.

Then, with the loops still running, it injects a critical XID (79) into each GPU in turn and
times how long the fault takes to reach the health tracker's subscribers (what turns a GPU
unhealthy in the Device CR): the XID event wait, not the health interval, decides it.
"""

from __future__ import annotations

import argparse
import threading
import time
import urllib.request

import psutil
from prometheus_client import CollectorRegistry

from agent.devices.cr import build_device
from agent.discovery import DiscoverySettings, open_discovery
from agent.discovery.fake_nvml import FakeNVML
from agent.health import HealthMonitor, HealthTracker, SystemClock
from agent.health.tracker import Health
from agent.metrics import ContainerResolver, GPUMetrics
from agent.periodic import Periodic
from apis.errors import ConfigError
from cli.bench._report import Latencies, Report, Timer
from kube import serving

NODE = "bench-node"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default="a100-8x", help="simulated profile (default a100-8x: 8 GPUs)")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to run the loops (default 60)")
    parser.add_argument("--metrics-interval", type=float, default=10.0, help="seconds between GPU readings")
    parser.add_argument("--health-interval", type=float, default=1.0, help="seconds between health probes")
    parser.add_argument("--discovery-interval", type=float, default=60.0, help="seconds between discovery passes")
    parser.add_argument("--scrape-interval", type=float, default=15.0, help="seconds between GETs of /metrics")


def run(args: argparse.Namespace, report: Report) -> int:
    report.setting(
        profile=args.profile,
        metrics_interval=args.metrics_interval,
        health_interval=args.health_interval,
        discovery_interval=args.discovery_interval,
        scrape_interval=args.scrape_interval,
    )
    process = psutil.Process()
    rss_after_imports = process.memory_info().rss
    stack = open_discovery(DiscoverySettings(node_name=NODE, simulate=args.profile))
    inventory = stack.discovery.run()
    tracker = HealthTracker(SystemClock())
    monitor = HealthMonitor.for_inventory(
        inventory, tracker, nvml=stack.nvml, bus=stack.bus, interval_s=args.health_interval
    )
    registry = CollectorRegistry()
    assert stack.nvml is not None  # a simulated profile brings its FakeNVML
    metrics = GPUMetrics(
        registry,
        node_name=NODE,
        nvml=stack.nvml,
        gpus=inventory.gpus,
        tracker=tracker,
        containers=ContainerResolver(),
        interval_s=args.metrics_interval,
    )
    if monitor.watcher is not None:
        monitor.watcher.on_xid(metrics.count_xid)
    exporter = serving.Server("agent HTTP", host="127.0.0.1", port=0, registry=registry)
    discovery_timer, scrape_timer = Timer(), Timer()

    def discover_and_build() -> None:
        with discovery_timer.time():
            build_device(stack.discovery.run(), tracker.snapshot(), node_name=NODE, node_uid="bench")

    def scrape() -> None:
        with (
            scrape_timer.time(),
            urllib.request.urlopen(f"http://127.0.0.1:{exporter.port}/metrics", timeout=5) as response,
        ):
            response.read()

    discovery_loop = Periodic("discovery", discover_and_build, args.discovery_interval)
    scraper = Periodic("scraper", scrape, args.scrape_interval)
    cpu_before = process.cpu_times()
    started = time.monotonic()
    for part in (monitor, metrics, exporter, discovery_loop, scraper):
        part.start()
    time.sleep(args.seconds)
    elapsed = time.monotonic() - started
    cpu_after = process.cpu_times()
    rss = process.memory_info().rss
    xid_to_subscribers = _xid_latencies(stack.fake, tracker, [g.uuid for g in inventory.gpus])
    for part in (scraper, discovery_loop, exporter, metrics, monitor):
        part.stop()
    stack.close()
    cpu_s = (cpu_after.user - cpu_before.user) + (cpu_after.system - cpu_before.system)
    duration = {"collector": "gpu"}
    refreshes = registry.get_sample_value("tessera_agent_collection_duration_seconds_count", duration) or 0
    refresh_s = registry.get_sample_value("tessera_agent_collection_duration_seconds_sum", duration) or 0
    report.value("gpus", len(inventory.gpus), "GPUs", label="simulated devices", rdma=len(inventory.rdma))
    report.value("seconds", elapsed, "s", label="loops ran")
    report.value("cpu_seconds", cpu_s, "CPU-s", label="CPU used")
    report.value("cpu_percent_of_one_core", 100 * cpu_s / elapsed, "% of a core", label="CPU")
    report.value(
        "rss_mib", rss / 2**20, "MiB", label="resident memory", rss_mib_after_imports=rss_after_imports / 2**20
    )
    report.value(
        "metrics_refreshes",
        int(refreshes),
        "passes",
        label="GPU metrics passes",
        metrics_refresh_ms_avg=1000 * refresh_s / refreshes if refreshes else None,
    )
    report.latencies(discovery_timer.summary(), "discovery", label="discovery pass and Device CR build")
    report.latencies(scrape_timer.summary(), "scrape", label="GET /metrics")
    report.latencies(Latencies.of(xid_to_subscribers), "xid_to_subscribers", label="XID 79 to health subscribers")
    return 0


def _xid_latencies(fake: FakeNVML | None, tracker: HealthTracker, gpus: list[str]) -> list[float]:
    """Seconds from injecting XID 79 into each GPU to the tracker telling its subscribers."""
    assert fake is not None  # a simulated profile brings its FakeNVML
    unhealthy: dict[str, float] = {}
    arrived = threading.Condition()

    def on_change(device: str, health: Health) -> None:
        if not health.healthy:
            with arrived:
                unhealthy.setdefault(device, time.perf_counter())
                arrived.notify_all()

    tracker.subscribe(on_change)

    def reached(uuid: str) -> float:
        with arrived:
            if not arrived.wait_for(lambda: uuid in unhealthy, timeout=60):
                raise ConfigError(f"XID 79 on GPU {uuid} did not reach the health subscribers within 60 s")
            return unhealthy[uuid]

    samples = []
    for uuid in gpus:
        injected = time.perf_counter()
        fake.inject_xid(uuid, 79)
        samples.append(reached(uuid) - injected)
    return samples
