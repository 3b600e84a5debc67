"""A server-sent-event stream read on a thread, as a browser's EventSource reads the dashboard's.

    stream = EventStream("http://127.0.0.1:PORT", "/api/events")
    wait_for(lambda: stream.events, what="the first event")   # [(name, parsed JSON data), ...]
    stream.close()

`close()` shuts the socket down before closing it. Closing alone would block: the reader thread
sits in `recv()` holding the response's buffer lock, which `close()` needs, so it would wait for
the server's next byte (a keep-alive comment, 15 s later). The shutdown ends that `recv()` at once
and tells the server its reader left.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
from typing import Any

__all__ = ["EventStream"]


class EventStream:
    """GET `path` on `url` (`http://HOST:PORT`) and collect its events. Not for HTTPS."""

    def __init__(self, url: str, path: str, *, timeout_s: float = 60.0) -> None:
        self._conn = http.client.HTTPConnection(url.removeprefix("http://"), timeout=timeout_s)
        self._conn.request("GET", path)
        # Kept: http.client hands the socket over to the response (and forgets it) when the
        # server says it will close the connection.
        self._sock = self._conn.sock
        self._response = self._conn.getresponse()
        self.content_type = self._response.getheader("Content-Type")
        #: Every event so far, as (event name, its data parsed as JSON), in order.
        self.events: list[tuple[str, dict[str, Any]]] = []
        #: Set when the server ended the stream (or `close()` did).
        self.ended = threading.Event()
        self._thread = threading.Thread(target=self._read, name="sse-reader", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        name = ""
        try:
            for raw in self._response:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    name = line.removeprefix("event: ")
                elif line.startswith("data: "):
                    self.events.append((name, json.loads(line.removeprefix("data: "))))
        except (OSError, ValueError, AttributeError, http.client.HTTPException):
            pass  # closed by `close()` (http.client drops its file: AttributeError) or by the server
        finally:
            self.ended.set()

    def close(self) -> None:
        """End the stream from this side and wait for the reader thread. Idempotent."""
        if self._sock is not None:
            with contextlib.suppress(OSError):  # already closed
                self._sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(30)
        self._conn.close()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
