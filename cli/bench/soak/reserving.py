"""The soak's Reservations: GPUs set aside for pods it creates once they are, and some never used.

Every `RESERVE_EVERY_S` (jittered as the kills) while fewer than `MAX_LIVE` of its Reservations have
not ended (and their owner pods are few), one of `KINDS`: a whole GPU or half of one, owned through
a label the soak's owner pods then carry (`soak.tessera.dev/reservation: NAME`), with a ttl; "used"
kinds get one or two owner pods once Available (two: only one may consume an allocateOnce
Reservation, the other is placed as any pod), the others are never used — some with a short ttl, so
they expire during the run. Owner pods are recorded as the workload's are (`observe.Record`:
acknowledged creates, deletes), live `OWNER_LIFETIME_S` once bound and are then deleted; every
Reservation is deleted `KEEP_S` after its creation, when it has long ended (used or expired). The
invariants over them are in `invariants/reservations.py` and the devices family; they read the
objects, not this record. Requests that fail (a component is being restarted) are retried on the
next tick.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from apis.extension import names
from cli.bench.soak.observe import Record
from cli.bench.soak.tolerations import lost_node_tolerations
from cli.bench.soak.workload import HALF, NAMESPACE, PART_OF, Shape
from cli.launchers.scheduler import pod_manifest
from kube import errors, resources
from kube.client import Client

__all__ = ["GPUS_RESERVING", "KINDS", "MAX_LIVE", "ReservationKind", "Reserving", "reservation_manifest"]

log = logging.getLogger(__name__)

OWNER_LABEL: Final = "soak.tessera.dev/reservation"


@dataclass(frozen=True, slots=True)
class ReservationKind:
    #: What it reserves (and its owners ask for), its name and weight among the kinds.
    shape: Shape
    ttl_s: float
    #: Owner pods created once it is Available (0: never used).
    owners: tuple[int, int] = (0, 0)

    @property
    def name(self) -> str:
        return self.shape.name

    @property
    def requests(self) -> Mapping[str, str]:
        return self.shape.requests


_WHOLE: Final = {names.NVIDIA_GPU: "1"}
KINDS: Final = (
    ReservationKind(Shape("whole-used", 3, _WHOLE, 1.0), 90.0, owners=(1, 2)),
    ReservationKind(Shape("half-used", 3, HALF, 0.5), 90.0, owners=(1, 2)),
    ReservationKind(Shape("whole-expiring", 2, _WHOLE, 1.0), 15.0),
    ReservationKind(Shape("half-unused", 1, HALF, 0.5), 45.0),
)
RESERVE_EVERY_S: Final = 8.0
#: Reservations not ended (Pending or Available) at once; owner pods at most twice as many.
MAX_LIVE: Final = 2
#: Give up on owners when a Reservation is not Available this long after its creation.
AVAILABLE_WITHIN_S: Final = 30.0
OWNER_LIFETIME_S: Final = 15.0
KEEP_S: Final = 120.0
#: GPUs the live Reservations and their owners may take at once: kept out of the pods' budget.
GPUS_RESERVING: Final = MAX_LIVE * 3.0
_TICK_S: Final = 1.0
_BASE: Final = {names.CPU: "10m", names.MEMORY: "16Mi"}


def reservation_manifest(name: str, kind: ReservationKind, toleration_s: float) -> dict[str, Any]:
    """A Reservation of `kind.requests` in the soak's namespace, owned by pods labelled for it."""
    template = pod_manifest(name, {**_BASE, **kind.requests}, namespace=NAMESPACE)
    template["spec"]["tolerations"] = lost_node_tolerations(toleration_s)
    return {
        "apiVersion": f"{names.SCHEDULING_DOMAIN}/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": name, "labels": {**PART_OF, "soak.tessera.dev/reservation-kind": kind.name}},
        "spec": {
            "template": {"metadata": {"namespace": NAMESPACE}, "spec": template["spec"]},
            "owners": [{"labelSelector": {"matchLabels": {OWNER_LABEL: name}}}],
            "ttl": f"{kind.ttl_s:g}s",
        },
    }


@dataclass(slots=True)
class _Item:
    name: str
    kind: ReservationKind
    created: float
    #: Owner pods created (keys), and whether that step is over (made, or given up).
    owners: list[str] = field(default_factory=list)
    owners_done: bool = False
    phase: str = "Pending"


