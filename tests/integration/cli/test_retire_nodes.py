"""`tessera up` removing the nodes an earlier run had and this one does not, against a real API server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from apis.extension import names
from cli.launchers.apiserver import run_apiserver
from cli.localcluster.retire import RetiredNode, retire_nodes
from kube import errors
from kube.client import Client
from kube.resources import NAMESPACES, NODES, PODS


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    with run_apiserver() as server:
        server.install_crds()
        with server.client() as c:
            yield c


def add_node(client: Client, name: str, *, pods: tuple[str, ...] = (), device: bool = True) -> None:
    client.resource(NODES).create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    if device:
        client.resource(names.DEVICES).create(
            {"apiVersion": names.DEVICES.api_version, "kind": "Device", "metadata": {"name": name}, "spec": {}}
        )
    for pod in pods:
        container = {"name": "main", "image": "busybox"}
        client.resource(PODS).create(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod}, "spec": {"containers": [container]}},
            namespace="work",
        )
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod}, "target": {"name": name}}
        client.resource(PODS).post(pod, "binding", binding, namespace="work")


def exists(client: Client, gvr: names.GroupVersionResource, name: str, namespace: str = "") -> bool:
    try:
        client.resource(gvr).get(name, namespace=namespace)
    except errors.NotFound:
        return False
    return True


def test_nodes_no_longer_run_go_with_their_device_and_pods_and_nothing_else(client: Client) -> None:
    client.resource(NAMESPACES).create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "work"}})
    add_node(client, "sim-1", pods=("stays",))
    add_node(client, "sim-2", pods=("a", "b"))
    add_node(client, "sim-3", device=False)  # its agent never reported devices
    add_node(client, "someone-elses", pods=("theirs",))  # registered by hand: not ours to remove

    retired = retire_nodes(client, ["sim-3", "sim-2", "sim-4"])

    assert retired == [RetiredNode("sim-2", ("work/a", "work/b")), RetiredNode("sim-3", ())]
    assert [n for n in ("sim-1", "sim-2", "sim-3", "someone-elses") if exists(client, NODES, n)] == [
        "sim-1",
        "someone-elses",
    ]
    assert [n for n in ("sim-1", "sim-2", "someone-elses") if exists(client, names.DEVICES, n)] == [
        "sim-1",
        "someone-elses",
    ]
    assert sorted(p["metadata"]["name"] for p in client.resource(PODS).list(namespace="work").items) == [
        "stays",
        "theirs",
    ]
    # Run again (say the first was interrupted): nothing left to do, nothing else touched.
    assert retire_nodes(client, ["sim-2", "sim-3"]) == []
    assert exists(client, NODES, "someone-elses")
