"""The work queue between event handlers and reconcile workers (client-go's workqueue semantics).

- **Dedup**: a key waiting in the queue is there once, however many events named it.
- **Exclusive**: a key being reconciled is not handed to a second worker; if it is added
  meanwhile it is queued again when the first worker calls `done`, so the newest state is seen.
- **Delays**: `add_after` holds a key until a time (the earliest wins when asked twice);
  `add_rate_limited` delays it by the rate limiter (per-key backoff, overall limit).
- **Shutdown**: `get` returns None at once; keys being processed finish normally.

Time comes from an injected clock for deciding when delayed keys are due, so unit tests step a
fake clock and call `get(timeout=0)` instead of sleeping.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar

from controller.runtime.ratelimit import RateLimiter, RateLimiterSettings

__all__ = ["QueueObserver", "WorkQueue"]

K = TypeVar("K", bound=Hashable)


class QueueObserver(Protocol):
    """Where the queue reports what metrics show (the runtime's Prometheus metrics implement it)."""

    def added(self) -> None: ...

    def retried(self) -> None: ...

    def depth(self, n: int) -> None: ...

    def waited(self, seconds: float) -> None:
        """A key left the queue after `seconds` in it."""
        ...


class _Quiet:
    def added(self) -> None:
        return None

    def retried(self) -> None:
        return None

    def depth(self, n: int) -> None:
        return None

    def waited(self, seconds: float) -> None:
        return None


class WorkQueue(Generic[K]):
    """Thread-safe. Producers `add`; each worker loops `key = get()` … `done(key)`."""

    def __init__(
        self,
        *,
        rate_limiter: RateLimiter | None = None,
        clock: Callable[[], float] = time.monotonic,
        observer: QueueObserver | None = None,
    ) -> None:
        self._clock = clock
        self._limiter = rate_limiter or RateLimiterSettings().build(clock)
        self._observer: QueueObserver = observer or _Quiet()
        self._cond = threading.Condition()
        self._queue: collections.deque[K] = collections.deque()
        self._dirty: set[K] = set()  # to be processed: queued, or re-queued when done
        self._processing: set[K] = set()
        self._added_at: dict[K, float] = {}
        self._waiting: list[tuple[float, int, K]] = []  # heap of (due, seq, key); stale entries skipped
        self._due: dict[K, float] = {}  # key -> the due time its live heap entry has
        self._seq = itertools.count()
        self._shutdown = False

    # --- producers ----------------------------------------------------------------------------------
    def add(self, key: K) -> None:
        """Queue `key` now (no-op when it is already waiting to be processed, or after shutdown)."""
        with self._cond:
            self._add_locked(key)

    def add_after(self, key: K, delay: float) -> None:
        """Queue `key` after `delay` seconds; an earlier pending time for the key wins."""
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            if self._shutdown:
                return
            due = self._clock() + delay
            current = self._due.get(key)
            if current is not None and current <= due:
                return
            self._due[key] = due
            heapq.heappush(self._waiting, (due, next(self._seq), key))
            self._cond.notify()

    def add_rate_limited(self, key: K) -> None:
        """Queue `key` again after the rate limiter's delay (a retry: counts one more failure)."""
        self._observer.retried()
        self.add_after(key, self._limiter.when(key))

    def forget(self, key: K) -> None:
        """`key` succeeded or was given up: its backoff starts over."""
        self._limiter.forget(key)

    def failures(self, key: K) -> int:
        return self._limiter.failures(key)

    def shutdown(self) -> None:
        """Stop handing out keys; blocked `get`s return None. Idempotent."""
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()

    # --- workers ------------------------------------------------------------------------------------
    def get(self, timeout: float | None = None) -> K | None:
        """The next key, marked as processing; None after shutdown or when `timeout` passed.

        Blocks until a key is ready (a delayed key becomes ready when the clock reaches its time).
        The caller must call `done(key)` when finished with it.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._shutdown:
                self._promote_due()
                if self._queue:
                    key = self._queue.popleft()
                    self._processing.add(key)
                    self._dirty.discard(key)
                    self._observer.waited(max(0.0, self._clock() - self._added_at.pop(key, self._clock())))
                    self._observer.depth(len(self._queue))
                    return key
                wait = self._waiting[0][0] - self._clock() if self._waiting else None
                if deadline is not None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return None
                    wait = remaining if wait is None else min(wait, remaining)
                self._cond.wait(wait)
            return None

    def done(self, key: K) -> None:
        """Processing of `key` ended; if it was added meanwhile, it is queued again now."""
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty and not self._shutdown:
                self._enqueue_locked(key)

    # --- introspection ------------------------------------------------------------------------------
    def __len__(self) -> int:
        """Keys ready to be handed out (not those delayed or being processed)."""
        with self._cond:
            return len(self._queue)

    @property
    def delayed(self) -> int:
        with self._cond:
            return len(self._due)

    @property
    def processing(self) -> int:
        with self._cond:
            return len(self._processing)

    @property
    def shutting_down(self) -> bool:
        with self._cond:
            return self._shutdown

    # --- internals (hold self._cond) -----------------------------------------------------------------
    def _add_locked(self, key: K) -> None:
        if self._shutdown or key in self._dirty:
            return
        self._dirty.add(key)
        self._observer.added()
        if key not in self._processing:
            self._enqueue_locked(key)

    def _enqueue_locked(self, key: K) -> None:
        self._queue.append(key)
        self._added_at[key] = self._clock()
        self._observer.depth(len(self._queue))
        self._cond.notify()

    def _promote_due(self) -> None:
        now = self._clock()
        while self._waiting and self._waiting[0][0] <= now:
            due, _, key = heapq.heappop(self._waiting)
            if self._due.get(key) != due:
                continue  # superseded by an earlier time for the same key
            del self._due[key]
            self._add_locked(key)
