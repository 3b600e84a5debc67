"""The node-local device ledger: which pods on this node hold which device shares, kept current.

The scheduler decides allocations; the node is the last line of defence against two pods given
the same GPU (a pod created with `spec.nodeName` and a hand-written annotation, a scheduler bug,
two schedulers). The hook server asks this ledger before a container is created
(`agent.hooks.collision`), and the ledger answers with the pure check (`check.collisions`) over
what it holds. A pod holds its `device-allocated` devices while either

- the hook server admitted one of its containers and that container has not stopped since
  (`admit`, `container_stopped`, `sandbox_stopped`) — so two creates racing before the informer
  catches up cannot both pass: check and record happen under one lock; or
- the API server says its containers run (phase `Running`, or a container with a runtime id), as
  the agent's pod informer reports it (`pod_changed`) — which is how the ledger is rebuilt after
  an agent restart;
- or, for a DRA ResourceClaim the agent prepared as kubelet's DRA plugin (`agent.dra`), from
  `prepare` to `unprepare` (`restore` after a restart, from the plugin's checkpoint). A claim is
  keyed `claim_key(uid)`, apart from pods: the pods using it carry no `device-allocated`
  annotation, so nothing is counted twice.

A pod that finished (`Succeeded`/`Failed`) or was deleted frees its share at once, whatever the
hook server admitted; so does a pod whose sandbox stopped, until one of its containers is admitted
again (the informer may still say `Running` for a moment). A pod the hook server refused never
holds anything, so it cannot block the pods that were there first when their containers restart.

`ready` is false until the informer has delivered its first list: until then the ledger does not
know what runs here, and the plugin answers "retry" rather than admitting blindly. Thread-safe:
informer callbacks and hook calls come from different threads.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from agent.ledger.check import collisions
from agent.ledger.model import Claim, Collision, NodeSlots
from apis.crds.device import DeviceType
from apis.errors import AnnotationError
from apis.extension import allocation
from apis.extension.allocation import DeviceAllocations
from apis.k8s.core import Pod
from kube.logs import V

__all__ = ["DeviceLedger", "claim_key", "counted", "pod_key"]

log = logging.getLogger(__name__)

#: Device types the ledger counts (those the node has an inventory of).
_COUNTED = (DeviceType.GPU, DeviceType.RDMA)
_PHASE_RUNNING = "Running"


def pod_key(uid: str, namespace: str, name: str) -> str:
    """How the ledger identifies a pod: its UID, or `namespace/name` where no UID is known."""
    return uid or f"{namespace}/{name}"


def claim_key(uid: str) -> str:
    """How the ledger identifies a prepared DRA ResourceClaim (never a pod's key)."""
    return f"resourceclaim:{uid}"


@dataclass(slots=True)
class _Entry:
    claim: Claim
    #: Containers the hook server admitted that have not stopped since.
    containers: set[str] = field(default_factory=set)
    #: The API server says the pod's containers run.
    running: bool = False
    #: A DRA claim the plugin prepared and has not unprepared.
    prepared: bool = False

    @property
    def holds(self) -> bool:
        return self.running or self.prepared or bool(self.containers)


class DeviceLedger:
    """Device shares held on this node, from the hook server and the pod informer (see module)."""

    def __init__(self, *, synced: Callable[[], bool] = lambda: True) -> None:
        """`synced` says whether the pod informer has delivered its first list (`Informer.has_synced`)."""
        self._synced = synced
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}
        #: Pods whose sandbox stopped while the API server still said they run.
        self._stopped: set[str] = set()

    @property
    def ready(self) -> bool:
        """Whether the ledger knows what runs on the node (the informer's first list is in)."""
        return self._synced()

    def held(self) -> dict[str, Claim]:
        """Pod key -> the devices it holds now (a copy)."""
        with self._lock:
            return self._held()

    # --- the hook server ---------------------------------------------------------------------------
    def admit(self, claim: Claim, *, container: str, node: NodeSlots) -> tuple[Collision, ...]:
        """Check `claim` for `container` against the holders and, if nothing collides, record it.

        Returns the collisions (nothing is recorded then); empty means admitted. Check and record
        are atomic, so of two racing claims on the last share exactly one is admitted.
        """
        with self._lock:
            found = collisions(claim, self._held(), node)
            if found:
                return found
            entry = self._entries.get(claim.key)
            if entry is None:
                entry = self._entries[claim.key] = _Entry(claim)
            entry.claim = claim
            entry.containers.add(container)
            self._stopped.discard(claim.key)
        return ()

    def container_stopped(self, key: str, container: str) -> None:
        """The container stopped: it no longer holds the pod's devices by itself. Idempotent."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return
            entry.containers.discard(container)
            self._drop_if_free(key, entry)

    def sandbox_stopped(self, key: str) -> None:
        """The pod's sandbox stopped, and with it all its containers: the pod holds nothing. Idempotent."""
        with self._lock:
            entry = self._entries.pop(key, None)
            if entry is not None and entry.running:
                self._stopped.add(key)  # cleared when the informer sees it go, or a container is admitted

    # --- the DRA plugin ----------------------------------------------------------------------------
    def prepare(self, claim: Claim, *, node: NodeSlots) -> tuple[Collision, ...]:
        """Check a DRA claim being prepared against every holder and, if nothing collides, hold
        it until `unprepare`. Atomic as `admit`; a claim already prepared is admitted again
        without a check (kubelet's calls are idempotent)."""
        with self._lock:
            entry = self._entries.get(claim.key)
            if entry is not None and entry.prepared:
                return ()
            found = collisions(claim, self._held(), node)
            if found:
                return found
            self._entries[claim.key] = _Entry(claim, prepared=True)
        return ()

    def restore(self, claim: Claim) -> None:
        """Hold a claim prepared before a restart (from the plugin's checkpoint), unchecked: it
        was admitted then, and what it holds must count before anything new is admitted."""
        with self._lock:
            self._entries[claim.key] = _Entry(claim, prepared=True)

    def unprepare(self, key: str) -> None:
        """The claim was unprepared and holds nothing any more. Idempotent."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.prepared:
                del self._entries[key]

    # --- the pod informer --------------------------------------------------------------------------
    def pod_changed(self, pod: Pod) -> None:
        """Informer add/update: the pod as the API server has it now."""
        key = pod_key(pod.uid, pod.namespace, pod.name)
        devices = None if pod.is_terminal else _counted(pod)
        with self._lock:
            if devices is None:
                self._forget(key)
                return
            running = (pod.phase == _PHASE_RUNNING or bool(pod.container_ids)) and key not in self._stopped
            entry = self._entries.get(key)
            if entry is None:
                if not running:
                    return
                entry = self._entries[key] = _Entry(Claim(key, pod.key, devices))
            entry.claim = Claim(key, pod.key, devices)
            entry.running = running
            self._drop_if_free(key, entry)

    def pod_updated(self, old: Pod, new: Pod) -> None:
        """Informer update (the signature `Informer.add_handlers` calls)."""
        self.pod_changed(new)

    def pod_deleted(self, pod: Pod) -> None:
        """Informer delete: the pod is gone and frees what it held."""
        with self._lock:
            self._forget(pod_key(pod.uid, pod.namespace, pod.name))

    # --- under the lock ----------------------------------------------------------------------------
    def _held(self) -> dict[str, Claim]:
        return {key: entry.claim for key, entry in self._entries.items() if entry.holds}

    def _forget(self, key: str) -> None:
        self._entries.pop(key, None)
        self._stopped.discard(key)

    def _drop_if_free(self, key: str, entry: _Entry) -> None:
        if not entry.holds:
            del self._entries[key]


def counted(devices: DeviceAllocations) -> DeviceAllocations:
    """The allocations the ledger counts (GPUs and RDMA devices); empty when there are none."""
    return {dtype: allocs for dtype, allocs in devices.items() if dtype in _COUNTED and allocs}


def _counted(pod: Pod) -> DeviceAllocations | None:
    """The pod's counted allocations; None when it has none or its annotation does not parse
    (the hook server refuses its containers, so it holds nothing here)."""
    try:
        decoded = allocation.from_pod_annotations(pod.annotations, obj=f"pod {pod.key}")
    except AnnotationError as e:
        log.log(V(4), "Pod's device allocation does not parse; not counted", extra={"pod": pod.key, "err": str(e)})
        return None
    return counted(decoded) or None
