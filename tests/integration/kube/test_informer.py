"""Informers against a real server: sync, handlers, indexes, resync, and surviving restarts."""

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from apis.crds.device import Device
from apis.extension import names
from apis.extension.names import DEVICES, GroupVersionResource
from apis.k8s.core import Pod
from cli.launchers.apiserver import EmbeddedAPIServer, run_apiserver
from kube import Backoff
from kube.client import Client
from kube.informer import Informer, InformerFactory, raw
from kube.resources import CONFIG_MAPS, CUSTOM_RESOURCE_DEFINITIONS, PODS
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


class Recorder:
    """Handler calls, in order, as (kind, key, resourceVersion)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []
        self.lock = threading.Lock()

    def _add(self, kind: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        with self.lock:
            self.calls.append((kind, meta["name"], meta["resourceVersion"]))

    def attach(self, informer: Informer[dict[str, Any]]) -> None:
        informer.add_handlers(
            on_add=lambda o: self._add("add", o),
            on_update=lambda old, new: self._add("update", new),
            on_delete=lambda o: self._add("delete", o),
        )

    def of(self, kind: str) -> list[str]:
        with self.lock:
            return [name for k, name, _ in self.calls if k == kind]


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "m", "image": "i"}]}}


def test_sync_handlers_and_indexes(client: Client, namespace: str) -> None:
    pods = client.resource(PODS)
    pods.create(pod("early"), namespace=namespace)
    informer = Informer(
        client,
        PODS,
        parse=Pod.from_dict,
        namespace=namespace,
        indexers={"node": lambda p: [p.node_name] if p.node_name else []},
    )
    seen: list[tuple[str, str, str]] = []
    informer.add_handlers(
        on_add=lambda p: seen.append(("add", p.name, p.node_name)),
        on_update=lambda old, new: seen.append(("update", new.name, new.node_name)),
        on_delete=lambda p: seen.append(("delete", p.name, p.node_name)),
    )
    with informer:
        assert informer.wait_for_sync(10)
        assert seen == [("add", "early", "")]
        pods.create(pod("late"), namespace=namespace)
        pods.post("late", "binding", {"target": {"name": "n1"}}, namespace=namespace)
        pods.delete("early", namespace=namespace)
        wait_for(lambda: len(seen) == 4, what="four handler calls")
        assert seen[1:] == [("add", "late", ""), ("update", "late", "n1"), ("delete", "early", "")]
        assert [p.name for p in informer.store.by_index("node", "n1")] == ["late"]
        assert informer.store.get(f"{namespace}/late") is not None and len(informer.store) == 1


def test_handlers_added_late_see_existing_objects_and_failures_are_contained(client: Client, namespace: str) -> None:
    maps = client.resource(CONFIG_MAPS)
    for name in ("a", "b"):
        maps.create({"metadata": {"name": name}}, namespace=namespace)
    with Informer(client, CONFIG_MAPS, parse=raw, namespace=namespace, resync_period=0.2) as informer:
        assert informer.wait_for_sync(10)

        def broken(obj: dict[str, Any]) -> None:
            raise RuntimeError("handler bug")

        informer.add_handlers(on_add=broken)
        late = Recorder()
        late.attach(informer)
        wait_for(lambda: sorted(late.of("add")) == ["a", "b"], what="a late handler told of a and b")
        wait_for(lambda: {"a", "b"} <= set(late.of("update")), what="a resync: on_update(obj, obj)")
        maps.create({"metadata": {"name": "c"}}, namespace=namespace)
        wait_for(lambda: "c" in late.of("add"), what="c added")


def test_malformed_objects_are_skipped_not_fatal(client: Client) -> None:
    devices = client.resource(DEVICES)
    good = {"metadata": {"name": "good-node"}, "spec": {"devices": [{"type": "gpu", "minor": 0, "health": True}]}}
    # Malformed past what the CRD's schema can say: an NVLink annotation naming a GPU the Device
    # does not have.
    one_sided = {names.ANNOTATION_GPU_NVLINK_PEERS: '{"0": [7]}'}
    bad = {
        "metadata": {"name": "bad-node", "annotations": one_sided},
        "spec": {"devices": [{"type": "gpu", "minor": 0, "health": True}]},
    }
    devices.create(good)
    devices.create(bad)
    added: list[str] = []
    informer = Informer(client, DEVICES, parse=Device.from_dict)
    informer.add_handlers(on_add=lambda d: added.append(d.node_name))
    with informer:
        assert informer.wait_for_sync(10)
        assert "good-node" in added and "bad-node" not in added and informer.malformed >= 1
        devices.patch("bad-node", {"metadata": {"annotations": {names.ANNOTATION_GPU_NVLINK_PEERS: None}}})
        wait_for(lambda: "bad-node" in added, what="bad-node added")
    for name in ("good-node", "bad-node"):
        devices.delete(name)


def test_factory_shares_informers(client: Client, namespace: str) -> None:
    factory = InformerFactory(client)
    first = factory.informer(PODS, parse=Pod.from_dict, namespace=namespace)
    second = factory.informer(
        PODS, parse=Pod.from_dict, namespace=namespace, indexers={"node": lambda p: [p.node_name]}
    )
    assert first is second
    factory.start()
    try:
        assert factory.wait_for_sync(10)
        assert first.store.index_values("node") == []
    finally:
        factory.stop()


@pytest.fixture
def own_server() -> Iterator[EmbeddedAPIServer]:
    with run_apiserver(watch_window=100, bookmark_interval=0.5) as server:
        yield server


def server_state(client: Client) -> dict[str, str]:
    return {
        o["metadata"]["name"]: o["metadata"]["resourceVersion"]
        for o in client.resource(CONFIG_MAPS).list(namespace="default").items
    }


def cache_state(informer: Informer[dict[str, Any]]) -> dict[str, str]:
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in informer.store.list()}


@pytest.mark.parametrize("gap_writes", [5, 250], ids=["resume-watch", "relist-after-410"])
def test_cache_converges_after_the_server_is_killed(own_server: EmbeddedAPIServer, gap_writes: int) -> None:
    """Kill the server mid-watch, change things while the informer is away, and converge."""
    with own_server.client() as c:
        maps = c.resource(CONFIG_MAPS)
        for i in range(10):
            maps.create({"metadata": {"name": f"keep{i}"}}, namespace="default")
        # The first reconnect comes after the restart and all the writes, so with 250 writes the
        # informer's resourceVersion has left the 100-event window by then: 410, relist. The
        # writes must beat the reconnect, also on a loaded machine: the relist case waits longer.
        wait = 2.5 if gap_writes < 100 else 10.0
        informer = Informer(
            c, CONFIG_MAPS, parse=raw, namespace="default", backoff=Backoff(initial=wait, maximum=wait, jitter=0)
        )
        recorder = Recorder()
        recorder.attach(informer)
        assert not informer.settled
        with informer:
            assert informer.wait_for_sync(10)
            wait_for(lambda: informer.settled, what="the first list handed over whole")
            own_server.kill()
            own_server.start()
            maps.delete("keep0", namespace="default")
            maps.patch("keep1", {"data": {"changed": "yes"}}, namespace="default")
            for i in range(gap_writes):
                maps.create({"metadata": {"name": f"new{i}"}}, namespace="default")
            wait_for(lambda: cache_state(informer) == server_state(c), what="the cache to match the server")
            wait_for(lambda: informer.settled, what="what the relist changed, delivered")
        assert informer.lists == (1 if gap_writes < 100 else 2)
        adds = recorder.of("add")
        assert len(adds) == len(set(adds)), "no object was added twice"
        assert recorder.of("delete") == ["keep0"]
        assert "keep1" in recorder.of("update")
        assert sorted(adds) == sorted([f"keep{i}" for i in range(10)] + [f"new{i}" for i in range(gap_writes)])


def test_a_resource_not_served_is_said_once_then_synced_when_its_crd_comes(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    """An optional CRD not installed (404 on the list): one warning, quiet retries, and the
    informer syncs once the CRD is installed."""
    group = "informer-test.tessera.dev"
    gvr = GroupVersionResource(group, "v1", "widgets", "Widget", True)
    informer: Informer[dict[str, Any]] = Informer(client, gvr, parse=raw, backoff=Backoff(initial=0.01, maximum=0.05))
    with caplog.at_level(logging.DEBUG, logger="kube.informer"), informer:
        wait_for(lambda: sum("not served" in r.getMessage() for r in caplog.records) >= 4, what="four quiet retries")
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
            "Resource not served by the API server; waiting for it"
        ]
        # Answered (nothing to wait for), not synced: a component may go on without its objects.
        assert informer.wait_until_answered(0) and informer.not_served and not informer.has_synced
        crd = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"widgets.{group}"},
            "spec": {
                "group": group,
                "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
                "scope": "Namespaced",
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                    }
                ],
            },
        }
        client.resource(CUSTOM_RESOURCE_DEFINITIONS).create(crd)
        try:
            assert informer.wait_for_sync(10.0)
            assert not informer.not_served
        finally:
            client.resource(CUSTOM_RESOURCE_DEFINITIONS).delete(f"widgets.{group}")
