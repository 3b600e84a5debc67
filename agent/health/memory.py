"""GPU faults that wait for a reset outlive the agent: kept on disk, put back at start, cleared by an operator.

Why: a GPU that raised XID 79 (fallen off the bus), 48 (double-bit ECC) or another `reset` XID
(agent/health/xid.py) stays broken until it is reset. The tracker knows that only in memory; an
agent restarted by a crash, an OOM kill, an upgrade or `kill -9` would report the GPU healthy, the
controller would offer it again and the scheduler would bind pods to it.

Why two records, both kept:
- the node's state file (agent/health/statefile.py), rewritten on every change of a reset-waiting
  fault before the Device CR reporter is woken for it: the complete and freshest record, but only
  as durable as the node's filesystem;
- the node's Device CR on the API server, which the reporter reads before its first write: it
  survives a fresh filesystem (a re-imaged node, a DaemonSet pod whose state directory was not a
  hostPath), but it may lag the file by one write and only shows a fault whose condition names
  the XID.

So at start (`start`, then `adopt` with the reporter's first read):
1. a state file that parses is the truth, absences included: a reset or an operator's clear
   reaches the file before the CR, so a CR condition the file lacks may be one the agent was
   about to remove;
2. no file, or one that does not parse (a warning): the Device CR's reset-XID conditions. The
   reporter writes nothing before it has read the CR, so the restarted agent never reports the
   GPU healthy in between, even when the API server is down at start;
3. neither: every GPU starts healthy.
Faults are matched by GPU UUID (agent/health/restore.py); a fault of a GPU the node no longer has
is dropped. Each restored fault is logged and becomes a Warning Event `GPUFaultRestored` on the
Node (`kubectl describe node` shows it).

What ends a fault that waits for a reset, restored or not: a reset the health monitor sees (NVML
loses the GPU and then it answers again), or an operator (`clear`: POST /health/clear?minor=N on
the agent, agent/devices/healthclear.py), logged and a Normal Event `GPUFaultCleared` on the Node.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from agent.discovery.model import GPU
from agent.health import restore
from agent.health.statefile import StateFile, StateFileError
from agent.health.tracker import Health, HealthTracker
from apis.crds.device import Device
from kube.events import EventRecorder, ObjectReference
from kube.logs import V

__all__ = [
    "EVENT_CLEARED",
    "EVENT_RESTORED",
    "Cleared",
    "FaultMemory",
    "NodeEventRecorder",
    "NodeEvents",
]

log = logging.getLogger(__name__)

EVENT_RESTORED: Final = "GPUFaultRestored"
EVENT_CLEARED: Final = "GPUFaultCleared"


class NodeEvents(Protocol):
    """Events on this agent's Node: what an operator must see."""

    def warning(self, reason: str, message: str) -> None: ...

    def normal(self, reason: str, message: str) -> None: ...


class NodeEventRecorder:
    """`NodeEvents` through a `kube.EventRecorder`. The reference carries the node name as uid, as
    kubelet's node events do (`kubectl describe node` finds both kinds)."""

    def __init__(self, recorder: EventRecorder, node_name: str) -> None:
        self._recorder = recorder
        self._ref = ObjectReference("Node", node_name, uid=node_name, api_version="v1")

    def warning(self, reason: str, message: str) -> None:
        self._recorder.warning(self._ref, reason, message)

    def normal(self, reason: str, message: str) -> None:
        self._recorder.normal(self._ref, reason, message)


@dataclass(frozen=True, slots=True)
class Cleared:
    """What an operator's clear did to one GPU."""

    gpu: GPU
    before: Health
    after: Health
    #: False when the GPU was healthy already (nothing to clear).
    cleared: bool


