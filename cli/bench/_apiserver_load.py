"""Load for the embedded API server: how fast it creates, lists, fans out watches and runs the
per-pod request mix of the scheduler (`tessera bench apiserver`).

The server runs as its own process (`testing.run_apiserver`, SQLite on disk, as in production);
the load comes from aiohttp in this process, so the client is not the bottleneck the way the
synchronous `kubernetes` client would be. One number is taken with the official client too, for
what a single component thread can expect.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import ssl
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from apis.extension import names
from cli.launchers.apiserver import EmbeddedAPIServer
from kube.resources import PODS

__all__ = ["BenchSettings", "Result", "run_benchmarks"]

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


@dataclass(slots=True)
class Result:
    name: str
    value: float
    unit: str
    detail: dict[str, Any] = field(default_factory=dict)


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


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


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

    async def each(self, count: int, work: Callable[[int], Awaitable[None]]) -> float:
        """Run work(0..count-1) with `concurrency` in flight; returns the elapsed seconds."""
        counter = iter(range(count))

        async def worker() -> None:
            for i in counter:
                await work(i)

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(self.concurrency)))
        return time.perf_counter() - start


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


async def _create_phase(load: _Load, settings: BenchSettings) -> Result:
    async with load.session(load.concurrency) as session:
        path = "/api/v1/namespaces/bench/pods"

        async def create(i: int) -> None:
            await load.request(session, "POST", path, _pod(f"pod-{i:06d}", i))

        elapsed = await load.each(settings.pods, create)
    return Result("creates", settings.pods / elapsed, "pods/s", {"pods": settings.pods, "seconds": round(elapsed, 2)})


async def _list_phase(load: _Load, settings: BenchSettings) -> list[Result]:
    results = []
    async with load.session(1) as session:
        for name, query in (
            ("list all", ""),
            ("list selected", "?labelSelector=shard%3D3"),
            ("list page", "?limit=500"),
        ):
            times = []
            for _ in range(5):
                start = time.perf_counter()
                body = await load.request(session, "GET", f"/api/v1/namespaces/bench/pods{query}")
                times.append(time.perf_counter() - start)
            items = len(json.loads(body)["items"])
            results.append(
                Result(
                    f"{name} ({items} pods)",
                    statistics.median(times) * 1000,
                    "ms",
                    {"bytes": len(body), "min_ms": round(min(times) * 1000, 1)},
                )
            )
    return results


async def _fanout_phase(load: _Load, settings: BenchSettings) -> list[Result]:
    namespace_path = "/api/v1/namespaces/bench/pods"
    async with load.session(settings.watchers + 1) as watch_session, load.session(load.concurrency) as session:
        start_rv = json.loads(await load.request(session, "GET", f"{namespace_path}?limit=1"))["metadata"][
            "resourceVersion"
        ]
        watchers = [_Watcher(load, namespace_path) for _ in range(settings.watchers)]
        for watcher in watchers:
            await watcher.start(watch_session, start_rv)
        sent: dict[int, float] = {}

        async def patch(i: int) -> None:
            t = time.perf_counter()
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

        write_time = await load.each(settings.fanout_writes, patch)
        deadline = time.perf_counter() + 60
        while any(len([rv for rv in sent if rv in w.arrivals]) < len(sent) for w in watchers):
            if time.perf_counter() > deadline:
                break
            await asyncio.sleep(0.01)
        total = max((max(w.arrivals.values()) for w in watchers if w.arrivals), default=0) - min(sent.values())
        latencies = [w.arrivals[rv] - t for w in watchers for rv, t in sent.items() if rv in w.arrivals]
        delivered = len(latencies)
        for watcher in watchers:
            await watcher.stop()
    return [
        Result(
            "writes with watchers",
            settings.fanout_writes / write_time,
            "writes/s",
            {"writes": settings.fanout_writes, "watchers": settings.watchers},
        ),
        Result(
            "watch fan-out",
            delivered / total if total > 0 else 0.0,
            "events/s",
            {"delivered": delivered, "expected": len(sent) * settings.watchers},
        ),
        Result(
            "watch latency p50",
            statistics.median(latencies) * 1000 if latencies else 0.0,
            "ms",
            {"p99_ms": round(_percentile(latencies, 0.99) * 1000, 1)},
        ),
    ]


async def _pipeline_phase(load: _Load, settings: BenchSettings) -> Result:
    path = "/api/v1/namespaces/bench-pipeline/pods"
    async with load.session(settings.pipeline_watchers + 1) as watch_session, load.session(load.concurrency) as session:
        start_rv = json.loads(await load.request(session, "GET", f"{path}?limit=1"))["metadata"]["resourceVersion"]
        watchers = [_Watcher(load, path) for _ in range(settings.pipeline_watchers)]
        for watcher in watchers:
            await watcher.start(watch_session, start_rv)

        async def lifecycle(i: int) -> None:
            name = f"p-{i:06d}"
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

        elapsed = await load.each(settings.pipeline_pods, lifecycle)
        for watcher in watchers:
            await watcher.stop()
    return Result(
        "pod lifecycle (create, annotate, bind, status)",
        settings.pipeline_pods / elapsed,
        "pods/s",
        {
            "pods": settings.pipeline_pods,
            "requests/s": round(4 * settings.pipeline_pods / elapsed),
            "watchers": settings.pipeline_watchers,
        },
    )


def _client_phase(server: EmbeddedAPIServer, settings: BenchSettings) -> Result:
    with server.client() as client:
        pods = client.resource(PODS)
        start = time.perf_counter()
        for i in range(settings.client_creates):
            pods.create(_pod(f"c-{i:06d}", i), namespace="bench-client")
        elapsed = time.perf_counter() - start
    return Result(
        "creates, official client, 1 thread",
        settings.client_creates / elapsed,
        "pods/s",
        {"pods": settings.client_creates},
    )


async def _namespaces(load: _Load) -> None:
    async with load.session(1) as session:
        for name in ("bench", "bench-pipeline", "bench-client"):
            await load.request(session, "POST", "/api/v1/namespaces", {"metadata": {"name": name}})


def run_benchmarks(
    server: EmbeddedAPIServer, settings: BenchSettings, report: Callable[[Result], None]
) -> list[Result]:
    """Run every phase against a started, empty server; `report` gets each result as it is measured."""
    load = _Load(server, settings.concurrency)
    results: list[Result] = []

    def note(result: Result) -> None:
        results.append(result)
        report(result)

    async def phases() -> None:
        await _namespaces(load)
        note(await _create_phase(load, settings))
        for result in await _list_phase(load, settings):
            note(result)
        for result in await _fanout_phase(load, settings):
            note(result)
        note(await _pipeline_phase(load, settings))

    asyncio.run(phases())
    note(_client_phase(server, settings))
    return results
