"""pods/log, exec, attach, portforward over HTTP: checked as kube-apiserver checks them, then
answered as it answers when it cannot reach a kubelet (500, no reason), naming the simulated node."""

import pytest

from apis.extension import names
from kube import errors
from kube.client import Client
from kube.resources import NODES, PODS

pytestmark = pytest.mark.integration


def failure(client: Client, method: str, path: str, *, upgrade: bool = True) -> errors.APIError:
    """The error a request gets; a stream (exec, ...) asks to upgrade its connection, as kubectl's does."""
    headers = {"Connection": "Upgrade", "Upgrade": "websocket"} if upgrade else {}
    with pytest.raises(errors.APIError) as e:
        client.open(method, path, headers=headers).release_conn()
    return e.value


def test_kubelet_subresources(client: Client, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/pods"
    assert failure(client, "GET", f"{base}/missing/log").status == 404
    node = f"sim-{namespace}"
    pod = {"metadata": {"name": "p"}, "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}}
    client.resource(PODS).create(pod, namespace=namespace)
    missing_node = failure(client, "POST", f"{base}/p/exec?container=c&command=true")
    assert (missing_node.status, missing_node.message) == (404, f'nodes "{node}" not found')
    client.resource(NODES).create({"metadata": {"name": node, "labels": {names.LABEL_SIMULATED_KUBELET: "true"}}})
    for method, sub in (("GET", "log"), ("GET", "exec"), ("POST", "attach"), ("POST", "portforward")):
        answer = failure(client, method, f"{base}/p/{sub}")
        assert (answer.status, answer.reason) == (500, ""), sub
        assert f'node "{node}" is simulated by Tessera' in answer.message, sub
        assert "no containers run there" in answer.message, sub
    assert failure(client, "PUT", f"{base}/p/log").status == 405
    plain = failure(client, "POST", f"{base}/p/exec", upgrade=False)
    assert (plain.status, plain.message) == (400, "Upgrade request required")
    assert failure(client, "GET", f"{base}/p/log?container=other").message == "container other is not valid for pod p"
    client.resource(NODES).delete(node)