class Reserving:
    """See the module docstring; `run` until `stop` (from its own thread)."""

    def __init__(self, client: Client, record: Record, *, seed: int, toleration_s: float) -> None:
        self._reservations = client.resource(names.RESERVATIONS)
        self._pods = client.resource(resources.PODS)
        self._record = record
        self._toleration = toleration_s
        self._rng = random.Random(f"reservations-{seed}")
        self._stop = threading.Event()
        self._items: list[_Item] = []
        self._owners: dict[str, float] = {}  # owner pod key → when created
        self._serial = 0
        self.created = 0
        self.owners_created = 0
        #: Phases the soak saw its Reservations end in (Succeeded: used; Failed: expired).
        self.ended: dict[str, int] = {}

    def run(self) -> None:
        next_at = time.time() + self._rng.uniform(0.5, 1.5) * RESERVE_EVERY_S
        while not self._stop.wait(_TICK_S):
            self.step(time.time(), creating=time.time() >= next_at)
            if time.time() >= next_at:
                next_at = time.time() + self._rng.uniform(0.5, 1.5) * RESERVE_EVERY_S

    def stop(self) -> None:
        self._stop.set()

    def step(self, now: float, *, creating: bool) -> None:
        for item in list(self._items):
            self._follow(item, now)
        for key, created in list(self._owners.items()):
            bound = self._record.bound_at.get(key)
            if (bound is not None and now >= bound + OWNER_LIFETIME_S) or now >= created + KEEP_S:
                self._delete_pod(key)
        live = sum(1 for i in self._items if i.phase not in ("Succeeded", "Failed"))
        if creating and live < MAX_LIVE and len(self._owners) < 2 * MAX_LIVE:
            self._create(now)

    def _create(self, now: float) -> None:
        kind = self._rng.choices(KINDS, weights=[k.shape.weight for k in KINDS])[0]
        self._serial += 1
        name = f"soak-rsv-{kind.name}-{self._serial}"
        try:
            self._reservations.create(reservation_manifest(name, kind, self._toleration))
        except errors.APIError as e:
            log.info("Reservation create failed", extra={"reservation": name, "error": str(e)})
            return
        self.created += 1
        self._items.append(_Item(name, kind, now, owners_done=not kind.owners[1]))

    def _follow(self, item: _Item, now: float) -> None:
        if now >= item.created + KEEP_S:
            try:
                self._reservations.delete(item.name)
            except errors.NotFound:
                pass
            except errors.APIError:
                return  # next tick
            self._items.remove(item)
            return
        if item.phase in ("Succeeded", "Failed"):
            return
        try:
            phase = str((self._reservations.get(item.name).get("status") or {}).get("phase") or "Pending")
        except errors.APIError:
            return
        item.phase = phase
        if phase in ("Succeeded", "Failed"):
            self.ended[phase] = self.ended.get(phase, 0) + 1
        if item.owners_done:
            return
        if phase == "Available":
            self._create_owners(item)
        elif now >= item.created + AVAILABLE_WITHIN_S:
            item.owners_done = True

    def _create_owners(self, item: _Item) -> None:
        item.owners_done = True
        for i in range(self._rng.randint(*item.kind.owners)):
            name = f"{item.name}-owner-{i}"
            key = f"{NAMESPACE}/{name}"
            manifest = pod_manifest(
                name,
                {**_BASE, **item.kind.requests},
                namespace=NAMESPACE,
                labels={**PART_OF, OWNER_LABEL: item.name},
            )
            manifest["spec"]["tolerations"] = lost_node_tolerations(self._toleration)
            self._record.sending_create(key)
            self._owners[key] = time.time()
            try:
                created = self._pods.create(manifest, namespace=NAMESPACE)
            except errors.APIError as e:
                log.info("Owner pod create failed", extra={"pod": key, "error": str(e)})
                continue  # it may exist anyway: deleted with the others
            self._record.acknowledge(key, created["metadata"]["uid"])
            self.owners_created += 1
            item.owners.append(key)

    def _delete_pod(self, key: str) -> None:
        namespace, name = key.split("/", 1)
        self._record.deleting(key)
        try:
            self._pods.delete(name, namespace=namespace)
        except errors.NotFound:
            pass
        except errors.APIError:
            return  # next tick
        del self._owners[key]

    def delete_all(self) -> None:
        """At the end: the owner pods (their devices back to the pods' fit model)."""
        for key in list(self._owners):
            self._delete_pod(key)
