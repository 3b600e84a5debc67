"""The informer's local copy of a resource: a thread-safe map with secondary indexes.

Readers (scheduler cycles, controllers, hooks) call `get`, `list` and `by_index` from any
thread while the informer's thread writes. Objects are whatever the informer's parser returns
(frozen `apis` dataclasses, or dicts for types without one) and are never copied: treat them as
read-only. An index maps each object to zero or more string values (`"node": lambda p:
[p.node_name]`), so "pods on node n1" is a dict lookup, not a scan.
"""

from __future__ import annotations

import builtins
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Change", "Indexer", "Store"]

log = logging.getLogger(__name__)

T = TypeVar("T")
Indexer = Callable[[T], Iterable[str]]


@dataclass(frozen=True, slots=True)
class Change(Generic[T]):
    """What `Store.replace` changed: old is None for an add, new is None for a delete."""

    key: str
    old: T | None
    new: T | None


class Store(Generic[T]):
    def __init__(self, indexers: Mapping[str, Indexer[T]] | None = None) -> None:
        self._lock = threading.RLock()
        self._items: dict[str, tuple[str, T]] = {}  # key -> (resourceVersion, object)
        self._indexers = dict(indexers or {})
        self._indices: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}

    # --- reading -----------------------------------------------------------------------------------
    def get(self, key: str) -> T | None:
        """The object stored under `namespace/name` (or `name` for cluster-scoped types)."""
        with self._lock:
            item = self._items.get(key)
            return item[1] if item else None

    def resource_version(self, key: str) -> str | None:
        with self._lock:
            item = self._items.get(key)
            return item[0] if item else None

    def list(self) -> builtins.list[T]:
        with self._lock:
            return [obj for _, obj in self._items.values()]

    def keys(self) -> builtins.list[str]:
        with self._lock:
            return list(self._items)

    def by_index(self, index: str, value: str) -> builtins.list[T]:
        """Objects whose indexer yielded `value`; raises KeyError for an unknown index."""
        with self._lock:
            keys = self._indices[index].get(value, ())
            return [self._items[k][1] for k in keys]

    def index_values(self, index: str) -> builtins.list[str]:
        with self._lock:
            return [v for v, keys in self._indices[index].items() if keys]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items

    def add_indexer(self, name: str, indexer: Indexer[T]) -> None:
        """Add an index (built at once from what is stored); a second one of the same name is refused."""
        with self._lock:
            if name in self._indexers:
                raise ValueError(f"index {name!r} already exists")
            self._indexers[name] = indexer
            self._indices[name] = {}
            for key, (_, obj) in self._items.items():
                for value in self._values(name, indexer, key, obj):
                    self._indices[name].setdefault(value, set()).add(key)

    # --- writing (the informer's thread) -----------------------------------------------------------
    def upsert(self, key: str, rv: str, obj: T) -> T | None:
        """Store `obj`; returns the object it replaced."""
        with self._lock:
            old = self._items.get(key)
            if old is not None:
                self._unindex(key, old[1])
            self._items[key] = (rv, obj)
            self._index(key, obj)
            return old[1] if old else None

    def delete(self, key: str) -> T | None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is None:
                return None
            self._unindex(key, old[1])
            return old[1]

    def replace(self, items: Mapping[str, tuple[str, T]]) -> builtins.list[Change[T]]:
        """Make the store hold exactly `items`; returns what changed (same resourceVersion: unchanged)."""
        changes: builtins.list[Change[T]] = []
        with self._lock:
            for key in list(self._items):
                if key not in items:
                    changes.append(Change(key, self.delete(key), None))
            for key, (rv, obj) in items.items():
                current = self._items.get(key)
                if current is not None and current[0] == rv:
                    continue
                changes.append(Change(key, self.upsert(key, rv, obj), obj))
        return changes

    def _values(self, name: str, indexer: Indexer[T], key: str, obj: T) -> Iterable[str]:
        """What `indexer` yields for `obj`; nothing (logged) if it raises, so the store stays consistent."""
        try:
            return list(indexer(obj))
        except Exception:
            log.exception("Indexer failed", extra={"index": name, "object": key})
            return ()

    def _index(self, key: str, obj: T) -> None:
        for name, indexer in self._indexers.items():
            index = self._indices[name]
            for value in self._values(name, indexer, key, obj):
                index.setdefault(value, set()).add(key)

    def _unindex(self, key: str, obj: T) -> None:
        for name, indexer in self._indexers.items():
            index = self._indices[name]
            for value in self._values(name, indexer, key, obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]
