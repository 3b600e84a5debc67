"""What the agent's own HTTP routes (fault injection, health clear) share: parameters and errors.

Both route sets take small integers (`minor=3`, `xid=79`) and answer a bad one with a precise
400; `BadRequest` carries the status a route answers with, and `json_error` is how the agent's
HTTP server spells every error, its own (404, 405) and the routes' alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kube import serving

__all__ = ["BadRequest", "Query", "int_param", "json_error"]

Query = Mapping[str, Sequence[str]]


class BadRequest(Exception):
    """The request cannot be served: `status` (400, 404) and a message for the JSON answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def int_param(query: Query, name: str) -> int:
    """The non-negative integer `name` (the last one when repeated). Raises BadRequest(400)."""
    values = query.get(name)
    if not values:
        raise BadRequest(400, f"missing query parameter {name}")
    try:
        value = int(values[-1])
    except ValueError:
        raise BadRequest(400, f"{name} must be an integer, got {values[-1]!r}") from None
    if value < 0:
        raise BadRequest(400, f"{name} must not be negative, got {value}")
    return value


def json_error(status: int, message: str) -> serving.Response:
    """`{"error": message}` with `status`."""
    return serving.Response.json({"error": message}, status)
