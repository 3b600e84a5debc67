"""Per-device health as a small state machine with recovery, and "health changed" callbacks.

Monitors feed it two kinds of evidence, keyed by the device's CR `id` (GPU UUID, RDMA bus id):
- `fault`: an error event (an XID) — unhealthy now; with `needs_reset` also until `reset_seen`;
- `problem` / `clear`: a condition that holds for a while (GPU lost, port not ACTIVE) — unhealthy
  while it holds; `clear` counts as the last error.
A device is healthy again once no problem holds, no reset is awaited and the quiet period has
passed since its last error; `tick` (called by the health loop every second) notices that.

Faults that wait for a reset must outlive the agent process (a restarted agent that forgot them
would offer a GPU that fell off the bus again): `reset_faults()` lists them as `ResetFault`s,
`subscribe_resets` hears whenever that list changes (agent/health/memory.py writes it to disk),
and `restore` puts one back after a restart. `clear_faults` is the operator's override: the
device is healthy at once (unless a lasting problem still holds).

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
    "REASON_CLEARED",
    "REASON_RECOVERED",
    "Health",
    "HealthCallback",
    "HealthTracker",
    "ResetFault",
    "ResetsCallback",
]

log = logging.getLogger(__name__)

REASON_RECOVERED = "Recovered"
#: The reason of a device an operator declared healthy (`clear_faults`).
REASON_CLEARED = "Cleared"


@dataclass(frozen=True, slots=True)
class Health:
    healthy: bool = True
    reason: str = ""  # `Xid79`, `GPULost`, `PortNotActive`, `Recovered`; "" if never unhealthy
    message: str = ""
    since: str = ""  # RFC 3339 time of the last flip of `healthy`; "" if it never flipped


@dataclass(frozen=True, slots=True)
class ResetFault:
    """A fault that only a device reset (or an operator) ends: what must survive an agent restart."""

    reason: str  # `Xid79`
    message: str
    since: str  # RFC 3339: when the device turned unhealthy; "" if unknown


HealthCallback = Callable[[str, Health], None]
ResetsCallback = Callable[[], None]
#: What one call changed: the device, its new Health (None: unchanged), whether its ResetFault changed.
_Change = tuple[str, Health | None, bool]


@dataclass
class _Device:
    health: Health = field(default_factory=Health)
    last_error: float | None = None  # monotonic
    awaiting_reset: bool = False
    cause: tuple[str, str] = ("", "")  # reason and message of the latest error
    reset_cause: tuple[str, str] = ("", "")  # reason and message of the latest error that needs a reset
    problems: dict[str, tuple[str, str]] = field(default_factory=dict)  # source -> reason, message

    def reset_fault(self) -> ResetFault | None:
        if not self.awaiting_reset:
            return None
        return ResetFault(*self.reset_cause, since=self.health.since)


class HealthTracker:
    def __init__(self, clock: Clock, *, quiet_period_s: float = 300.0) -> None:
        self.clock = clock
        self.quiet_period_s = quiet_period_s
        self._devices: dict[str, _Device] = {}
        self._callbacks: list[HealthCallback] = []
        self._reset_callbacks: list[ResetsCallback] = []
        self._lock = threading.Lock()

    def subscribe(self, callback: HealthCallback) -> None:
        """Call `callback(device_id, health)` on every change from now on."""
        with self._lock:
            self._callbacks.append(callback)

    def subscribe_resets(self, callback: ResetsCallback) -> None:
        """Call `callback()` whenever `reset_faults()` changes, before the health subscribers hear
        of the same change (so the change is on disk before the reporter is woken for it)."""
        with self._lock:
            self._reset_callbacks.append(callback)

    def health(self, device_id: str) -> Health:
        """Current health; a device never reported on is healthy."""
        with self._lock:
            device = self._devices.get(device_id)
            return device.health if device else Health()

    def snapshot(self) -> dict[str, Health]:
        with self._lock:
            return {device_id: d.health for device_id, d in self._devices.items()}

    def reset_faults(self) -> dict[str, ResetFault]:
        """The devices waiting for a reset, and the fault each waits on."""
        with self._lock:
            faults = {device_id: d.reset_fault() for device_id, d in self._devices.items()}
        return {device_id: fault for device_id, fault in faults.items() if fault is not None}

    def fault(self, device_id: str, *, reason: str, message: str, needs_reset: bool = False) -> None:
        """An error happened now."""
        with self._lock:
            device = self._devices.setdefault(device_id, _Device())
            before = device.reset_fault()
            device.last_error = self.clock.monotonic()
            device.cause = (reason, message)
            if needs_reset:
                device.awaiting_reset, device.reset_cause = True, (reason, message)
            change = self._update(device_id, device, before)
        self._notify(change)

    def problem(self, device_id: str, source: str, *, reason: str, message: str) -> None:
        """A lasting problem holds (again). Idempotent for the same source and text."""
        with self._lock:
            device = self._devices.setdefault(device_id, _Device())
            before = device.reset_fault()
            device.problems[source] = (reason, message)
            device.last_error = self.clock.monotonic()
            device.cause = (reason, message)
            change = self._update(device_id, device, before)
        self._notify(change)

    def clear(self, device_id: str, source: str) -> None:
        """The problem from `source` no longer holds; the quiet period starts now. Idempotent."""
        with self._lock:
            device = self._devices.get(device_id)
            if device is None or device.problems.pop(source, None) is None:
                return
            before = device.reset_fault()
            device.last_error = self.clock.monotonic()
            change = self._update(device_id, device, before)
        self._notify(change)

    def reset_seen(self, device_id: str) -> None:
        """The device was reset (it went away and came back); XIDs that wait for one may recover."""
        with self._lock:
            device = self._devices.get(device_id)
            if device is None or not device.awaiting_reset:
                return
            before = device.reset_fault()
            device.awaiting_reset = False
            change = self._update(device_id, device, before)
        self._notify(change)

    def restore(self, device_id: str, fault: ResetFault) -> None:
        """Put back a reset-waiting fault from before a restart: unhealthy since `fault.since` (so
        the Device CR's condition keeps its time) until `reset_seen` or `clear_faults`. Meant for
        start-up, before the monitors run; a device already waiting for a reset is left as it is."""
        with self._lock:
            device = self._devices.setdefault(device_id, _Device())
            if device.awaiting_reset:
                return
            before = device.reset_fault()
            device.last_error = self.clock.monotonic()
            device.cause = device.reset_cause = (fault.reason, fault.message)
            device.awaiting_reset = True
            change = self._update(device_id, device, before, since=fault.since)
        self._notify(change)

    def clear_faults(self, device_id: str, *, message: str) -> bool:
        """An operator's override: forget the device's errors, a reset wait included, so that it is
        healthy at once (reason `Cleared`, `message`) — unless a lasting problem (GPU lost) still
        holds, which only new evidence ends. True when the device was unhealthy. Idempotent."""
        with self._lock:
            device = self._devices.get(device_id)
            if device is None or (device.health.healthy and not device.awaiting_reset):
                return False
            before = device.reset_fault()
            device.awaiting_reset, device.last_error = False, None
            if not device.problems:  # else the problem stays the cause, for its quiet period once it ends
                device.cause = (REASON_CLEARED, message)
            change = self._update(device_id, device, before)
        self._notify(change)
        return True

    def tick(self) -> None:
        """Re-check quiet periods; call about once a second."""
        with self._lock:
            changes = [self._update(device_id, d, d.reset_fault()) for device_id, d in self._devices.items()]
        for change in changes:
            self._notify(change)

    def _update(self, device_id: str, device: _Device, before: ResetFault | None, *, since: str = "") -> _Change | None:
        """Recompute `device.health`; the change to announce, if any. `before` is the device's
        ResetFault before the caller changed it; `since` the time of a flip to unhealthy that
        happened earlier (a restored fault), else now. Called under the lock."""
        now = self.clock.monotonic()
        old = device.health
        if device.problems:
            reason, message = next(reversed(device.problems.values()))
            healthy = False
        elif device.awaiting_reset:  # the error a reset must end names the reason, not a later lesser one
            (reason, message), healthy = device.reset_cause, False
        elif device.last_error is not None and now - device.last_error < self.quiet_period_s:
            (reason, message), healthy = device.cause, False
        elif device.cause[0] == REASON_CLEARED:
            (reason, message), healthy = device.cause, True
        elif not old.healthy:
            reason, message, healthy = REASON_RECOVERED, f"no device error for {self.quiet_period_s:g}s", True
        else:
            (reason, message), healthy = (old.reason, old.message), True
        if healthy != old.healthy:
            since = since if since and not healthy else self.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        else:
            since = old.since
        new = Health(healthy=healthy, reason=reason, message=message, since=since)
        health_changed = new != old
        if health_changed:
            device.health = new
            level = logging.WARNING if not healthy else logging.INFO
            log.log(level, "Device health changed", extra={"device": device_id, "healthy": healthy, "reason": reason})
        resets_changed = device.reset_fault() != before
        if not health_changed and not resets_changed:
            return None
        return device_id, new if health_changed else None, resets_changed

    def _notify(self, change: _Change | None) -> None:
        if change is None:
            return
        device_id, health, resets_changed = change
        with self._lock:
            reset_callbacks = list(self._reset_callbacks) if resets_changed else []
            callbacks = list(self._callbacks) if health is not None else []
        for reset_callback in reset_callbacks:
            reset_callback()
        if health is not None:
            for callback in callbacks:
                callback(device_id, health)
