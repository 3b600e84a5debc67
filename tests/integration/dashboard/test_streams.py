"""The dashboard's event streams end cleanly: at once when their reader goes away, and all of
them when the server shuts down. The server runs in this process (`dashboard.server.serve` on
its own event loop and thread) against the embedded API server over real HTTP, with a keep-alive
of an hour, so that a stream left waiting for its next keep-alive shows as one that never ends.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.launchers.apiserver import EmbeddedAPIServer
from dashboard.server import serve
from dashboard.settings import DashboardSettings
from kube.client import ClientSettings
from kube.logs import V
from tests.support.sse import EventStream
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

#: Seconds between keep-alive comments: longer than any test, so only a clean end ends a stream.
HOUR = 3600.0


class InProcessDashboard:
    """`serve()` on a thread of its own; `url` once it listens, `stop()` as SIGTERM would."""

    def __init__(self, settings: DashboardSettings) -> None:
        self._settings = settings
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="dashboard", daemon=True)
        self._thread.start()
        address_file = settings.address_file
        assert address_file is not None
        wait_for(lambda: self._error or address_file.exists(), what="the dashboard to listen")
        assert self._error is None, self._error
        self.url = "http://" + address_file.read_text().strip()

    def _run(self) -> None:
        async def main() -> None:
            self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
            await serve(self._settings, self._stop)

        try:
            asyncio.run(main())
        except BaseException as e:  # reported to the test's thread
            self._error = e

    def stop(self) -> bool:
        """Ask it to stop, as SIGTERM does; whether `serve()` returned. Idempotent. The wait is
        a hang guard, shorter than aiohttp's own 60 s for handlers still running at shutdown
        (after which it cancels them): a stream that the shutdown does not end shows as a hang."""
        if self._thread.is_alive():
            assert self._loop is not None and self._stop is not None
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(40)
        assert self._error is None, self._error
        return not self._thread.is_alive()


@pytest.fixture
def dashboard(apiserver: EmbeddedAPIServer, tmp_path: Path) -> Iterator[InProcessDashboard]:
    settings = DashboardSettings(
        client=ClientSettings(kubeconfig=apiserver.kubeconfig, user_agent="tessera-dashboard"),
        port=0,
        address_file=tmp_path / "address",
        keepalive=HOUR,
    )
    server = InProcessDashboard(settings)
    yield server
    server.stop()


def open_streams(caplog: pytest.LogCaptureFixture) -> list[int]:
    """The count of open streams after each stream opened or ended, from the server's log."""
    return [
        r.streams  # type: ignore[attr-defined]  # the log record's `extra`
        for r in caplog.records
        if r.name == "dashboard.server" and r.getMessage() in ("Stream opened", "Stream ended")
    ]


def test_a_stream_whose_reader_went_away_ends_at_once(
    dashboard: InProcessDashboard, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(V(4), logger="dashboard.server")
    with EventStream(dashboard.url, "/api/events") as stream:
        wait_for(lambda: stream.events, what="the whole state")
        assert stream.events[0][0] == "state"
        assert open_streams(caplog) == [1]
    # Its next write is an hour away: only the server noticing the reader left ends it.
    wait_for(lambda: open_streams(caplog) == [1, 0], what="the stream to end")


def test_a_shutdown_ends_every_open_stream(dashboard: InProcessDashboard, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(V(4), logger="dashboard.server")
    with EventStream(dashboard.url, "/api/events") as first, EventStream(dashboard.url, "/api/events") as second:
        wait_for(lambda: first.events and second.events, what="the whole state on both streams")
        assert dashboard.stop(), "serve() still waits for its streams"
        wait_for(lambda: first.ended.is_set() and second.ended.is_set(), what="both readers to see the end")
    assert open_streams(caplog)[-1] == 0
