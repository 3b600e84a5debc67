"""The event recorder writes core/v1 Events on the object and aggregates repeats into `count`."""

import pytest

from apis.k8s.core import Pod
from kube.client import Client
from kube.events import WARNING, EventRecorder, ObjectReference
from kube.resources import EVENTS, PODS

pytestmark = pytest.mark.integration


def test_events_are_recorded_and_repeats_aggregate(client: Client, namespace: str) -> None:
    created = client.resource(PODS).create(
        {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "m", "image": "i"}]}}, namespace=namespace
    )
    ref = ObjectReference.of(Pod.from_dict(created))
    recorder = EventRecorder(client, "tessera-test", host="here")
    try:
        for _ in range(3):
            recorder.warning(ref, "FailedScheduling", "0/3 nodes are available")
        recorder.event(ref, WARNING, "FailedScheduling", "0/4 nodes are available")
        assert recorder.flush(10)
    finally:
        recorder.close()
    events = client.resource(EVENTS).list(namespace=namespace, field_selector="involvedObject.name=p").items
    by_message = {e["message"]: e for e in events}
    assert set(by_message) == {"0/3 nodes are available", "0/4 nodes are available"}
    repeated = by_message["0/3 nodes are available"]
    assert repeated["count"] == 3 and repeated["type"] == "Warning" and repeated["reason"] == "FailedScheduling"
    assert repeated["involvedObject"] == {
        "kind": "Pod",
        "namespace": namespace,
        "name": "p",
        "uid": created["metadata"]["uid"],
        "apiVersion": "v1",
        "resourceVersion": created["metadata"]["resourceVersion"],
    }
    assert repeated["source"] == {"component": "tessera-test", "host": "here"} and recorder.dropped == 0


def test_events_about_cluster_scoped_objects_go_to_default(client: Client) -> None:
    recorder = EventRecorder(client, "tessera-test")
    ref = ObjectReference(kind="Node", name="node-x", api_version="v1")
    recorder.normal(ref, "Checked", "all good")
    assert recorder.flush(10)
    recorder.close()
    names = [e["involvedObject"]["name"] for e in client.resource(EVENTS).list(namespace="default").items]
    assert "node-x" in names
