"""End-to-end scheduling throughput: pods/s and create→bound latency through real processes.

`tessera bench scheduler-e2e --nodes 500 --pods 5000`: an embedded API server (its own process,
SQLite on disk) and `tessera scheduler` (another process) run on this machine; this process
creates N nodes with their Device CRs (8 GPUs each by default), then M pods of mixed GPU shapes
from several threads, and watches them: a pod's latency is from just before its create request
to the moment the watch shows it bound. Throughput is bound pods over the time from the first
create to the last binding. Afterwards every annotation is checked against the Device CRs
(`check_allocations`, which the scheduler's acceptance tests and the e2e checks use too): no GPU
may be over-committed, or the run exits 1.

All three processes share the machine, so on a 2-CPU machine the numbers are a lower bound of
what the scheduler does with a dedicated API server.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from apis.errors import ConfigError
from apis.extension import allocation, names
from apis.k8s.core import Pod
from cli.bench._report import Latencies, Report
from cli.launchers.apiserver import run_apiserver
from cli.launchers.scheduler import SchedulerProcess, node_manifest, pod_manifest
from kube import Client, crds, errors, resources
from scheduler.simulation.cluster import NodeShape, gpu_node

__all__ = ["SHAPES", "E2EResult", "E2ESettings", "add_arguments", "check_allocations", "run", "run_e2e"]

#: (weight, requests): GPU shares, whole GPUs and CPU-only pods; about 0.6 GPUs per pod on average.
SHAPES: tuple[tuple[int, dict[str, str]], ...] = (
    (35, {names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50"}),
    (20, {names.GPU_CORE: "25", names.GPU_MEMORY_RATIO: "25"}),
    (20, {names.NVIDIA_GPU: "1"}),
    (5, {names.NVIDIA_GPU: "2"}),
    (2, {names.NVIDIA_GPU: "4"}),
    (18, {}),
)
_NAMESPACE = "bench"


@dataclass(frozen=True, slots=True)
class E2EResult:
    bound: int
    #: From the first create request to the last pod seen bound.
    seconds: float
    #: From each bound pod's create request to the watch showing it bound.
    create_to_bound: Latencies
    #: How long creating the pods took (the offered load).
    create_seconds: float
    #: GPUs whose gpu-core or memory ratio holders add up to more than the device has.
    over_committed: int
    setup_seconds: float


@dataclass(frozen=True, slots=True)
class E2ESettings:
    #: Nodes, each with a Device CR of `gpus_per_node` GPUs.
    nodes: int = 500
    gpus_per_node: int = 8
    #: Pods to create, of mixed shapes (`SHAPES`, drawn with `seed`), from `creators` threads.
    pods: int = 5000
    creators: int = 4
    #: Pods per second to create at (0: as fast as the creators can).
    rate: float = 0.0
    seed: int = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=500, help="nodes, each with a Device CR (default 500)")
    parser.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per node (default 8)")
    parser.add_argument("--pods", type=int, default=5000, help="pods to create (default 5000)")
    parser.add_argument("--creators", type=int, default=4, help="threads creating pods (default 4)")
    parser.add_argument(
        "--rate", type=float, default=0.0, metavar="PODS_PER_S", help="pace the creates (default: as fast as possible)"
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the pod shapes")
    parser.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS", help="give up after this long")


def run(args: argparse.Namespace, report: Report) -> int:
    if args.nodes < 1 or args.pods < 1 or args.creators < 1:
        raise ConfigError("need --nodes >= 1, --pods >= 1, --creators >= 1")
    settings = E2ESettings(
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        pods=args.pods,
        creators=args.creators,
        rate=args.rate,
        seed=args.seed,
    )
    report.setting(**asdict(settings))
    result = run_e2e(settings, timeout=args.timeout, progress=report.note)
    report.value("setup_seconds", result.setup_seconds, "s", label="API server, nodes and scheduler ready")
    report.value("create_seconds", result.create_seconds, "s", label="pods created")
    report.value("bound", result.bound, "pods", label="pods bound")
    report.value("seconds", result.seconds, "s", label="first create to last binding")
    report.rate("pods_per_second", result.bound, result.seconds, "pods", label="throughput, create to bound")
    report.latencies(result.create_to_bound, label="create to bound")
    report.value("over_committed", result.over_committed, "devices", label="over-committed devices (must be 0)")
    return 0 if result.over_committed == 0 else 1


def run_e2e(
    settings: E2ESettings,
    *,
    timeout: float = 600.0,
    idle: float = 15.0,
    work_dir: Path | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> E2EResult:
    """Creates pods as fast as `creators` threads can (or at `rate` pods/s when > 0), then waits
    until every pod is bound, or no pod was bound for `idle` seconds (some fit nowhere), or
    `timeout` passed; the result says how many were bound. RuntimeError when none was."""
    nodes, gpus_per_node, pods = settings.nodes, settings.gpus_per_node, settings.pods
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="tessera-bench-") as scratch,
        run_apiserver(watch_window=max(10_000, 4 * pods), verbosity=1) as server,
    ):
        server.install_crds()
        directory = work_dir or Path(scratch)
        with server.client() as client:
            client.resource(resources.NAMESPACES).create({"metadata": {"name": _NAMESPACE}})
            _create_nodes(client, nodes, gpus_per_node)
            progress(f"{nodes} nodes with {gpus_per_node} GPUs each created")
            with SchedulerProcess(server.kubeconfig, directory):
                setup = time.monotonic() - started
                progress(f"scheduler ready after {setup:.1f}s; creating {pods} pods")
                watch = _BoundWatch(client, pods)
                manifests = _manifests(pods, settings.seed)
                t0 = time.monotonic()
                _create(client, manifests, watch, settings.creators, settings.rate)
                create_seconds = time.monotonic() - t0
                progress(f"created in {create_seconds:.1f}s; waiting for bindings")
                if not watch.wait(timeout, idle=idle):
                    progress(f"{len(watch.bound)}/{pods} pods bound; no binding for {idle:.0f}s, stopping")
                watch.stop()
            listed = [Pod.from_dict(o) for o in client.resource(resources.PODS).list_all(namespace=_NAMESPACE).items]
            over = check_allocations(crds.devices(client).list(), listed)
    if not watch.bound:
        raise RuntimeError(f"no pod was bound within {timeout:.0f} s")
    return E2EResult(
        bound=len(watch.bound),
        seconds=max(watch.bound.values()) - min(watch.created.values()),
        create_to_bound=Latencies.of([watch.bound[n] - watch.created[n] for n in watch.bound]),
        create_seconds=create_seconds,
        over_committed=over,
        setup_seconds=setup,
    )


def check_allocations(devices: list[Any], pods: list[Pod]) -> int:
    """How many devices the bound pods' annotations over-commit (0 is the only right answer).

    Also counts a pod annotated with a device its node's Device CR does not have.
    """
    totals = {(d.node_name, info.type, info.minor): info.resources for d in devices for info in d.devices}
    used: dict[tuple[str, Any, int], dict[str, int]] = defaultdict(dict)
    bad = 0
    for pod in pods:
        if not pod.node_name:
            continue
        for dtype, allocs in allocation.from_pod_annotations(pod.annotations, obj=pod.key).items():
            for a in allocs:
                key = (pod.node_name, dtype, a.minor)
                if key not in totals:
                    bad += 1
                    continue
                for name, amount in a.resources.items():
                    used[key][name] = used[key].get(name, 0) + amount
    for key, amounts in used.items():
        if any(amount > totals[key].get(name, 0) for name, amount in amounts.items()):
            bad += 1
    return bad


def _create_nodes(client: Client, count: int, gpus: int) -> None:
    node_api = client.resource(resources.NODES)
    device_api = crds.devices(client)

    def create(i: int) -> None:
        node, device = gpu_node(f"node-{i:04d}", NodeShape(gpus=gpus))
        node_api.create(node_manifest(node))
        device_api.create(device)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, range(count)))


def _manifests(count: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    weights = [w for w, _ in SHAPES]
    shapes = rng.choices([s for _, s in SHAPES], weights=weights, k=count)
    base = {names.CPU: "1", names.MEMORY: "1Gi"}
    return [pod_manifest(f"pod-{i:05d}", {**base, **shape}, namespace=_NAMESPACE) for i, shape in enumerate(shapes)]


def _create(client: Client, manifests: list[dict[str, Any]], watch: _BoundWatch, creators: int, rate: float) -> None:
    pods = client.resource(resources.PODS)
    interval = creators / rate if rate > 0 else 0.0
    start = time.monotonic()

    def create(index: int) -> None:
        pause = threading.Event()
        for n, manifest in enumerate(manifests[index::creators]):
            if interval:
                pause.wait(max(0.0, start + (n + index / creators) * interval - time.monotonic()))
            watch.created[manifest["metadata"]["name"]] = time.monotonic()
            pods.create(manifest, namespace=_NAMESPACE)

    with ThreadPoolExecutor(creators) as pool:
        list(pool.map(create, range(creators)))


class _BoundWatch:
    """Watches the benchmark namespace and records when each pod is first seen bound."""

    def __init__(self, client: Client, expected: int) -> None:
        self.created: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self._expected = expected
        self._api = client.resource(resources.PODS)
        self._progress = threading.Condition()
        self._stopped = threading.Event()
        rv = self._api.list(namespace=_NAMESPACE, limit=1).resource_version
        self._thread = threading.Thread(target=self._run, args=(rv,), name="bench-watch", daemon=True)
        self._thread.start()

    def _events(self, rv: str) -> Iterator[tuple[str, dict[str, Any]]]:
        while not self._stopped.is_set():
            try:
                stream = self._api.watch(namespace=_NAMESPACE, resource_version=rv, timeout_seconds=600)
            except errors.APIError:
                self._stopped.wait(0.1)  # the server is going away (or restarting): try again
                continue
            try:
                for event in stream:
                    meta = event.object.get("metadata") or {}
                    rv = str(meta.get("resourceVersion") or rv)
                    yield event.type, event.object
            except errors.APIError:
                continue
            finally:
                stream.close()

    def _run(self, rv: str) -> None:
        for kind, obj in self._events(rv):
            if kind not in ("ADDED", "MODIFIED"):
                continue
            name = obj["metadata"]["name"]
            if (obj.get("spec") or {}).get("nodeName") and name not in self.bound:
                with self._progress:
                    self.bound[name] = time.monotonic()
                    self._progress.notify_all()
                if len(self.bound) >= self._expected:
                    return

    def wait(self, timeout: float, *, idle: float) -> bool:
        """True once every pod is bound; False after `timeout`, or `idle` seconds without a binding."""
        deadline = time.monotonic() + timeout
        with self._progress:
            while len(self.bound) < self._expected:
                seen = len(self.bound)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._progress.wait(min(idle, remaining))
                if len(self.bound) == seen:
                    return False
        return True

    def stop(self) -> None:
        self._stopped.set()
