"""Small ids for hashable keys (request shapes, node signatures), so per-node memos hash an int.

An id is never reused: the table is bounded and cleared when full, after which a key gets a new
id — a memo keyed by an old id then only misses, it never mistakes one key for another.
"""

from __future__ import annotations

from collections.abc import Hashable

__all__ = ["Ids"]


class Ids:
    __slots__ = ("_ids", "_limit", "_next")

    def __init__(self, limit: int) -> None:
        self._ids: dict[Hashable, int] = {}
        self._limit = limit
        self._next = 1

    def of(self, key: Hashable) -> int:
        ident = self._ids.get(key)
        if ident is None:
            if len(self._ids) >= self._limit:
                self._ids.clear()
            ident = self._ids[key] = self._next
            self._next += 1
        return ident
