"""The dashboard's HTTP server: the page, its data as server-sent events, and health probes.

    GET /                 the page (static/index.html; app.js and app.css beside it)
    GET /api/state        the whole state as JSON (what the page gets first, and tests read)
    GET /api/events       server-sent events: `state` once (the whole state), then `patch` for
                          each burst of changes (changed node rows, removed nodes, the
                          summary's changed entries)
    GET /healthz /readyz  200 ok; /readyz 503 until devices and pods are listed

Read-only, and it answers only what a browser asks of it on its own behalf: a request whose
`Host` is not one of its names (DNS rebinding: a page elsewhere pointing its own name here), or
that comes from another site's page (`Origin`, `Sec-Fetch-Site`: a form posting `text/plain`
across sites) is refused with 403 before any route runs (`kube.hostcheck`). Pages are not to be
framed by other sites (`X-Frame-Options: DENY`).

Changes arrive on the informers' and poller's threads (`_Publisher.changed`); within
`debounce` seconds the publisher rebuilds the state on a worker thread (the view is pure and
takes tens of milliseconds at 500 nodes), diffs it against the last one and queues the patch for
every open stream. A stream that falls behind by `_MAX_BACKLOG` patches is closed: the browser's
EventSource reconnects and gets the whole state again, so a slow client never holds memory or
the others. Read-only: no route changes anything in the cluster.

A stream ends at once when its reader goes away (the runner cancels the handler of a dropped
connection; without that, aiohttp leaves it waiting until its next write, up to `keepalive` seconds
later, with patches queued for nobody), and every stream ends when the server shuts down, after
it has stopped listening, so that a browser reconnecting meanwhile cannot hold the shutdown open.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final

from aiohttp import web

from apis.errors import ConfigError
from dashboard import snapshot, view
from dashboard.settings import DashboardSettings
from dashboard.sources import ClusterSources, SchedulerPoller
from kube.client import Client
from kube.hostcheck import HostPolicy
from kube.lifecycle import write_atomically
from kube.logs import V

__all__ = ["STATIC", "Dashboard", "run"]

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

STATIC: Final = Path(__file__).parent / "static"
_MAX_BACKLOG: Final = 32


class Dashboard:
    """The aiohttp application over `ClusterSources` and a `SchedulerPoller`."""

    def __init__(self, settings: DashboardSettings, client: Client) -> None:
        self.settings = settings
        self._hosts = HostPolicy.with_names(settings.allowed_hosts)
        self._dirty = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self.sources = ClusterSources(client, on_change=self.changed)
        self.poller = SchedulerPoller(settings, on_change=self.changed, credentials=client.config.credentials)
        self._state: snapshot.State | None = None
        self._streams: set[asyncio.Queue[str | None]] = set()
        #: Set once the server shuts down: a stream that opens later ends at once.
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        #: Rebuilds done (for the benchmark and tests).
        self.builds = 0

    def changed(self) -> None:
        """Called from any thread when something the page shows may have changed."""
        self._loop.call_soon_threadsafe(self._dirty.set)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard])
        app.on_response_prepare.append(self._headers)
        app.on_shutdown.append(self._end_streams)
        app.router.add_get("/", self._index)
        app.router.add_get("/api/state", self._full)
        app.router.add_get("/api/events", self._events)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_static("/static/", STATIC)
        return app

    async def start(self) -> None:
        self.sources.start()
        self.poller.start()
        self._task = asyncio.create_task(self._publish())

    async def stop(self) -> None:
        """Stop publishing and the sources. Streams still open end in the app's shutdown
        (`_end_streams`), once the server no longer accepts connections."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await asyncio.to_thread(self.poller.stop)
        await asyncio.to_thread(self.sources.stop)

    # --- building ------------------------------------------------------------------------------------
    def _build(self) -> snapshot.State:
        report = self.poller.report()
        s = self.sources
        self.builds += 1
        return view.state(
            devices=s.devices.store.list(),
            pods=s.pods.store.list(),
            pod_groups=[*s.pod_groups.store.list(), *s.upstream_pod_groups.store.list()],
            quotas=s.quotas.store.list(),
            reservations=s.reservations.store.list(),
            jobs=s.migrations.store.list(),
            claims=s.claims.store.list(),
            slices=s.slices.store.list(),
            scheduler=report.pending,
            scrapes=(report.scrape, report.previous),
            now=datetime.datetime.now(datetime.UTC),
            errors=report.errors,
        )

    async def _current(self) -> snapshot.State:
        if self._state is None:
            self._state = await asyncio.to_thread(self._build)
        return self._state

    async def _publish(self) -> None:
        while True:
            await self._dirty.wait()
            await asyncio.sleep(self.settings.debounce)
            self._dirty.clear()
            try:
                state = await asyncio.to_thread(self._build)
            except Exception:  # a loop boundary: keep serving the last state
                log.exception("Building the dashboard's state failed")
                continue
            patch = snapshot.diff(self._state, state)
            self._state = state
            if patch is None:
                continue
            for stream in list(self._streams):
                if stream.qsize() >= _MAX_BACKLOG:
                    self._streams.discard(stream)
                    stream.put_nowait(None)
                else:
                    stream.put_nowait(patch)

    async def _end_streams(self, app: web.Application) -> None:
        """The app's shutdown hook: aiohttp runs it after the sites stopped listening and before
        it waits for the handlers still running, which an open stream would otherwise keep busy
        until the shutdown timeout."""
        self._closing = True
        for stream in self._streams:
            stream.put_nowait(None)

    # --- routes --------------------------------------------------------------------------------------
    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        headers = {k.lower(): v for k, v in request.headers.items()}
        why = self._hosts.refusal(request.method, headers)
        if why is not None:
            log.info("Refused a request", extra={"path": request.path, "reason": why})
            return web.Response(status=403, text=f"forbidden: {why}\n")
        return await handler(request)

    @staticmethod
    async def _headers(request: web.Request, response: web.StreamResponse) -> None:
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")

    async def _index(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    async def _full(self, request: web.Request) -> web.Response:
        state = await self._current()
        return web.Response(text=state.full(), content_type="application/json")

    async def _events(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        )
        await response.prepare(request)
        stream: asyncio.Queue[str | None] = asyncio.Queue()
        self._streams.add(stream)
        log.log(V(4), "Stream opened", extra={"streams": len(self._streams)})
        try:
            state = await self._current()
            await response.write(_event("state", state.full()))
            while not self._closing:
                try:
                    data = await asyncio.wait_for(stream.get(), timeout=self.settings.keepalive)
                except TimeoutError:
                    await response.write(b": keep-alive\n\n")
                    continue
                if data is None:
                    break
                await response.write(_event("patch", data))
        except ConnectionResetError:
            pass  # the page went away while we wrote; while we wait, the runner cancels the handler
        finally:
            self._streams.discard(stream)
            log.log(V(4), "Stream ended", extra={"streams": len(self._streams)})
        return response

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _readyz(self, request: web.Request) -> web.Response:
        missing = self.sources.synced()
        return web.Response(text=missing or "ok", status=503 if missing else 200)


def _event(name: str, data: str) -> bytes:
    """One server-sent event; `data` is one line of JSON (no newlines to split)."""
    return f"event: {name}\ndata: {data}\n\n".encode()


async def serve(settings: DashboardSettings, stop: asyncio.Event) -> None:
    """Serve until `stop` is set. Raises ConfigError when the kubeconfig cannot be used or the
    address cannot be bound."""
    client = Client.from_settings(settings.client)
    try:
        dashboard = Dashboard(settings, client)
        # handler_cancellation: a stream whose reader went away ends at once (see the docstring).
        runner = web.AppRunner(dashboard.app(), access_log=None, handle_signals=False, handler_cancellation=True)
        await runner.setup()
        site = web.TCPSite(runner, settings.host, settings.port, ssl_context=settings.tls.context())
        try:
            await site.start()
        except OSError as e:
            await runner.cleanup()
            raise ConfigError(f"--listen {settings.host}:{settings.port}: {e.strerror or e}") from e
        host, port = _bound(runner)
        address = f"{host}:{port}"
        await dashboard.start()
        if settings.address_file is not None:
            write_atomically(settings.address_file, address + "\n")
        log.info("Serving", extra={"url": f"http://{address}/", "apiserver": client.host})
        await stop.wait()
        log.info("Shutting down", extra={"url": f"http://{address}/"})
        await dashboard.stop()
        await runner.cleanup()
    finally:
        client.close()


def _bound(runner: web.AppRunner) -> tuple[str, int]:
    for server in runner.sites:
        sockets = getattr(getattr(server, "_server", None), "sockets", None) or []
        for sock in sockets:
            host, port = sock.getsockname()[:2]
            return (f"[{host}]" if ":" in host else host), int(port)
    raise ConfigError("the dashboard's HTTP server has no socket")


def run(settings: DashboardSettings) -> int:
    """Run until SIGTERM/SIGINT; the process exit code."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(settings, stop)

    asyncio.run(main())
    return 0
