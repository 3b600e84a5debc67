"""The controller manager: time for N nodes' Device CRs to reach their Nodes, and its idle cost.

Starts `tessera apiserver` and `tessera controller` as separate processes (as in production) and,
from this process, N Nodes and their Device CRs as the agent builds them (`--profile`). Phases:
1. cold start: the objects exist, the controller starts: time until every Node carries its
   device resources and labels (list, then one status and one label write per node);
2. a health change on every node (one GPU unhealthy, Device CRs updated by 8 writer threads):
   time from the first update until every Node shows it;
3. idle: the controller's CPU use and resident memory while nothing changes.
Convergence is observed through an informer on Nodes in this process, not by polling.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil

from agent.devices.cr import build_device
from agent.discovery.simulated import load_profile
from agent.health.tracker import Health
from apis.crds.device import Device
from apis.extension import names
from apis.k8s.core import Node
from cli.bench._report import Latencies, Report
from cli.launchers.apiserver import run_apiserver
from cli.launchers.controller import ControllerProcess
from kube import crds
from kube.client import Client
from kube.informer import Informer
from kube.resources import NODES

_KUBELET = {"cpu": "64", "memory": "512Gi", "pods": "110"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=500, help="nodes, each with a Device CR (default 500)")
    parser.add_argument("--profile", default="a100-8x", help="simulated device profile (default a100-8x)")
    parser.add_argument("--workers", type=int, default=4, help="--node-resources-workers of the controller")
    parser.add_argument("--idle-seconds", type=float, default=20.0, help="how long to measure the idle controller")
    parser.add_argument("--smoke", action="store_true", help="a tiny run that only checks the benchmark works")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results as a JSON list of rows")


class _Convergence:
    """Which Nodes satisfy the current goal, kept by an informer's handlers, and when each first
    did since `expect()`; wait() until all do."""

    def __init__(self, informer: Informer[Node], count: int) -> None:
        self._count = count
        self._goal: Callable[[Node], bool] = lambda node: False
        self._since = time.monotonic()
        self._done: set[str] = set()
        self._reached: dict[str, float] = {}
        self._lock = threading.Lock()
        self._all = threading.Event()
        self._informer = informer
        informer.add_handlers(on_add=self._check, on_update=lambda _old, new: self._check(new))

    def expect(self, goal: Callable[[Node], bool]) -> None:
        """From now on, track `goal`; Nodes that already satisfy it count as reached now."""
        with self._lock:
            self._goal = goal
            self._since = time.monotonic()
            self._done = {n.name for n in self._informer.store.list() if goal(n)}
            self._reached = dict.fromkeys(self._done, self._since)
            self._all.clear()
            if len(self._done) >= self._count:
                self._all.set()

    def _check(self, node: Node) -> None:
        with self._lock:
            if self._goal(node):
                self._done.add(node.name)
                self._reached.setdefault(node.name, time.monotonic())
            else:
                self._done.discard(node.name)
            if len(self._done) >= self._count:
                self._all.set()

    def wait(self, timeout: float) -> bool:
        return self._all.wait(timeout)

    def per_node(self, start: float) -> Latencies:
        """How long after `start` each Node first reached the goal."""
        with self._lock:
            return Latencies.of([max(0.0, reached - start) for reached in self._reached.values()])


def _device(node: str, profile: str, unhealthy_gpu: int | None = None) -> Device:
    inventory = load_profile(profile).inventory(node)
    health = {g.uuid: Health(False, "Xid79", "benchmark") for g in inventory.gpus if g.minor == unhealthy_gpu}
    return build_device(inventory, health, node_name=node)


def _node(name: str) -> dict[str, Any]:
    status = {"capacity": _KUBELET, "allocatable": _KUBELET, "conditions": [{"type": "Ready", "status": "True"}]}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": status}


def _populate(client: Client, nodes: list[str], profile: str) -> None:
    devices = crds.devices(client)
    node_api = client.resource(NODES)

    def create(name: str) -> None:
        node_api.create(_node(name))
        devices.create(_device(name, profile))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, nodes))


def _mark_one_gpu_unhealthy(client: Client, nodes: list[str], profile: str) -> None:
    devices = crds.devices(client)

    def update(name: str) -> None:
        wanted = _device(name, profile, unhealthy_gpu=0)
        devices.update_with_retry(name, lambda current: replace(current, devices=wanted.devices))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(update, nodes))


def run(args: argparse.Namespace, report: Report) -> int:
    count = 20 if args.smoke else args.nodes
    idle_seconds = 1.0 if args.smoke else args.idle_seconds
    nodes = [f"bench-{i:05d}" for i in range(count)]
    report.setting(nodes=count, profile=args.profile, workers=args.workers, idle_seconds=idle_seconds)
    with tempfile.TemporaryDirectory(prefix="tessera-bench-controller-") as tmp, run_apiserver(verbosity=1) as server:
        server.install_crds()
        with server.client() as client:
            _populate(client, nodes, args.profile)
            informer: Informer[Node] = Informer(client, NODES, parse=Node.from_dict)
            convergence = _Convergence(informer, count)
            informer.start()
            informer.wait_for_sync(60)
            controller = ControllerProcess(
                server.kubeconfig,
                directory=Path(tmp),
                args=("--node-resources-workers", str(args.workers)),
                verbosity=1,
            )
            try:
                _measure(
                    report, client, controller, convergence, nodes, profile=args.profile, idle_seconds=idle_seconds
                )
            finally:
                controller.terminate()
                informer.stop()
    if args.json:
        report.write_rows(args.json)
    return 0


def _carries(gpu_core: int) -> Callable[[Node], bool]:
    """The goal: a Node shows `gpu_core` allocatable and the GPU model label."""

    def goal(node: Node) -> bool:
        return node.allocatable.get(names.GPU_CORE) == gpu_core and names.LABEL_GPU_MODEL in node.labels

    return goal


def _measure(
    report: Report,
    client: Client,
    controller: ControllerProcess,
    convergence: _Convergence,
    nodes: list[str],
    *,
    profile: str,
    idle_seconds: float,
) -> None:
    """The three phases, with the objects in place and the controller not yet started."""
    full = 100 * len(load_profile(profile).gpus)
    convergence.expect(_carries(full))
    start = time.monotonic()
    controller.start()
    ready = time.monotonic() - start
    if not convergence.wait(600):
        raise SystemExit(f"not converged in 600 s:\n{controller.log_tail()}")
    cold = time.monotonic() - start
    report.value(
        "cold_start_seconds", cold, "s", label="cold start: all nodes converged", controller_ready_seconds=ready
    )
    report.rate("cold_start_nodes_per_second", len(nodes), cold, "nodes", label="cold start: nodes per second")
    report.latencies(convergence.per_node(start), "cold_start_node", label="cold start: each node converged after")

    convergence.expect(_carries(full - 100))
    start = time.monotonic()
    _mark_one_gpu_unhealthy(client, nodes, profile)
    written = time.monotonic() - start
    if not convergence.wait(600):
        raise SystemExit(f"the health change did not converge in 600 s:\n{controller.log_tail()}")
    change = time.monotonic() - start
    report.value(
        "health_change_seconds",
        change,
        "s",
        label="GPU unhealthy on every node: converged",
        device_updates_seconds=written,
    )
    report.rate(
        "health_change_nodes_per_second", len(nodes), change, "nodes", label="GPU unhealthy on every node: nodes/s"
    )
    report.latencies(convergence.per_node(start), "health_change_node", label="GPU unhealthy: each node updated after")
    reconciles = controller.metric("tessera_controller_reconcile_total")
    seconds = controller.metric("tessera_controller_reconcile_duration_seconds_sum")
    report.value(
        "reconcile_mean_ms",
        1e3 * seconds / max(reconciles, 1),
        "ms",
        label="reconcile: mean duration",
        reconciles=int(reconciles),
    )

    pid = controller.pid
    assert pid is not None
    proc = psutil.Process(pid)
    time.sleep(2.0)  # let the last events drain before measuring
    cpu_before = sum(proc.cpu_times()[:2])
    time.sleep(idle_seconds)
    cpu = (sum(proc.cpu_times()[:2]) - cpu_before) / idle_seconds
    report.value("idle_cpu_percent_of_one_core", 100 * cpu, "% of a core", label="idle: CPU")
    report.value("idle_rss_mib", proc.memory_info().rss / 2**20, "MiB", label="idle: resident memory")
