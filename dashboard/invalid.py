"""An object the dashboard could not parse, kept instead of dropped, so the page can say so.

`kube.Informer` skips an object its parser refuses and keeps the last version that parsed: right
for a controller, wrong for a page whose job is to show what is there. A Reservation with a `ttl`
that is no duration, or a PodMigrationJob with an unknown `mode`, would simply be missing from
its table. `tolerant(parse)` is the informers' parser instead: what parses is returned as is, what
does not becomes an `Invalid` naming the object and the parse error, which the tables list as
invalid. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from apis.errors import TesseraError

__all__ = ["Invalid", "tolerant"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Invalid:
    """An object of `kind` that did not parse: its name (as written, or '') and why."""

    kind: str
    name: str
    namespace: str
    created: str  # metadata.creationTimestamp as written, or ''
    error: str

    @classmethod
    def of(cls, kind: str, raw: Mapping[str, Any], error: TesseraError) -> Invalid:
        meta = raw.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        return cls(
            kind=kind,
            name=_text(meta.get("name")),
            namespace=_text(meta.get("namespace")),
            created=_text(meta.get("creationTimestamp")),
            error=str(error),
        )

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def tolerant(kind: str, parse: Callable[[Mapping[str, Any]], T]) -> Callable[[dict[str, Any]], T | Invalid]:
    """`parse`, with a `TesseraError` (the object is malformed) turned into an `Invalid`. Other
    exceptions are bugs in the parser and propagate (the informer logs them)."""

    def parsed(raw: dict[str, Any]) -> T | Invalid:
        try:
            return parse(raw)
        except TesseraError as e:
            return Invalid.of(kind, raw, e)

    return parsed
