"""The whole `tessera agent` process on simulated GPUs: CPU, RSS, and health-change-to-CR latency.

Starts an embedded API server and one agent process (`--simulate-devices PROFILE
--simulate-kubelet`, every interval at its default), lets it run `--seconds` while /metrics is
scraped every 15 s as Prometheus would, and samples the agent's CPU time and resident memory.
Then it injects a critical XID into each GPU in turn (the fault-injection endpoint) and times,
from the POST to a watch event showing the GPU unhealthy in the Device CR, how long the change
takes to reach the API server.
"""

from __future__ import annotations

import argparse
import functools
import operator
import threading
import time
import urllib.request

import psutil

from apis.crds.device import Device, DeviceType
from apis.extension import names
from cli.bench._report import Latencies, Report
from cli.launchers.agent import AgentProcess
from cli.launchers.apiserver import run_apiserver
from kube import errors
from kube.client import Client


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default="a100-8x", help="simulated profile (default a100-8x: 8 GPUs)")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to measure (default 60)")
    parser.add_argument("--scrape-interval", type=float, default=15.0, help="seconds between GETs of /metrics")
    parser.add_argument("--xid", type=int, default=79, help="the XID injected for the latency runs")


def run(args: argparse.Namespace, report: Report) -> int:
    report.setting(profile=args.profile, scrape_interval=args.scrape_interval, xid=args.xid)
    node = "bench-node"
    with run_apiserver() as server:
        server.install_crds()
        flags = ["--simulate-devices", args.profile, "--simulate-kubelet"]
        with AgentProcess(server.kubeconfig, node_name=node, args=flags) as agent, server.client() as client:
            wait_for_cr = time.monotonic() + 60
            while not _has_cr(client, node):
                if time.monotonic() > wait_for_cr:
                    raise RuntimeError(f"the agent wrote no Device CR within 60 s:\n{agent.log_tail()}")
                time.sleep(0.1)
            if agent.pid is None:
                raise RuntimeError(f"the agent is not running:\n{agent.log_tail()}")
            _measure(report, agent.pid, agent.url, args.seconds, args.scrape_interval)
            report.latencies(
                Latencies.of(_health_latencies(client, agent, node, args.xid)),
                "xid_to_cr_ms",
                label="XID injected → GPU unhealthy in the Device CR",
            )
    return 0


def _has_cr(client: Client, node: str) -> bool:
    try:
        client.resource(names.DEVICES).get(node)
    except errors.NotFound:
        return False
    return True


def _measure(report: Report, pid: int, url: str, seconds: float, scrape_interval: float) -> None:
    """Sample the agent's CPU time and RSS for `seconds`, scraping /metrics every `scrape_interval`."""
    process = psutil.Process(pid)
    rss_start = process.memory_info().rss
    before = process.cpu_times()
    started = time.monotonic()
    next_scrape = started
    peak = rss_start
    while (now := time.monotonic()) - started < seconds:
        if now >= next_scrape:
            with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
                response.read()
            next_scrape += scrape_interval
        peak = max(peak, process.memory_info().rss)
        time.sleep(1.0)
    elapsed = time.monotonic() - started
    after = process.cpu_times()
    cpu_s = (after.user - before.user) + (after.system - before.system)
    report.value("seconds", elapsed, "s", label="measured for", threads=process.num_threads())
    report.value("cpu_seconds", cpu_s, "CPU-s", label="CPU used")
    report.value("cpu_percent_of_one_core", 100 * cpu_s / elapsed, "% of a core", label="CPU")
    report.value(
        "rss_mib_peak",
        peak / 2**20,
        "MiB",
        label="resident memory, peak",
        rss_mib_at_start=rss_start / 2**20,
        rss_mib_end=process.memory_info().rss / 2**20,
    )


def _health_latencies(client: Client, agent: AgentProcess, node: str, xid: int) -> list[float]:
    """For each GPU: POST an XID, seconds until a watch event shows it unhealthy in the Device CR."""
    devices = client.resource(names.DEVICES)
    current = devices.get(node)
    stream = devices.watch(
        resource_version=current["metadata"]["resourceVersion"], field_selector=f"metadata.name={node}"
    )
    unhealthy: dict[int, float] = {}
    seen = threading.Condition()

    def watch() -> None:
        for event in stream:
            if event.type != "MODIFIED":
                continue
            cr = Device.from_dict(event.object)
            with seen:
                for gpu in cr.of_type(DeviceType.GPU):
                    if not gpu.health:
                        unhealthy.setdefault(gpu.minor, time.monotonic())
                seen.notify_all()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    latencies = []
    for gpu in Device.from_dict(current).of_type(DeviceType.GPU):
        sent = time.monotonic()
        agent.inject("xid", minor=gpu.minor, xid=xid)
        with seen:
            if not seen.wait_for(functools.partial(operator.contains, unhealthy, gpu.minor), timeout=30):
                raise RuntimeError(f"GPU {gpu.minor} not reported unhealthy within 30 s")
            latencies.append(unhealthy[gpu.minor] - sent)
    stream.close()
    return latencies
