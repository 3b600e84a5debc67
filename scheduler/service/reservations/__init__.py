"""Reservations in the live scheduler: their informer, their writes, their controller.

- `api`: `ReservationAPI`, the `PodAPI` of reserve pods — "annotating" and "binding" one writes
  its Reservation (annotation, status subresource), so the scheduler's own `Binder` and
  `FailureReporter` place Reservations and report why not, as they do for pods;
- `feed`: the Reservation informer into the cache (held ones) and the queue (pending ones), and
  what a Reservation that does not parse gets (a Warning Event and a condition);
- `controller`: the leader's status writes that follow from the cluster: owners bound onto a
  Reservation (`currentOwners`, Succeeded), expiry (Failed/Expired); and the phase metrics.
"""

from scheduler.service.reservations.api import ReservationAPI, reference
from scheduler.service.reservations.controller import ReservationController
from scheduler.service.reservations.feed import ReservationFeed

__all__ = ["ReservationAPI", "ReservationController", "ReservationFeed", "reference"]
