"""`kube.eviction.evict` against the embedded API server: the pod goes, and the uid precondition
keeps a new pod of the same name from being evicted in its place."""

from __future__ import annotations

import pytest

from kube.client import Client
from kube.errors import Conflict, NotFound
from kube.eviction import evict
from kube.resources import PODS

pytestmark = pytest.mark.integration


def _pod(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


def test_evict_deletes_the_pod_with_that_uid_only(client: Client, namespace: str) -> None:
    pods = client.resource(PODS)
    first = pods.create(_pod("victim"), namespace=namespace)
    with pytest.raises(Conflict):
        evict(pods, "victim", namespace=namespace, uid="not-its-uid")
    assert pods.get("victim", namespace=namespace)["metadata"]["uid"] == first["metadata"]["uid"]
    evict(pods, "victim", namespace=namespace, uid=first["metadata"]["uid"])
    with pytest.raises(NotFound):
        pods.get("victim", namespace=namespace)
    with pytest.raises(NotFound):
        evict(pods, "victim", namespace=namespace, uid=first["metadata"]["uid"])
