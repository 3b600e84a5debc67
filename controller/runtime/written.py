"""`WrittenVersions`: is the cache still older than our own last write to an object?

A reconcile right after a write may see the cache before that write reaches it; acting on it
would write the same change again. A reconciler records the resourceVersion each write returns
and skips writing while the cached object is older; the write's own watch event brings the key
back. resourceVersions are compared as integers, which both etcd revisions and the embedded
server's are; anything else counts as caught up, which costs at most a no-op write.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

__all__ = ["WrittenVersions"]


class WrittenVersions:
    """Per key, the resourceVersion our last write returned, until the cache has caught up."""

    def __init__(self) -> None:
        self._written: dict[str, str] = {}
        self._lock = threading.Lock()

    def record(self, key: str, written: Mapping[str, Any]) -> None:
        """`written`: the object the API server answered the write with."""
        version = str((written.get("metadata") or {}).get("resourceVersion", ""))
        with self._lock:
            self._written[key] = version

    def behind(self, key: str, cached: str) -> bool:
        """True while `cached` (the cache's resourceVersion of `key`) is older than our last write."""
        with self._lock:
            written = self._written.get(key)
            if written is None:
                return False
            if cached.isdigit() and written.isdigit() and int(cached) < int(written):
                return True
            del self._written[key]
            return False

    def forget(self, key: str) -> None:
        with self._lock:
            self._written.pop(key, None)
