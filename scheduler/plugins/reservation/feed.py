"""Reservations into the scheduler's cache: the Reservation plugin's feed
(`scheduler.framework.feeds`), registered once for the scheduler's shared cache.

What each change means to the cache, and to pods waiting to be scheduled:

- a Reservation **placed and Available** (or Waiting) is held in the cache on its node
  (`ClusterCache.add_reservation`), confirming the assumption made while it was bound; when it
  was just placed (or first seen placed), `RESERVATION_PLACED` wakes its owners that wait in the
  unschedulable queue, whatever rejected them: what it holds is theirs now;
- a Reservation **pending** is only remembered (its reserve pod is nobody's owner); the live
  scheduler queues it as its reserve pod (`scheduler.service.reservations`);
- a Reservation **terminal** (Succeeded, Failed) or **deleted** holds nothing any more: it leaves
  the cache, and when it had a node `RESERVATION_RELEASED` moves the pods that waited for room.

Handlers run under the cache lock (the feed runner's rule).
"""

from __future__ import annotations

import logging
from typing import Final

from apis.crds.reservation import Reservation
from apis.extension import names
from scheduler.cache import ClusterCache
from scheduler.framework.events import ClusterEvent, EventAction, EventResource
from scheduler.framework.feeds import Feeds, Handlers, Watch

__all__ = ["RESERVATIONS", "RESERVATION_PLACED", "RESERVATION_RELEASED", "ReservationFeed"]

log = logging.getLogger(__name__)

RESERVATIONS: Final = Watch(names.RESERVATIONS, Reservation.from_dict)
#: A Reservation was placed on a node: its owners may be placed onto it.
RESERVATION_PLACED: Final = ClusterEvent(names.RESERVATIONS.kind, EventAction.ADD, "ReservationPlaced")
#: A placed Reservation holds nothing any more. It was counted as its reserve pod, so to the
#: plugins that wait for room it is a pod deletion, as an assigned pod's or an undone binding's.
RESERVATION_RELEASED: Final = ClusterEvent(EventResource.POD, EventAction.DELETE, "ReservationReleased")


class ReservationFeed:
    def __init__(self, cache: ClusterCache, feeds: Feeds) -> None:
        self._cache = cache
        self._feeds = feeds

    def register(self, key: object) -> None:
        handlers = Handlers(added=lambda r: self._changed(None, r), updated=self._changed, deleted=self._released)
        self._feeds.watch(RESERVATIONS, handlers, key=key)

    def _changed(self, old: Reservation | None, reservation: Reservation) -> None:
        if reservation.phase.terminal or reservation.meta.deletion_timestamp:
            self._released(reservation)
            return
        self._cache.add_reservation(reservation)
        if reservation.node_name and (old is None or not old.node_name):
            if old is not None:
                log.info("Reservation placed", extra={"reservation": reservation.name, "node": reservation.node_name})
            self._feeds.emit(RESERVATION_PLACED, concerns=reservation.matches_owner)

    def _released(self, reservation: Reservation) -> None:
        self._cache.remove_reservation(reservation.uid)
        if reservation.node_name:
            log.info(
                "Reservation released",
                extra={
                    "reservation": reservation.name,
                    "node": reservation.node_name,
                    "phase": reservation.phase.value,
                },
            )
            self._feeds.emit(RESERVATION_RELEASED)
