"""GPU health from NVML: critical XID events, and GPUs that stop answering.

`NVMLWatcher` registers every known GPU for XID events on one NVML event set. `poll` waits for
the next event (returning at once when one comes, so an XID reaches the tracker within
milliseconds) and applies the XID table: application XIDs are only counted, others are faults,
some needing a reset. `probe` (once a second, from the health loop) asks each GPU for its UUID:
a GPU that no longer answers is a `GPULost` problem; when it answers again it has been reset
(`reset_seen`) and its events are registered anew. Subscribers to `on_xid` see every XID, ignored
or not (the metrics collector counts them).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from agent.discovery.model import GPU
from agent.discovery.nvmllib import NVML, EventSet, Handle, HandleCache, NVMLCallError
from agent.health import xid as xids
from agent.health.tracker import HealthTracker
from kube.logs import V

__all__ = ["REASON_GPU_LOST", "NVMLWatcher", "XidCallback"]

log = logging.getLogger(__name__)

REASON_GPU_LOST = "GPULost"
_LOST_SOURCE = "nvml-lost"

XidCallback = Callable[[GPU, int], None]


class NVMLWatcher:
    """Not thread-safe: `poll` and `probe` run on the health loop's thread."""

    def __init__(self, nvml: NVML, gpus: Sequence[GPU], tracker: HealthTracker, handles: HandleCache) -> None:
        self._nvml = nvml
        self._gpus = {g.uuid: g for g in gpus}
        self._tracker = tracker
        self._handles = handles
        self._by_key: dict[object, str] = {}
        self._lost: set[str] = set()
        self._xid_callbacks: list[XidCallback] = []
        self._events: EventSet | None = None

    def on_xid(self, callback: XidCallback) -> None:
        self._xid_callbacks.append(callback)

    def open(self) -> None:
        """Create the event set and register every GPU. Raises NVMLCallError when NVML cannot
        create an event set; a GPU that cannot register is logged (and probed for liveness)."""
        self._events = self._nvml.create_event_set()
        for uuid in self._gpus:
            self._register(uuid)

    def close(self) -> None:
        if self._events is not None:
            events, self._events = self._events, None
            try:
                self._nvml.free_event_set(events)
            except NVMLCallError as e:
                log.warning("Cannot free the NVML event set", extra={"error": str(e)})

    def poll(self, timeout_ms: int) -> bool:
        """Wait up to `timeout_ms` for one event and handle it; True when one came.
        Raises NVMLCallError when waiting itself fails (the loop backs off)."""
        if self._events is None:
            raise RuntimeError("NVMLWatcher.poll before open")
        event = self._nvml.wait_xid(self._events, timeout_ms)
        if event is None:
            return False
        uuid = self._by_key.get(NVML.handle_key(event.handle)) or self._uuid_of(event.handle)
        targets = [self._gpus[uuid]] if uuid in self._gpus else list(self._gpus.values())
        for gpu in targets:
            self._on_xid(gpu, event.xid)
        return True

    def probe(self) -> None:
        """Ask every GPU whether it still answers; report GPUs lost and GPUs back after a reset."""
        for uuid in self._gpus:
            try:
                self._nvml.uuid(self._handles.get(uuid))
            except NVMLCallError as e:
                if e.gpu_lost:
                    self._mark_lost(uuid, e)
                else:
                    log.warning("GPU liveness check failed", extra={"gpu": uuid, "error": str(e)})
                continue
            if uuid in self._lost:
                self._lost.discard(uuid)
                log.info("GPU answers again: treating it as reset", extra={"gpu": uuid})
                self._register(uuid)
                self._tracker.clear(uuid, _LOST_SOURCE)
                self._tracker.reset_seen(uuid)

    def _register(self, uuid: str) -> None:
        if self._events is None:
            return
        try:
            handle = self._handles.get(uuid)
            self._by_key[NVML.handle_key(handle)] = uuid
            self._nvml.register_xid_events(handle, self._events, device=uuid)
        except NVMLCallError as e:
            if e.gpu_lost:
                self._mark_lost(uuid, e)
            else:
                log.warning(
                    "GPU cannot report XID events; only liveness is checked", extra={"gpu": uuid, "error": str(e)}
                )

    def _mark_lost(self, uuid: str, error: NVMLCallError) -> None:
        self._handles.forget(uuid)  # after a reset NVML may hand out a new handle
        if uuid not in self._lost:
            self._lost.add(uuid)
            log.warning("GPU lost", extra={"gpu": uuid, "error": str(error)})
        self._tracker.problem(
            uuid,
            _LOST_SOURCE,
            reason=REASON_GPU_LOST,
            message="NVML cannot reach the GPU (fell off the bus or removed)",
        )

    def _uuid_of(self, handle: Handle) -> str:
        try:
            return self._nvml.uuid(handle)
        except NVMLCallError:
            return ""  # an event NVML cannot attribute: applies to every GPU

    def _on_xid(self, gpu: GPU, xid: int) -> None:
        for callback in self._xid_callbacks:
            callback(gpu, xid)
        rule = xids.rule(xid)
        if rule.action is xids.XidAction.IGNORE:
            log.log(V(2), "Application XID; GPU stays healthy", extra={"gpu": gpu.uuid, "xid": xid})
            return
        needs_reset = rule.action is xids.XidAction.RESET
        message = f"XID {xid}: {rule.description}" + ("; waiting for a GPU reset" if needs_reset else "")
        log.warning(
            "Critical XID", extra={"gpu": gpu.uuid, "minor": gpu.minor, "xid": xid, "action": rule.action.value}
        )
        self._tracker.fault(gpu.uuid, reason=xids.reason(xid), message=message, needs_reset=needs_reset)
