"""The plugins' feeds against the real API server: what the scheduler waits for before it schedules.

A plugin's watch is required when the scheduler must see its objects before it places anything
(a claim holding a GPU, learnt after a restart). A resource the server does not serve at all (a
kind of a newer Kubernetes, `resource.k8s.io/v1` before 1.34) has no objects to see: the
scheduler must not wait for it forever.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from apis.extension.names import GroupVersionResource
from kube import Client, EventRecorder, Informer, resources
from kube.informer import raw
from scheduler.framework.feeds import Feeds, Handlers, Watch
from scheduler.service.feeds import PluginFeeds
from scheduler.service.queue import SchedulingQueue

pytestmark = pytest.mark.integration


def _feeds(client: Client, resource: GroupVersionResource, synced: list[str]) -> PluginFeeds:
    feeds = Feeds()
    handlers: Handlers[dict[str, Any]] = Handlers(synced=lambda: synced.append("synced"))
    feeds.watch(Watch(resource, raw, required=True), handlers)
    pods: Informer[Any] = Informer(client, resources.PODS, parse=raw)
    return PluginFeeds(
        client,
        feeds,
        lock=threading.RLock(),
        queue=SchedulingQueue(interest=lambda _plugins, _event: True),
        recorder=EventRecorder(client, "test-scheduler"),
        pods=pods,
    )


@pytest.mark.parametrize(
    ("resource", "served"),
    [
        (GroupVersionResource("not-served.tessera.dev", "v1", "widgets", "Widget", True), False),
        (resources.CONFIG_MAPS, True),
    ],
    ids=["not-served", "served"],
)
def test_a_required_watch_of_a_resource_not_served_does_not_hold_scheduling_back(
    module_client: Client, resource: GroupVersionResource, served: bool
) -> None:
    synced: list[str] = []
    plugin_feeds = _feeds(module_client, resource, synced)
    plugin_feeds.start()
    try:
        assert plugin_feeds.wait_for_sync(timeout=30.0)
        assert plugin_feeds.synced
        assert synced == ["synced"]  # the handlers are told once, served or not
        informer = plugin_feeds.informer(resource)
        assert informer is not None and informer.not_served is not served and informer.has_synced is served
    finally:
        plugin_feeds.stop()
