"""What `ResourceAPI` needs of a connection, in a module below both `kube.client` and `kube.resources`.

`Client` hands out a `ResourceAPI` per resource type (`client.resource(PODS)`), and a
`ResourceAPI` sends its requests through that client, so the two modules used to import each
other. Both need only what is here: the `Transport` protocol (which `Client` implements and
`ResourceAPI` calls) and the errors reading a response may raise. Imports now go one way,
`client → resources → transport`, checked by an import-linter contract in pyproject.toml.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Protocol

import urllib3

__all__ = ["STREAM_ERRORS", "Transport"]

#: What reading a response body or a watch stream raises when the connection breaks (callers
#: turn it into `kube.errors.Unreachable`). ConnectionError and TimeoutError are OSErrors.
STREAM_ERRORS: Final = (urllib3.exceptions.HTTPError, OSError)


class Transport(Protocol):
    """Sends requests to one API server; `kube.client.Client` is the implementation."""

    @property
    def timeout(self) -> float:
        """Seconds a request may take unless it says otherwise."""
        ...

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float] | None = None,
    ) -> Any:
        """Send one request and return the decoded JSON body; raises kube.errors.APIError."""
        ...

    def open(
        self, method: str, path: str, *, query: Sequence[tuple[str, str]] = (), timeout: tuple[float, float]
    ) -> urllib3.BaseHTTPResponse:
        """Send a request whose response is a stream (a watch) and return it unread; raises
        kube.errors.APIError on non-2xx. `timeout` is (connect, read) in seconds."""
        ...
