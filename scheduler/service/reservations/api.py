"""`ReservationAPI`: the scheduler's pod writes (`PodAPI`), done to the Reservation a reserve pod
stands for.

A Reservation is scheduled as its reserve pod (`Reservation.reserve_pod()`: the Reservation's
name and UID, the template's namespace), so the `Binder` and the `FailureReporter` that place
pods and report why not serve Reservations unchanged with this API:

- `annotate` writes the Reservation's annotations (PreBind's, as for a pod: the record of the
  devices it holds among them, so a restarted scheduler reads back what the Reservation holds);
- `bind` writes its status through the status subresource: Available, `nodeName`, the Scheduled
  and Ready conditions, `allocatable` (`scheduler.core.reservations.placed`), conditional on the
  version read, and 409 Conflict when it is placed already;
- `set_condition` writes the Scheduled condition (Pending; Unschedulable and why);
- `get` reads it back as its reserve pod, for a binding whose outcome was lost.

Every write carries the UID as a precondition, as for pods. Reservations are never nominated
nor evicted: preemption does not run for them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from apis.crds.reservation import GROUP_VERSION, KIND, Reservation
from apis.extension import names
from apis.k8s.core import Pod
from apis.k8s.meta import now_rfc3339
from kube import Client, ObjectReference, errors
from scheduler.core import reservations as transitions

__all__ = ["ReservationAPI", "reference", "reserve_pod"]


def reserve_pod(reservation: Reservation, *, scheduler_name: str) -> Pod:
    """The pod the scheduler places for `reservation`: `Reservation.reserve_pod()`, with the
    Reservation's resourceVersion (writes made for a failed attempt are conditional on it) and
    `scheduler_name` when the template names no scheduler."""
    pod = reservation.reserve_pod()
    meta = dataclasses.replace(pod.meta, resource_version=reservation.meta.resource_version)
    spec = reservation.template.get("spec")
    named = isinstance(spec, Mapping) and bool(spec.get("schedulerName"))
    return dataclasses.replace(pod, meta=meta, scheduler_name=pod.scheduler_name if named else scheduler_name)


def reference(pod: Pod) -> ObjectReference:
    """The Reservation a reserve pod stands for, as Events name it."""
    return ObjectReference(KIND, pod.name, "", pod.uid, GROUP_VERSION)


class ReservationAPI:
    """`scheduler.service.podapi.PodAPI` over Reservations (see the module docstring)."""

    def __init__(self, client: Client) -> None:
        self._api = client.resource(names.RESERVATIONS)

    def annotate(self, pod: Pod, changes: Mapping[str, str | None], *, resource_version: str = "") -> None:
        meta: dict[str, object] = {"uid": pod.uid, "annotations": dict(changes)}
        if resource_version:
            meta["resourceVersion"] = resource_version
        self._api.patch(pod.name, {"metadata": meta})

    def bind(self, pod: Pod, node: str, annotations: Mapping[str, str] | None = None) -> None:
        """A Reservation's status is a subresource that does not take metadata: its annotations
        are written first, then the placement."""
        if annotations:
            self.annotate(pod, annotations)
        current = self._read(pod.name)
        if current.uid != pod.uid:
            raise errors.Conflict(f"reservation {pod.name} was replaced (uid {current.uid})", status=409)
        if current.node_name:
            raise errors.Conflict(f"reservation {pod.name} is already placed on {current.node_name}", status=409)
        placed = transitions.placed(current, node=node, now=now_rfc3339())
        self._write_status(current, transitions.status_of(placed))

    def get(self, namespace: str, name: str) -> Pod | None:
        try:
            current = self._read(name)
        except errors.NotFound:
            return None
        return dataclasses.replace(current.reserve_pod(), node_name=current.node_name)

    def set_condition(self, pod: Pod, *, status: str, reason: str, message: str) -> None:
        current = self._read(pod.name)
        if current.uid != pod.uid or current.node_name or current.phase.terminal:
            return  # replaced, placed meanwhile, or over: the report is stale
        pending = transitions.unschedulable(current, message=message, now=now_rfc3339(), reason=reason)
        self._write_status(current, transitions.status_of(pending))

    def nominate(self, pod: Pod, node: str) -> None:
        """Reservations do not preempt: nothing to write."""

    def delete(self, pod: Pod) -> None:
        raise errors.BadRequest(f"reservation {pod.name} is not a pod and is never preempted", status=400)

    def _read(self, name: str) -> Reservation:
        """The Reservation as the API server has it. Raises kube.NotFound, or ValidationError
        when it no longer parses (the binder then leaves it assumed, as for a pod)."""
        return Reservation.from_dict(self._api.get(name))

    def _write_status(self, current: Reservation, status: Mapping[str, object]) -> None:
        meta = {"uid": current.uid, "resourceVersion": current.meta.resource_version}
        self._api.patch(current.name, {"metadata": meta, "status": dict(status)}, subresource="status")