class FaultMemory:
    """The reset-waiting faults of one node's GPUs across agent restarts; see the module docstring.

    Thread-safe: the tracker calls `_save` from the health loop, the HTTP server's threads (a
    clear) and the reporter's (`adopt`)."""

    def __init__(
        self,
        tracker: HealthTracker,
        gpus: Sequence[GPU],
        state: StateFile,
        *,
        events: NodeEvents,
        node_name: str,
    ) -> None:
        self._tracker = tracker
        self._gpus = tuple(gpus)
        self._state = state
        self._events = events
        self._node = node_name
        self._lock = threading.Lock()
        #: True until the Device CR has been read, when no usable state file was found.
        self._await_cr = False
        #: GPUs an operator cleared before the CR was read: the CR's older word must not undo that.
        self._cleared: set[str] = set()

    def start(self) -> None:
        """Start persisting changes and restore what the state file holds (rule 1). Call once,
        before the health monitor and the reporter run. Never raises for a missing, unreadable or
        corrupted file or an unusable state directory: the agent runs on, logging why."""
        self._tracker.subscribe_resets(self._save)
        self._check_writable()
        try:
            local = self._state.load()
        except StateFileError as e:
            log.warning(
                "Agent state file is unreadable; GPU faults are restored from the Device CR instead",
                extra={"node": self._node, "path": str(self._state.path), "error": e.reason},
            )
            local = None
        if local is None:
            log.log(V(2), "No agent state file: GPU faults come from the Device CR", extra={"node": self._node})
            self._await_cr = True
            return
        self._apply(restore.plan(self._gpus, local, restore.Source.STATE_FILE))

    def adopt(self, server: Device | None) -> None:
        """The Device CR as the reporter first read it (None: there is none). Restores its faults
        unless a state file was the truth (rule 2). The reporter calls it once, before it writes."""
        with self._lock:
            if not self._await_cr:
                return
            self._await_cr = False
            cleared = set(self._cleared)
        faults = restore.faults_in_cr(server) if server is not None else {}
        faults = {uuid: fault for uuid, fault in faults.items() if uuid not in cleared}
        self._apply(restore.plan(self._gpus, faults, restore.Source.DEVICE_CR))

    def clear(self, gpu: GPU, *, by: str = "") -> Cleared:
        """An operator's override: `gpu` is healthy again at once, its reset wait and quiet period
        forgotten (a lasting problem such as GPULost still holds). Persisted, logged, and a Node
        Event when there was something to clear, naming `by` (the user the API server named)
        when given. Idempotent."""
        before = self._tracker.health(gpu.uuid)
        message = f"cleared by an operator (was {before.reason}: {before.message})"
        with self._lock:
            self._cleared.add(gpu.uuid)
        cleared = self._tracker.clear_faults(gpu.uuid, message=message)
        after = self._tracker.health(gpu.uuid)
        if cleared:
            fields = {"node": self._node, "gpu": gpu.uuid, "minor": gpu.minor, "was": before.reason, "user": by or "-"}
            log.warning("Operator cleared a GPU fault", extra={**fields, "healthy": after.healthy})
            outcome = "it is offered again" if after.healthy else f"still unhealthy: {after.reason}"
            who = f"an operator ({by})" if by else "an operator"
            self._events.normal(
                EVENT_CLEARED, f"GPU {gpu.minor} ({gpu.uuid}): {before.reason} cleared by {who}; {outcome}"
            )
        return Cleared(gpu, before, after, cleared)

    def _apply(self, plan: restore.Plan) -> None:
        for uuid, fault in plan.dropped:
            log.info(
                "Forgetting the fault of a GPU this node no longer has",
                extra={"node": self._node, "gpu": uuid, "reason": fault.reason},
            )
        for item in plan.restore:
            gpu, fault = item.gpu, item.fault
            self._tracker.restore(gpu.uuid, fault)
            log.warning(
                "Restored a GPU fault from before the agent restarted",
                extra={
                    "node": self._node,
                    "gpu": gpu.uuid,
                    "minor": gpu.minor,
                    "reason": fault.reason,
                    "since": fault.since,
                    "source": item.source.value,
                },
            )
            self._events.warning(
                EVENT_RESTORED,
                f"GPU {gpu.minor} ({gpu.uuid}) is still unhealthy after the agent restarted: "
                f"{fault.message or fault.reason} (since {fault.since or 'unknown'}, from the {item.source.value}). "
                f"A GPU reset ends it, or an operator: POST /health/clear?minor={gpu.minor} on the agent",
            )
        if plan.dropped:
            self._save()  # each restore saved already; this forgets the dropped ones too

    def _save(self) -> None:
        """Write the tracker's reset-waiting faults. On failure the stale file is removed, so the
        next start trusts the Device CR rather than an old file (rule 1 would otherwise hide a
        newer fault)."""
        with self._lock:
            faults = self._tracker.reset_faults()
            try:
                self._state.save(faults)
            except OSError as e:
                log.error(
                    "Cannot write the agent state file; a restart will restore GPU faults from the Device CR",
                    extra={"node": self._node, "path": str(self._state.path), "error": str(e)},
                )
                try:
                    self._state.discard()
                except OSError as gone:
                    log.error(
                        "Cannot remove the stale agent state file",
                        extra={"node": self._node, "path": str(self._state.path), "error": str(gone)},
                    )
                return
            log.log(V(4), "Saved the agent state file", extra={"node": self._node, "faults": len(faults)})

    def _check_writable(self) -> None:
        """Say at start, not at the first fault, when the state directory cannot hold the file."""
        try:
            self._state.directory.mkdir(parents=True, exist_ok=True)
            if not os.access(self._state.directory, os.W_OK):
                raise PermissionError(f"no write permission on {self._state.directory}")
        except OSError as e:
            log.error(
                "Agent state directory is not usable; GPU faults survive a restart only through the Device CR",
                extra={"node": self._node, "path": str(self._state.directory), "error": str(e)},
            )
