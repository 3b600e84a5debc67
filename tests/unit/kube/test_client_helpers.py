"""The error tree, backoff and conflict retries of the client layer."""

import json

import pytest
import urllib3.exceptions

from apis.errors import TesseraError
from kube import errors
from kube.backoff import Backoff
from kube.patch import annotations_patch, retry_on_conflict


@pytest.mark.parametrize(
    ("status", "reason", "cls"),
    [
        (400, "BadRequest", errors.BadRequest),
        (401, "Unauthorized", errors.Unauthorized),
        (403, "Forbidden", errors.Forbidden),
        (404, "NotFound", errors.NotFound),
        (409, "Conflict", errors.Conflict),
        (409, "AlreadyExists", errors.AlreadyExists),
        (410, "Expired", errors.Gone),
        (422, "Invalid", errors.Invalid),
        (429, "TooManyRequests", errors.TooManyRequests),
        (500, "InternalError", errors.ServerError),
        (504, "Timeout", errors.ServerError),
    ],
)
def test_status_maps_to_the_error_tree(status: int, reason: str, cls: type) -> None:
    body = json.dumps({"kind": "Status", "reason": reason, "message": "it failed", "code": status})
    error = errors.from_response(status, body.encode())
    assert type(error) is cls and isinstance(error, TesseraError)
    assert (error.status, error.reason, error.message) == (status, reason, "it failed")


def test_transport_exceptions_are_translated_where_they_enter() -> None:
    with pytest.raises(errors.Unreachable) as e, errors.translated():
        raise urllib3.exceptions.NewConnectionError(None, "refused")
    assert isinstance(e.value.__cause__, urllib3.exceptions.NewConnectionError)
    with pytest.raises(errors.Unreachable), errors.translated():
        raise ConnectionRefusedError("refused")
    assert errors.from_response(502, b"<html>bad gateway</html>").message == "<html>bad gateway</html>"


def test_backoff_grows_to_the_cap_with_jitter() -> None:
    delays = Backoff(initial=1, maximum=5, factor=2, jitter=0.5).delays(rand=lambda: 1.0)
    assert [next(delays) for _ in range(5)] == [1.5, 3.0, 6.0, 7.5, 7.5]


def test_retry_on_conflict_retries_only_conflicts() -> None:
    calls: list[int] = []
    slept: list[float] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise errors.Conflict("stale", status=409)
        return "ok"

    assert retry_on_conflict(flaky, sleep=slept.append) == "ok" and len(slept) == 2
    with pytest.raises(errors.Conflict):
        retry_on_conflict(lambda: (_ for _ in ()).throw(errors.Conflict("always")), attempts=2, sleep=slept.append)
    with pytest.raises(errors.NotFound):
        retry_on_conflict(lambda: (_ for _ in ()).throw(errors.NotFound("gone")), sleep=slept.append)


def test_patch_builders() -> None:
    assert annotations_patch({"a": "1", "b": None}) == {"metadata": {"annotations": {"a": "1", "b": None}}}
