"""`Feeds`: what plugins register to be fed, merged into one watch per set of objects."""

from __future__ import annotations

import pytest

from apis.crds.podgroup import PodGroup
from apis.crds.reservation import Reservation
from apis.extension import names
from scheduler.framework.events import ClusterEvent, EventAction
from scheduler.framework.feeds import Feeds, Handlers, Watch

RESERVATIONS = Watch(names.RESERVATIONS, Reservation.from_dict)
CHANGED = ClusterEvent("Reservation", EventAction.ALL, "Changed")


def test_one_watch_for_the_same_objects_with_every_handler_once_per_key() -> None:
    feeds = Feeds()
    calls: list[str] = []
    first: Handlers[Reservation] = Handlers(deleted=lambda r: calls.append("first"))
    again: Handlers[Reservation] = Handlers(deleted=lambda r: calls.append("again"))
    second: Handlers[Reservation] = Handlers(deleted=lambda r: calls.append("second"))
    follower: Handlers[Reservation] = Handlers(deleted=lambda r: calls.append("follower"), opens=False)
    feeds.watch(RESERVATIONS, first, key="cache")
    feeds.watch(RESERVATIONS, again, key="cache")  # another profile's instance: ignored
    feeds.watch(Watch(names.RESERVATIONS, Reservation.from_dict), second)
    feeds.watch(RESERVATIONS, follower)
    ((watch, handlers),) = feeds.opened()
    assert watch.resource == names.RESERVATIONS
    for handler in handlers:
        handler.deleted(None)  # type: ignore[arg-type]
    assert calls == ["first", "second", "follower"]


def test_a_watch_only_followed_is_not_opened_and_required_only_if_an_opener_requires_it() -> None:
    feeds = Feeds()
    feeds.watch(RESERVATIONS, Handlers(opens=False))
    assert feeds.opened() == []
    groups = Watch(names.POD_GROUPS, PodGroup.from_dict, required=False)
    feeds.watch(Watch(names.POD_GROUPS, PodGroup.from_dict), Handlers(opens=False))
    feeds.watch(groups, Handlers())
    ((watch, _),) = feeds.opened()
    assert watch.resource == names.POD_GROUPS and not watch.required


def test_the_same_objects_with_another_parser_is_refused() -> None:
    feeds = Feeds()
    feeds.watch(RESERVATIONS, Handlers())
    with pytest.raises(ValueError, match="reservations is watched with two parsers"):
        feeds.watch(Watch(names.RESERVATIONS, lambda raw: raw), Handlers())


def test_events_go_where_the_driver_connected_them_and_nowhere_before() -> None:
    feeds = Feeds()
    feeds.emit(CHANGED)  # offline: nothing happens
    seen: list[str] = []
    feeds.connect(sink=lambda event, concerns: seen.append(event.label), recorder=_Silent())
    feeds.emit(CHANGED)
    assert seen == ["Changed"]


class _Silent:
    def warning(self, about: object, reason: str, message: str) -> None:
        return None
