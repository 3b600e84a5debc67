"""`?fieldValidation=Strict|Warn|Ignore`: what to do about fields a schema does not know.

kube-apiserver prunes unknown fields of custom resources; the request's field validation mode
decides whether that is an error (Strict: 400 "strict decoding error"), a `Warning:` response
header (Warn, the default) or silent (Ignore). kubectl 1.25+ sends Strict by default, so a typo
in a manifest fails `kubectl apply` as against a real cluster.

The mode is request-scoped: the HTTP layer opens a `scope` per request (each aiohttp request runs
in its own task, so a context variable is private to it) and the schema strategy, deep in the
write path, reports pruned fields to it without every layer in between passing the mode along.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from apiserver.errors import StatusError

__all__ = ["MODES", "RequestFields", "report_unknown", "scope"]

MODES = ("Strict", "Warn", "Ignore")


@dataclass(slots=True)
class RequestFields:
    mode: str = "Warn"
    warnings: list[str] = field(default_factory=list)


_current: contextvars.ContextVar[RequestFields | None] = contextvars.ContextVar("field_validation", default=None)


@contextlib.contextmanager
def scope(mode: str) -> Iterator[RequestFields]:
    """Open the request's scope; a bad mode is a 400 as kube-apiserver answers it."""
    if mode and mode not in MODES:
        supported = ", ".join(f'"{m}"' for m in sorted(MODES))
        raise StatusError.bad_request(f'fieldValidation: unsupported value "{mode}": supported values: {supported}')
    state = RequestFields(mode or "Warn")
    token = _current.set(state)
    try:
        yield state
    finally:
        _current.reset(token)


def report_unknown(kind: str, version: str, paths: Sequence[str]) -> None:
    """Fields a write carried that the schema prunes: an error under Strict, else warnings."""
    state = _current.get()
    if not paths or state is None or state.mode == "Ignore":
        return
    if state.mode == "Strict":
        unknown = ", ".join(f'unknown field "{p}"' for p in paths)
        raise StatusError.cannot_handle(kind, version, f"strict decoding error: {unknown}")
    state.warnings.extend(f'unknown field "{p}"' for p in paths)
