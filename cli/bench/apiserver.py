"""The embedded API server: creates/s, list latency, watch fan-out and the per-pod request mix.

Starts `tessera apiserver` as a separate process with a fresh SQLite data directory (as in
production) and drives it over HTTP, phase by phase:
1. creates: `--pods` pods, `--concurrency` requests in flight;
2. lists: all pods, a label-selected tenth and one page of 500, five times each;
3. fan-out: `--fanout-writes` merge patches while `--watchers` raw watch streams are open: write
   throughput, events delivered per second, and each write's delay until each watcher saw it;
4. pipeline: `--pipeline-pods` pods through create → annotate → bind → status, as the scheduler
   and the kubelet drive a pod, with informer-like watchers open;
5. the official `kubernetes` client creating pods from one thread: what one component thread
   can expect.
The load comes from aiohttp in this process, so the client is not the bottleneck the way the
synchronous `kubernetes` client would be.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import aiohttp

from apis.extension import names
from cli.bench._report import Latencies, Report, Timer
from cli.launchers.apiserver import EmbeddedAPIServer, run_apiserver
from kube.resources import PODS

_RV = re.compile(rb'"resourceVersion":"(\d+)"')


@dataclass(frozen=True, slots=True)
class BenchSettings:
    #: Pods created in the create phase (and listed in the list phase).
    pods: int = 10_000
    #: Concurrent requests in flight.
    concurrency: int = 32
    #: Watchers in the fan-out phase.
    watchers: int = 20
    #: Writes observed by the watchers in the fan-out phase.
    fanout_writes: int = 2_000
    #: Pods through create → annotate → bind → status in the pipeline phase.
    pipeline_pods: int = 2_000
    #: Informer-like watchers on pods during the pipeline phase.
    pipeline_watchers: int = 5
    #: Creates with the official client, one thread, sequential.
    client_creates: int = 500


_SMOKE = BenchSettings(
    pods=100, concurrency=4, watchers=2, fanout_writes=50, pipeline_pods=20, pipeline_watchers=1, client_creates=10
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = BenchSettings()
    parser.add_argument("--pods", type=int, default=defaults.pods, help="pods to create and then list")
    parser.add_argument("--concurrency", type=int, default=defaults.concurrency, help="requests in flight")
    parser.add_argument("--watchers", type=int, default=defaults.watchers, help="watchers in the fan-out phase")
    parser.add_argument("--fanout-writes", type=int, default=defaults.fanout_writes, help="writes the watchers observe")
    parser.add_argument(
        "--pipeline-pods", type=int, default=defaults.pipeline_pods, help="pods through the request mix"
    )
    parser.add_argument(
        "--client-creates", type=int, default=defaults.client_creates, help="creates via the official client"
    )
    parser.add_argument("--secure", action="store_true", help="HTTPS with a bearer token (as `tessera up` runs it)")
    parser.add_argument("--smoke", action="store_true", help="a tiny run that only checks the benchmark works")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results as a JSON list of rows")


def _settings(args: argparse.Namespace) -> BenchSettings:
    if args.smoke:
        return _SMOKE
    return BenchSettings(
        pods=args.pods,
        concurrency=args.concurrency,
        watchers=args.watchers,
        fanout_writes=args.fanout_writes,
        pipeline_pods=args.pipeline_pods,
        client_creates=args.client_creates,
    )


def run(args: argparse.Namespace, report: Report) -> int:
    settings = _settings(args)
    report.setting(secure=args.secure, **asdict(settings))
    with run_apiserver(secure=args.secure, verbosity=1) as server:
        run_benchmarks(server, settings, report)
    if args.json:
        report.write_rows(args.json)
    return 0


def _pod(name: str, i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench", "shard": str(i % 10)}},
        "spec": {
            "schedulerName": names.SCHEDULER_NAME,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/bench:1",
                    "resources": {"limits": {"cpu": "1", "memory": "1Gi", names.GPU_CORE: "50"}},
                }
            ],
        },
    }


class _Load:
    def __init__(self, server: EmbeddedAPIServer, concurrency: int) -> None:
        self.url = server.url
        self.headers = {"Authorization": f"Bearer {server.token}"} if server.token else {}
        self.ssl: ssl.SSLContext | bool = server.ssl_context() or False
        self.concurrency = concurrency

    def session(self, limit: int) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(limit=limit, ssl=self.ssl)
        return aiohttp.ClientSession(
            self.url, connector=connector, headers=self.headers, timeout=aiohttp.ClientTimeout(total=None)
        )

    async def request(
        self,
        session: aiohttp.ClientSession,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
    ) -> bytes:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": content_type} if data is not None else {}
        async with session.request(method, path, data=data, headers=headers) as response:
            payload = await response.read()
            if response.status >= 300:
                raise RuntimeError(f"{method} {path}: {response.status} {payload[:300]!r}")
            return payload

    async def each(self, count: int, work: Callable[[int], Awaitable[None]]) -> None:
        """Run work(0..count-1) with `concurrency` in flight."""
        counter = iter(range(count))

        async def worker() -> None:
            for i in counter:
                await work(i)

        await asyncio.gather(*(worker() for _ in range(self.concurrency)))


class _Watcher:
    """A raw watch stream that notes when each resourceVersion arrived."""

    def __init__(self, load: _Load, path: str) -> None:
        self._load = load
        self._path = path
        self.arrivals: dict[int, float] = {}
        self.ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self, session: aiohttp.ClientSession, rv: str) -> None:
        self._task = asyncio.create_task(self._run(session, rv))
        await self.ready.wait()

    async def _run(self, session: aiohttp.ClientSession, rv: str) -> None:
        url = f"{self._path}?watch=1&resourceVersion={rv}&timeoutSeconds=3600"
        async with session.get(url) as response:
            self.ready.set()
            buffer = b""
            async for chunk in response.content.iter_any():
                now = time.perf_counter()
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    match = _RV.search(line)
                    if match:
                        self.arrivals[int(match.group(1))] = now

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


async def _create_phase(load: _Load, settings: BenchSettings, report: Report) -> None:
    timer = Timer()
    async with load.session(load.concurrency) as session:
        path = "/api/v1/namespaces/bench/pods"

        async def create(i: int) -> None:
            with timer.time():
                await load.request(session, "POST", path, _pod(f"pod-{i:06d}", i))

        await load.each(settings.pods, create)
    report.rate(
        "creates_per_second", settings.pods, timer.elapsed_s, "pods", label="creates", creates_seconds=timer.elapsed_s
    )
    report.latencies(timer.summary(), "create_latency", label="creates: one request")


async def _list_phase(load: _Load, report: Report) -> None:
    async with load.session(1) as session:
        for key, name, query in (
            ("list_all", "list all", ""),
            ("list_selected", "list selected", "?labelSelector=shard%3D3"),
            ("list_page", "list page", "?limit=500"),
        ):
            timer = Timer()
            for _ in range(5):
                with timer.time():
                    body = await load.request(session, "GET", f"/api/v1/namespaces/bench/pods{query}")
            items = len(json.loads(body)["items"])
            report.latencies(
                timer.summary(),
                key,
                label=f"{name} ({items} pods)",
                **{f"{key}_items": items, f"{key}_bytes": len(body)},
            )


async def _fanout_phase(load: _Load, settings: BenchSettings, report: Report) -> None:
    namespace_path = "/api/v1/namespaces/bench/pods"
    async with load.session(settings.watchers + 1) as watch_session, load.session(load.concurrency) as session:
        start_rv = json.loads(await load.request(session, "GET", f"{namespace_path}?limit=1"))["metadata"][
            "resourceVersion"
        ]
        watchers = [_Watcher(load, namespace_path) for _ in range(settings.watchers)]
        for watcher in watchers:
            await watcher.start(watch_session, start_rv)
        sent: dict[int, float] = {}
        writes = Timer()

        async def patch(i: int) -> None:
            t = time.perf_counter()
            with writes.time():
                body = await load.request(
                    session,
                    "PATCH",
                    f"{namespace_path}/pod-{i % settings.pods:06d}",
                    {"metadata": {"annotations": {"bench/n": str(i)}}},
                    "application/merge-patch+json",
                )
            match = _RV.search(body)
            assert match is not None
            sent[int(match.group(1))] = t

        await load.each(settings.fanout_writes, patch)
        deadline = time.perf_counter() + 60
        while any(len([rv for rv in sent if rv in w.arrivals]) < len(sent) for w in watchers):
            if time.perf_counter() > deadline:
                break
            await asyncio.sleep(0.01)
        total = max((max(w.arrivals.values()) for w in watchers if w.arrivals), default=0) - min(sent.values())
        latencies = [w.arrivals[rv] - t for w in watchers for rv, t in sent.items() if rv in w.arrivals]
        for watcher in watchers:
            await watcher.stop()
    report.rate(
        "writes_with_watchers_per_second",
        settings.fanout_writes,
        writes.elapsed_s,
        "writes",
        label="writes with watchers",
    )
    report.rate(
        "watch_events_per_second",
        len(latencies),
        total,
        "events",
        label="watch fan-out",
        delivered=len(latencies),
        expected=len(sent) * settings.watchers,
    )
    if latencies:
        report.latencies(Latencies.of(latencies), "watch_delivery", label="watch: write to delivery")
    else:
        report.note("watch: no event was delivered")


async def _pipeline_phase(load: _Load, settings: BenchSettings, report: Report) -> None:
    path = "/api/v1/namespaces/bench-pipeline/pods"
    timer = Timer()
    async with load.session(settings.pipeline_watchers + 1) as watch_session, load.session(load.concurrency) as session:
        start_rv = json.loads(await load.request(session, "GET", f"{path}?limit=1"))["metadata"]["resourceVersion"]
        watchers = [_Watcher(load, path) for _ in range(settings.pipeline_watchers)]
        for watcher in watchers:
            await watcher.start(watch_session, start_rv)

        async def lifecycle(i: int) -> None:
            name = f"p-{i:06d}"
            with timer.time():
                await load.request(session, "POST", path, _pod(name, i))
                await load.request(
                    session,
                    "PATCH",
                    f"{path}/{name}",
                    {"metadata": {"annotations": {names.ANNOTATION_DEVICE_ALLOCATED: '{"gpu":[]}'}}},
                    "application/merge-patch+json",
                )
                await load.request(
                    session,
                    "POST",
                    f"{path}/{name}/binding",
                    {
                        "apiVersion": "v1",
                        "kind": "Binding",
                        "metadata": {"name": name},
                        "target": {"kind": "Node", "name": f"node-{i % 500}"},
                    },
                )
                await load.request(
                    session,
                    "PATCH",
                    f"{path}/{name}/status",
                    {"status": {"phase": "Running"}},
                    "application/merge-patch+json",
                )

        await load.each(settings.pipeline_pods, lifecycle)
        for watcher in watchers:
            await watcher.stop()
    report.rate(
        "lifecycle_pods_per_second",
        settings.pipeline_pods,
        timer.elapsed_s,
        "pods",
        label="pod lifecycle (create, annotate, bind, status)",
        lifecycle_requests_per_second=round(4 * settings.pipeline_pods / timer.elapsed_s),
    )
    report.latencies(timer.summary(), "lifecycle_latency", label="pod lifecycle: one pod's four requests")


def _client_phase(server: EmbeddedAPIServer, settings: BenchSettings, report: Report) -> None:
    timer = Timer()
    with server.client() as client:
        pods = client.resource(PODS)
        for i in range(settings.client_creates):
            with timer.time():
                pods.create(_pod(f"c-{i:06d}", i), namespace="bench-client")
    report.rate(
        "client_creates_per_second",
        settings.client_creates,
        timer.elapsed_s,
        "pods",
        label="creates, official client, 1 thread",
    )
    report.latencies(timer.summary(), "client_create_latency", label="creates, official client: one request")


async def _namespaces(load: _Load) -> None:
    async with load.session(1) as session:
        for name in ("bench", "bench-pipeline", "bench-client"):
            await load.request(session, "POST", "/api/v1/namespaces", {"metadata": {"name": name}})


def run_benchmarks(server: EmbeddedAPIServer, settings: BenchSettings, report: Report) -> None:
    """Run every phase against a started, empty server, adding each result to `report` as it is measured."""
    load = _Load(server, settings.concurrency)

    async def phases() -> None:
        await _namespaces(load)
        await _create_phase(load, settings, report)
        await _list_phase(load, report)
        await _fanout_phase(load, settings, report)
        await _pipeline_phase(load, settings, report)

    asyncio.run(phases())
    _client_phase(server, settings, report)
