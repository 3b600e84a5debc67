"""Reservations in the live scheduler: their informer, their writes, their controller.

- `api`: `ReservationAPI`, the `PodAPI` of reserve pods — "annotating" and "binding" one writes
  its Reservation (annotation, status subresource), so the scheduler's own `Binder` and
  `FailureReporter` place Reservations and report why not, as they do for pods;
- `feed`: `PendingReservations`, the Reservations to place into the queue as their reserve pods
  (handlers on the Reservation watch the Reservation plugin opens; its own feed keeps the cache's
  held Reservations), and what a Reservation that does not parse gets (a Warning Event and a
  condition);
- `controller`: the leader's status writes that follow from the cluster: owners bound onto a
  Reservation (`currentOwners`, Succeeded), expiry (Failed/Expired); and the phase metrics.
"""

from scheduler.service.reservations.api import ReservationAPI, reference
from scheduler.service.reservations.controller import ReservationController
from scheduler.service.reservations.feed import PendingReservations

__all__ = ["PendingReservations", "ReservationAPI", "ReservationController", "reference"]
