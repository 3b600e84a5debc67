"""The Device CR reporter: keeps this node's `Device` on the API server equal to what the agent knows.

The agent process builds one, points `wake` at the health tracker and the discovery loop, and
starts it. Everything about writing the CR is here:

- **What** is written: `build(node_uid)`, the agent's `build_device` over the current inventory
  and health. The agent owns the spec, its own labels (GPU vendor, model, driver version,
  simulated, GPU partition policy), its annotations (NVLink peers, GPU partitions) and the owner
  reference to the Node; labels and annotations that others put on the object are kept.
- **When**: at once on `wake()` (a health change, new devices), and every `resync_interval_s` a
  full pass re-reads the CR and the Node, so edits by others, a deleted CR or a re-created Node
  (new uid) are corrected. A write happens only when the object on the server differs from the
  wanted one: a pass with nothing to change sends no write, so the CR's resourceVersion and every
  watcher stay quiet. Between full passes a wake that changes nothing sends no request at all, and
  a change is one PUT, conditional on the resourceVersion last seen.
- **Failures**: a 409 Conflict (someone wrote in between) re-reads and retries; an unreachable or
  failing API server is logged once and retried with backoff until it answers, each time with
  the newest state, so what changed during an outage is written late but never lost. A CR on the
  server that does not parse is logged and replaced.
- **First read**: before its first write the reporter reads the CR as an earlier agent left it
  and hands it to `on_first_read` (agent/health/memory.py restores GPU faults that wait for a
  reset from it); until that read succeeds nothing is written, so a restarted agent never
  overwrites what it has not seen.
- **DRA**: with `also` (agent/devices/slicewriter.py, when `--dra` is on) the same pass then
  writes the node's ResourceSlices: a device the CR marks unhealthy is tainted in its slice in
  the pass that marks it, and a failure there is retried with the pass.
- **Owner**: the owner reference carries the Node's uid when the Node exists. Without a Node the
  CR is written without one and gains it as soon as the Node appears (while the uid is unknown,
  every pass reads the Node).

Metrics: `tessera_agent_device_cr_syncs_total{result}` (created, updated, unchanged, skipped,
failed) and `tessera_agent_device_cr_report_latency_seconds` (from a wake to the CR written).
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Histogram

from apis.crds.device import Device
from apis.errors import TesseraError
from apis.extension import names
from apis.k8s.meta import ObjectMeta
from kube import errors
from kube.backoff import Backoff
from kube.client import Client
from kube.logs import V
from kube.patch import retry_on_conflict
from kube.resources import NODES

__all__ = ["OWNED_ANNOTATIONS", "OWNED_LABELS", "DeviceReporter", "SyncResult"]

log = logging.getLogger(__name__)

#: The labels the agent writes on its Device CR; any other label belongs to someone else.
OWNED_LABELS: Final = frozenset(
    {
        names.LABEL_GPU_VENDOR,
        names.LABEL_GPU_MODEL,
        names.LABEL_GPU_DRIVER_VERSION,
        names.LABEL_GPU_ISOLATION_PROVIDER,
        names.LABEL_SIMULATED,
        names.LABEL_GPU_PARTITION_POLICY,
    }
)
#: The annotations the agent writes on its Device CR (the NVLink one is `Device.nvlink`'s).
OWNED_ANNOTATIONS: Final = frozenset({names.ANNOTATION_GPU_PARTITIONS})

_BACKOFF: Final = Backoff(initial=0.5, maximum=10.0)


class SyncResult(enum.Enum):
    CREATED = "created"
    UPDATED = "updated"
    #: read from the server: already as wanted, nothing written
    UNCHANGED = "unchanged"
    #: nothing changed since the last read or write: no request sent
    SKIPPED = "skipped"


class DeviceReporter:
    """Writes `build(node_uid)` as the Device CR named `node_name`; see the module docstring.

    `sync()` is one pass (tests call it directly); `start()`/`stop()` run passes on a thread.
    `wake()` may be called from any thread and never blocks.
    """

    def __init__(
        self,
        client: Client,
        *,
        node_name: str,
        build: Callable[[str], Device],
        resync_interval_s: float = 60.0,
        registry: CollectorRegistry | None = None,
        backoff: Backoff = _BACKOFF,
        on_first_read: Callable[[Device | None], None] | None = None,
        also: Callable[[str, bool], object] | None = None,
    ) -> None:
        self.node_name = node_name
        #: Called after the CR is written in every pass with (Node uid, full): the ResourceSlice
        #: writer, so the node's DRA devices change in the same pass as its Device CR.
        self._also = also
        #: Called once with the CR the server holds (None: none, or malformed) before the first write.
        self._on_first_read = on_first_read
        self._devices = client.resource(names.DEVICES)
        self._nodes = client.resource(NODES)
        self._build = build
        self._resync_interval_s = resync_interval_s
        self._backoff = backoff
        #: The server's object as last read or written by this reporter.
        self._known: Device | None = None
        #: The Node's uid; None before the first read, "" while there is no such Node.
        self._node_uid: str | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        #: monotonic time of the oldest wake not yet answered by a pass, for the latency metric
        self._pending_since: float | None = None
        self._thread: threading.Thread | None = None
        self._syncs = Counter(
            "tessera_agent_device_cr_syncs",
            "Passes of the Device CR reporter, by result (created, updated, unchanged, skipped, failed).",
            ["result"],
            registry=registry,
        )
        for result in (*(r.value for r in SyncResult), "failed"):
            self._syncs.labels(result)  # exported as 0 from the start
        self._latency = Histogram(
            "tessera_agent_device_cr_report_latency_seconds",
            "Time from a device change (health, discovery) to the Device CR written.",
            registry=registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0),
        )

    # --- control -----------------------------------------------------------------------------------
    def wake(self) -> None:
        """Something changed: run a pass now (or as soon as the API server answers)."""
        with self._lock:
            if self._pending_since is None:
                self._pending_since = time.monotonic()
        self._wake.set()

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("device reporter already started")
        self._thread = threading.Thread(target=self._run, name="device-reporter", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop after the current pass (a request in flight may take up to the client's timeout)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # --- one pass ----------------------------------------------------------------------------------
    def sync(self, *, full: bool = True) -> SyncResult:
        """Bring the CR in line once, then whatever `also` writes. `full` re-reads the Node and
        the CR even when nothing changed.

        Raises kube.APIError when the API server fails (after retrying conflicts); the next call
        starts over from the server's state.
        """
        result = self._sync_cr(full=full)
        if self._also is not None:
            self._also(self._node_uid or "", full)
        return result

    def _sync_cr(self, *, full: bool) -> SyncResult:
        if self._on_first_read is not None:
            self._first_read(self._on_first_read)
        if full or not self._node_uid:
            self._node_uid = self._read_node_uid()
        wanted = self._build(self._node_uid)
        known = self._known
        if not full and known is not None:
            if _owned(known) == _owned(wanted):
                return SyncResult.SKIPPED
            try:  # optimistic: one PUT over what was last seen; 409 if anyone wrote since
                return self._replace(known.meta, wanted)
            except (errors.Conflict, errors.NotFound) as e:
                log.log(
                    V(4),
                    "Device CR changed on the server; re-reading",
                    extra={"device": self.node_name, "error": str(e)},
                )
        return retry_on_conflict(lambda: self._write(wanted))

    def _first_read(self, on_first_read: Callable[[Device | None], None]) -> None:
        """Read the CR an earlier agent left and hand it over, once. Raises kube.APIError (the pass
        fails and is retried) when the server does not answer."""
        try:
            current = self._parse(self._devices.get(self.node_name))
        except errors.NotFound:
            current = None
        self._on_first_read = None
        on_first_read(current)

    def _read_node_uid(self) -> str:
        try:
            node = self._nodes.get(self.node_name)
        except errors.NotFound:
            if self._node_uid != "":
                log.info("Node not found: Device CR has no owner reference yet", extra={"node": self.node_name})
            return ""
        uid = (node.get("metadata") or {}).get("uid")
        return uid if isinstance(uid, str) else ""

    def _write(self, wanted: Device) -> SyncResult:
        """Read the CR, then create it, leave it as it is, or replace it with `wanted`."""
        try:
            raw = self._devices.get(self.node_name)
        except errors.NotFound:
            self._known = Device.from_dict(self._devices.create(wanted.to_dict()))
            log.info("Created Device CR", extra=self._summary(self._known))
            return SyncResult.CREATED
        current = self._parse(raw)
        if current is not None and _same(current, _merged(current.meta, wanted)):
            self._known = current
            return SyncResult.UNCHANGED
        return self._replace(current.meta if current is not None else _server_meta(raw), wanted)

    def _replace(self, server: ObjectMeta, wanted: Device) -> SyncResult:
        """PUT `wanted` over the object `server` describes (conditional on its resourceVersion)."""
        self._known = Device.from_dict(self._devices.update(_merged(server, wanted).to_dict()))
        log.log(V(2), "Updated Device CR", extra=self._summary(self._known))
        return SyncResult.UPDATED

    def _parse(self, raw: Mapping[str, Any]) -> Device | None:
        try:
            return Device.from_dict(raw)
        except TesseraError as e:
            log.warning(
                "Device CR on the API server is malformed; replacing it",
                extra={"device": self.node_name, "error": str(e)},
            )
            return None

    @staticmethod
    def _summary(device: Device) -> dict[str, object]:
        unhealthy = [f"{d.type.value}{d.minor}" for d in device.devices if not d.health]
        return {
            "device": device.meta.name,
            "devices": len(device.devices),
            "unhealthy": ",".join(unhealthy),
            "resourceVersion": device.meta.resource_version,
        }

    # --- the loop ----------------------------------------------------------------------------------
    def _run(self) -> None:
        next_full = 0.0
        delays: Iterator[float] | None = None
        while not self._stop.is_set():
            self._wake.clear()
            with self._lock:
                pending, self._pending_since = self._pending_since, None
            full = delays is not None or time.monotonic() >= next_full
            try:
                result = self.sync(full=full)
            except Exception as e:  # the loop boundary: log, back off, try again with the newest state
                with self._lock:
                    if self._pending_since is None:
                        self._pending_since = pending
                first = delays is None
                delays = delays or self._backoff.delays()
                delay = next(delays)
                self._syncs.labels("failed").inc()
                self._log_failure(e, first=first, delay=delay)
                self._stop.wait(delay)
                continue
            if delays is not None:
                log.info("Device CR reporting works again", extra={"device": self.node_name, "result": result.value})
                delays = None
            self._syncs.labels(result.value).inc()
            if pending is not None and result in (SyncResult.CREATED, SyncResult.UPDATED):
                self._latency.observe(time.monotonic() - pending)
            if full:
                next_full = time.monotonic() + self._resync_interval_s
            self._wake.wait(max(0.0, next_full - time.monotonic()))

    def _log_failure(self, error: Exception, *, first: bool, delay: float) -> None:
        fields = {"device": self.node_name, "error": str(error), "retryIn": f"{delay:.1f}s"}
        if not isinstance(error, errors.APIError):
            log.error("Device CR pass failed; retrying", extra=fields, exc_info=error)
        elif first:
            log.warning("Cannot write Device CR; retrying until the API server answers", extra=fields)
        else:
            log.log(V(4), "Cannot write Device CR; retrying", extra=fields)


def _owned(device: Device) -> tuple[object, ...]:
    """The parts of a Device the agent decides."""
    labels = {k: v for k, v in device.meta.labels.items() if k in OWNED_LABELS}
    annotations = {k: v for k, v in device.meta.annotations.items() if k in OWNED_ANNOTATIONS}
    return device.devices, device.nvlink, labels, annotations, device.meta.owner_references


def _merged(server: ObjectMeta, wanted: Device) -> Device:
    """`wanted` with the server object's resourceVersion, annotations and labels others own."""
    others = {k: v for k, v in server.labels.items() if k not in OWNED_LABELS}
    other_annotations = {k: v for k, v in server.annotations.items() if k not in OWNED_ANNOTATIONS}
    meta = dataclasses.replace(
        wanted.meta,
        labels={**others, **wanted.meta.labels},
        annotations={**other_annotations, **wanted.meta.annotations},
        resource_version=server.resource_version,
    )
    return dataclasses.replace(wanted, meta=meta)


def _same(current: Device, wanted: Device) -> bool:
    return (
        current.devices == wanted.devices
        and current.nvlink == wanted.nvlink
        and dict(current.meta.labels) == dict(wanted.meta.labels)
        and dict(current.meta.annotations) == dict(wanted.meta.annotations)
        and current.meta.owner_references == wanted.meta.owner_references
    )


def _server_meta(raw: Mapping[str, Any]) -> ObjectMeta:
    """The server object's metadata; from a malformed object at least its resourceVersion."""
    try:
        return ObjectMeta.from_dict(raw.get("metadata"))
    except TesseraError:
        meta = raw.get("metadata")
        rv = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
        return ObjectMeta(resource_version=rv if isinstance(rv, str) else "")
