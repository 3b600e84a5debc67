"""Errors from the API server, as one tree under `apis.errors.TesseraError`.

    APIError                  any failed request (status, reason, message, details)
    ├── BadRequest            400: malformed request or selector
    │   └── Invalid           422: the object breaks a rule (details.causes)
    ├── Unauthorized          401
    ├── Forbidden             403
    ├── NotFound              404
    ├── Conflict              409: stale resourceVersion, or binding an already bound pod
    │   └── AlreadyExists     409: create of an existing name
    ├── Gone                  410: resourceVersion too old (relist)
    ├── TooManyRequests       429 (retry_after)
    └── ServerError           5xx
        └── Unreachable       no HTTP answer at all: connection refused/reset, timeout, TLS failure

The type says what a caller can do: retry a Conflict after re-reading, back off on
TooManyRequests/ServerError, relist on Gone, give up on BadRequest. Errors of `urllib3` and
`ssl` are translated where they enter (`translated()`, `from_response`), so no code outside
`kube/` ever catches a library exception.
"""

from __future__ import annotations

import contextlib
import json
import ssl
from collections.abc import Iterator, Mapping
from typing import Any

import urllib3.exceptions

from apis.errors import TesseraError

__all__ = [
    "APIError",
    "AlreadyExists",
    "BadRequest",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "NotFound",
    "ServerError",
    "TooManyRequests",
    "Unauthorized",
    "Unreachable",
    "from_response",
    "from_status",
    "translated",
]

_MAX_MESSAGE = 500


class APIError(TesseraError):
    """A request failed. `status` is the HTTP code (0 when there was no answer)."""

    def __init__(
        self, message: str, *, status: int = 0, reason: str = "", details: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason
        self.details: Mapping[str, Any] = details or {}


class BadRequest(APIError):
    pass


class Invalid(BadRequest):
    @property
    def causes(self) -> list[Mapping[str, Any]]:
        causes = self.details.get("causes")
        return list(causes) if isinstance(causes, list) else []


class Unauthorized(APIError):
    pass


class Forbidden(APIError):
    pass


class NotFound(APIError):
    pass


class Conflict(APIError):
    pass


class AlreadyExists(Conflict):
    pass


class Gone(APIError):
    pass


class TooManyRequests(APIError):
    @property
    def retry_after(self) -> float:
        value = self.details.get("retryAfterSeconds")
        return float(value) if isinstance(value, (int, float)) else 1.0


class ServerError(APIError):
    pass


class Unreachable(ServerError):
    pass


_BY_STATUS: Mapping[int, type[APIError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}


def from_status(status: int, body: Mapping[str, Any] | None = None, *, fallback: str = "") -> APIError:
    """The error for an HTTP status and (optionally) its `Status` body."""
    body = body or {}
    reason = str(body.get("reason", ""))
    message = str(body.get("message") or fallback or f"HTTP {status}")[:_MAX_MESSAGE]
    details = body.get("details") if isinstance(body.get("details"), Mapping) else None
    if status == 409 and reason == "AlreadyExists":
        cls: type[APIError] = AlreadyExists
    elif status >= 500:
        cls = ServerError
    else:
        cls = _BY_STATUS.get(status, APIError)
    return cls(message, status=status, reason=reason, details=details)


def from_response(status: int, data: bytes | str | None, *, reason: str = "") -> APIError:
    """The error for a non-2xx response, reading its `Status` body when there is one."""
    body: Any = None
    if data:
        try:
            body = json.loads(data)
        except ValueError:
            body = None
    if not isinstance(body, Mapping):
        text = data.decode(errors="replace") if isinstance(data, bytes) else (data or "")
        return from_status(status, None, fallback=(text.strip() or reason)[:_MAX_MESSAGE])
    return from_status(status, body)


_TRANSPORT_ERRORS = (urllib3.exceptions.HTTPError, ssl.SSLError, ConnectionError, TimeoutError)


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Turn the transport's exceptions raised inside the block (no answer, a broken connection,
    a TLS failure) into Unreachable."""
    try:
        yield
    except _TRANSPORT_ERRORS as e:
        raise Unreachable(f"the API server did not answer: {e}"[:_MAX_MESSAGE]) from e
