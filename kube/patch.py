"""Writing safely when others write too: retry on 409 Conflict, and patch builders.

Optimistic concurrency means any read-modify-write can lose a race; the answer is to re-read and
try again, with backoff, a bounded number of times. Merge patches of single keys avoid the race
altogether when the write does not depend on what is there (annotations, labels).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from kube.backoff import Backoff
from kube.errors import AlreadyExists, Conflict

if TYPE_CHECKING:
    from kube.resources import ResourceAPI

__all__ = ["annotations_patch", "create_or_replace", "labels_patch", "retry_on_conflict"]

R = TypeVar("R")

_CONFLICT_BACKOFF = Backoff(initial=0.01, maximum=1.0)


def retry_on_conflict(
    attempt: Callable[[], R],
    *,
    attempts: int = 5,
    backoff: Backoff = _CONFLICT_BACKOFF,
    sleep: Callable[[float], None] = time.sleep,
) -> R:
    """Call `attempt` until it does not raise Conflict; re-raise the last one after `attempts`.

    `attempt` must re-read what it changes (it is called again from scratch). Other errors pass
    through at once. AlreadyExists (a Conflict) is retried too only if `attempt` raises it.
    """
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, got {attempts}")
    delays = backoff.delays()
    for remaining in range(attempts - 1, -1, -1):
        try:
            return attempt()
        except Conflict:
            if remaining == 0:
                raise
            sleep(next(delays))
    raise AssertionError("unreachable")


def create_or_replace(api: ResourceAPI, obj: Mapping[str, Any], *, namespace: str = "") -> dict[str, Any]:
    """Store `obj` as given, whether or not it exists (`kubectl apply` of a whole object, without
    the three-way merge): create it, or replace what is there, retrying on conflict."""

    def attempt() -> dict[str, Any]:
        try:
            return api.create(dict(obj), namespace=namespace)
        except AlreadyExists:
            current = api.get(obj["metadata"]["name"], namespace=namespace)
            meta = {**obj["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}
            return api.update({**obj, "metadata": meta}, namespace=namespace)

    return retry_on_conflict(attempt)


def _metadata_patch(field: str, changes: Mapping[str, str | None]) -> dict[str, Any]:
    return {"metadata": {field: dict(changes)}}


def annotations_patch(changes: Mapping[str, str | None]) -> dict[str, Any]:
    """A merge patch setting (or, for None, removing) annotations."""
    return _metadata_patch("annotations", changes)


def labels_patch(changes: Mapping[str, str | None]) -> dict[str, Any]:
    """A merge patch setting (or, for None, removing) labels."""
    return _metadata_patch("labels", changes)
