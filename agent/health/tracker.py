"""Per-device health as a small state machine with recovery, and "health changed" callbacks.

Monitors feed it two kinds of evidence, keyed by the device's CR `id` (GPU UUID, RDMA bus id):
- `fault`: an error event (an XID) — unhealthy now; with `needs_reset` also until `reset_seen`;
- `problem` / `clear`: a condition that holds for a while (GPU lost, port not ACTIVE) — unhealthy
  while it holds; `clear` counts as the last error.
A device is healthy again once no problem holds, no reset is awaited and the quiet period has
passed since its last error; `tick` (called by the health loop every second) notices that.

Each change of a device's `Health` (flag, reason or message) is passed to the subscribers — the
Device CR reporter rebuilds the CR on it. `since` (the condition's `lastTransitionTime`) moves
only when the flag flips, so repeated errors of one kind yield identical Health and no CR write.
Thread-safe; callbacks run on the thread that caused the change, outside the lock, and must be
quick (set an event, enqueue). Callbacks from two threads may arrive out of order: take one as
"something changed" and read `snapshot()` for the state to report.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from agent.health.clock import Clock

__all__ = [
    "REASON_RECOVERED",
    "Health",
    "HealthCallback",
    "HealthTracker",
]

log = logging.getLogger(__name__)

REASON_RECOVERED = "Recovered"


@dataclass(frozen=True, slots=True)
class Health:
    healthy: bool = True
    reason: str = ""  # `Xid79`, `GPULost`, `PortNotActive`, `Recovered`; "" if never unhealthy
    message: str = ""
    since: str = ""  # RFC 3339 time of the last flip of `healthy`; "" if it never flipped


HealthCallback = Callable[[str, Health], None]


@dataclass
class _Device:
    health: Health = field(default_factory=Health)
    last_error: float | None = None  # monotonic
    awaiting_reset: bool = False
    cause: tuple[str, str] = ("", "")  # reason and message of the latest error
    problems: dict[str, tuple[str, str]] = field(default_factory=dict)  # source -> reason, message


class HealthTracker:
    def __init__(self, clock: Clock, *, quiet_period_s: float = 300.0) -> None:
        self.clock = clock
        self.quiet_period_s = quiet_period_s
        self._devices: dict[str, _Device] = {}
        self._callbacks: list[HealthCallback] = []
        self._lock = threading.Lock()

    def subscribe(self, callback: HealthCallback) -> None:
        """Call `callback(device_id, health)` on every change from now on."""
        with self._lock:
            self._callbacks.append(callback)

    def health(self, device_id: str) -> Health:
        """Current health; a device never reported on is healthy."""
        with self._lock:
            device = self._devices.get(device_id)
            return device.health if device else Health()

    def snapshot(self) -> dict[str, Health]:
        with self._lock:
            return {device_id: d.health for device_id, d in self._devices.items()}

    def fault(self, device_id: str, *, reason: str, message: str, needs_reset: bool = False) -> None:
        """An error happened now."""
        with self._lock:
            device = self._devices.setdefault(device_id, _Device())
            device.last_error = self.clock.monotonic()
            device.cause = (reason, message)
            device.awaiting_reset = device.awaiting_reset or needs_reset
            change = self._update(device_id, device)
        self._notify(change)

    def problem(self, device_id: str, source: str, *, reason: str, message: str) -> None:
        """A lasting problem holds (again). Idempotent for the same source and text."""
        with self._lock:
            device = self._devices.setdefault(device_id, _Device())
            device.problems[source] = (reason, message)
            device.last_error = self.clock.monotonic()
            device.cause = (reason, message)
            change = self._update(device_id, device)
        self._notify(change)

    def clear(self, device_id: str, source: str) -> None:
        """The problem from `source` no longer holds; the quiet period starts now. Idempotent."""
        with self._lock:
            device = self._devices.get(device_id)
            if device is None or device.problems.pop(source, None) is None:
                return
            device.last_error = self.clock.monotonic()
            change = self._update(device_id, device)
        self._notify(change)

    def reset_seen(self, device_id: str) -> None:
        """The device was reset (it went away and came back); XIDs that wait for one may recover."""
        with self._lock:
            device = self._devices.get(device_id)
            if device is None or not device.awaiting_reset:
                return
            device.awaiting_reset = False
            change = self._update(device_id, device)
        self._notify(change)

    def tick(self) -> None:
        """Re-check quiet periods; call about once a second."""
        with self._lock:
            changes = [self._update(device_id, d) for device_id, d in self._devices.items()]
        for change in changes:
            self._notify(change)

    def _update(self, device_id: str, device: _Device) -> tuple[str, Health] | None:
        """Recompute `device.health`; the change to announce, if any. Called under the lock."""
        now = self.clock.monotonic()
        old = device.health
        if device.problems:
            reason, message = next(reversed(device.problems.values()))
            healthy = False
        elif device.awaiting_reset or (device.last_error is not None and now - device.last_error < self.quiet_period_s):
            (reason, message), healthy = device.cause, False
        elif not old.healthy or old.reason:
            reason, message, healthy = REASON_RECOVERED, f"no device error for {self.quiet_period_s:g}s", True
        else:
            return None
        since = old.since
        if healthy != old.healthy:
            since = self.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        new = Health(healthy=healthy, reason=reason, message=message, since=since)
        if new == old:
            return None
        device.health = new
        level = logging.WARNING if not healthy else logging.INFO
        log.log(level, "Device health changed", extra={"device": device_id, "healthy": healthy, "reason": reason})
        return device_id, new

    def _notify(self, change: tuple[str, Health] | None) -> None:
        if change is None:
            return
        with self._lock:
            callbacks = list(self._callbacks)
        for callback in callbacks:
            callback(*change)
