"""Watches: ordering, resume from a resourceVersion, bookmarks, 410 Gone, selector transitions."""

import threading
from collections.abc import Iterator

import pytest
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch

from cli.launchers.apiserver import run_apiserver
from kube import errors
from kube.client import Client
from kube.resources import CONFIG_MAPS, NAMESPACES, ResourceAPI, WatchEvent

pytestmark = pytest.mark.integration


def collect(api: ResourceAPI, count: int, **kwargs: object) -> list[WatchEvent]:
    """The first `count` non-bookmark events of a watch (fails after the watch's timeout)."""
    events: list[WatchEvent] = []
    stream = api.watch(timeout_seconds=10, **kwargs)  # type: ignore[arg-type]
    for event in stream:
        if event.type != "BOOKMARK":
            events.append(event)
        if len(events) == count:
            stream.close()
    return events


def rv(event: WatchEvent) -> int:
    return int(event.object["metadata"]["resourceVersion"])


def test_events_arrive_in_order_and_resume_exactly(client: Client, namespace: str) -> None:
    maps = client.resource(CONFIG_MAPS)
    start = maps.list(namespace=namespace).resource_version
    maps.create({"metadata": {"name": "a"}, "data": {"v": "1"}}, namespace=namespace)
    maps.patch("a", {"data": {"v": "2"}}, namespace=namespace)
    maps.create({"metadata": {"name": "b"}}, namespace=namespace)
    maps.delete("a", namespace=namespace)
    events = collect(maps, 4, namespace=namespace, resource_version=start)
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"),
        ("MODIFIED", "a"),
        ("ADDED", "b"),
        ("DELETED", "a"),
    ]
    assert [rv(e) for e in events] == sorted(rv(e) for e in events) and len({rv(e) for e in events}) == 4
    resumed = collect(maps, 2, namespace=namespace, resource_version=str(rv(events[1])))
    assert [(e.type, e.object["metadata"]["name"]) for e in resumed] == [("ADDED", "b"), ("DELETED", "a")]


def test_watch_without_resource_version_starts_with_current_objects(client: Client, namespace: str) -> None:
    maps = client.resource(CONFIG_MAPS)
    maps.create({"metadata": {"name": "existing"}}, namespace=namespace)
    events = collect(maps, 1, namespace=namespace)
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [("ADDED", "existing")]


def test_selector_watch_turns_label_changes_into_added_and_deleted(client: Client, namespace: str) -> None:
    maps = client.resource(CONFIG_MAPS)
    start = maps.list(namespace=namespace).resource_version
    maps.create({"metadata": {"name": "c", "labels": {"sel": "no"}}}, namespace=namespace)
    maps.patch("c", {"metadata": {"labels": {"sel": "yes"}}}, namespace=namespace)
    maps.patch("c", {"data": {"x": "1"}}, namespace=namespace)
    maps.patch("c", {"metadata": {"labels": {"sel": "no"}}}, namespace=namespace)
    events = collect(maps, 3, namespace=namespace, resource_version=start, label_selector="sel=yes")
    assert [e.type for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert events[2].object["metadata"]["labels"] == {"sel": "no"}


def test_bookmarks_carry_the_current_resource_version(client: Client, namespace: str) -> None:
    maps = client.resource(CONFIG_MAPS)
    start = int(maps.list(namespace=namespace).resource_version)
    client.resource(NAMESPACES).create({"metadata": {"name": f"{namespace}-other"}})  # a change elsewhere
    stream = maps.watch(namespace=namespace, resource_version=str(start), timeout_seconds=10)
    bookmark = next(e for e in stream if e.type == "BOOKMARK")
    stream.close()
    assert bookmark.object["kind"] == "ConfigMap" and rv(bookmark) > start


def test_official_watch_helper_works(api_client: k8s.ApiClient, namespace: str) -> None:
    core = k8s.CoreV1Api(api_client)
    start = core.list_namespaced_config_map(namespace).metadata.resource_version
    core.create_namespaced_config_map(namespace, k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="w")))
    w = k8s_watch.Watch()
    for event in w.stream(core.list_namespaced_config_map, namespace, resource_version=start, timeout_seconds=5):
        assert event["type"] == "ADDED" and event["object"].metadata.name == "w"
        w.stop()


@pytest.fixture(scope="module")
def small_window_client() -> Iterator[Client]:
    with run_apiserver(watch_window=100) as server, server.client() as c:
        yield c


def test_watch_older_than_the_window_is_410(small_window_client: Client) -> None:
    maps = small_window_client.resource(CONFIG_MAPS)
    start = maps.list(namespace="default").resource_version
    for i in range(250):
        maps.create({"metadata": {"name": f"m{i}"}}, namespace="default")
    stream = maps.watch(namespace="default", resource_version=start, timeout_seconds=5)
    first = next(iter(stream))
    stream.close()
    assert first.type == "ERROR" and first.object["code"] == 410 and first.object["reason"] == "Expired"
    relist = maps.list(namespace="default")
    assert len(relist.items) == 250
    maps.delete("m0", namespace="default")
    resumed = collect(maps, 1, namespace="default", resource_version=relist.resource_version)
    assert [(e.type, e.object["metadata"]["name"]) for e in resumed] == [("DELETED", "m0")]


def test_closing_a_stream_wakes_a_blocked_reader(client: Client, namespace: str) -> None:
    maps = client.resource(CONFIG_MAPS)
    stream = maps.watch(
        namespace=namespace,
        resource_version=maps.list(namespace=namespace).resource_version,
        timeout_seconds=60,
        allow_bookmarks=False,
    )
    done = threading.Event()

    def read() -> None:
        for _ in stream:
            pass
        done.set()

    reader = threading.Thread(target=read)
    reader.start()
    stream.close()
    reader.join(5)
    assert done.is_set()


def test_too_new_resource_version_is_an_error(client: Client, namespace: str) -> None:
    with pytest.raises(errors.ServerError) as e:
        client.resource(CONFIG_MAPS).watch(namespace=namespace, resource_version="999999999")
    assert e.value.status == 504
