"""What the server answers for pods/log, exec, attach and portforward, without HTTP."""

from typing import Any

import pytest

from apis.extension import names
from apiserver import kubelet
from apiserver.errors import StatusError


def pod(*containers: str, init: tuple[str, ...] = (), node: str = "n1") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": c} for c in containers], "nodeName": node}
    if init:
        spec["initContainers"] = [{"name": c} for c in init]
    return {"metadata": {"name": "p", "namespace": "ns"}, "spec": spec}


def node(**labels: str) -> dict[str, Any]:
    return {"metadata": {"name": "n1", "labels": labels}}


def bad_request(subresource: str, p: dict[str, Any], container: str = "") -> str:
    with pytest.raises(StatusError) as e:
        kubelet.target(subresource, p, container)
    assert (e.value.code, e.value.reason) == (400, "BadRequest")
    return e.value.message


def test_the_container_is_picked_as_kube_apiserver_picks_it() -> None:
    assert kubelet.target("exec", pod("main"), "").container == "main"
    assert kubelet.target("log", pod("a", "b", init=("i",)), "i").container == "i"
    assert kubelet.target("portforward", pod("a", "b"), "").container == ""
    assert bad_request("exec", pod("a", "b", init=("i",))) == (
        "a container name must be specified for pod p, choose one of: [a b] or one of the init containers: [i]"
    )
    assert bad_request("log", pod("a"), "nope") == "container nope is not valid for pod p"


def test_an_unscheduled_pod_has_an_empty_log_and_nothing_to_exec_into() -> None:
    assert kubelet.target("log", pod("main", node=""), "").node == ""
    for subresource in ("exec", "attach", "portforward"):
        assert bad_request(subresource, pod("main", node="")) == "pod p does not have a host assigned"


@pytest.mark.parametrize(
    ("subresource", "message"),
    [
        ("log", 'cannot get logs of container "main" of pod "ns/p": {why}, so there are no logs'),
        ("exec", 'cannot exec into container "main" of pod "ns/p": {why}, so there is nothing to exec into'),
        ("attach", 'cannot attach to container "main" of pod "ns/p": {why}, so there is nothing to attach to'),
        ("portforward", 'cannot forward ports of pod "ns/p": {why}, so nothing listens on its ports'),
    ],
)
def test_a_simulated_node_is_named_and_explained(subresource: str, message: str) -> None:
    simulated = node(**{names.LABEL_SIMULATED_KUBELET: "true"})
    error = kubelet.unreachable(kubelet.target(subresource, pod("main"), ""), simulated)
    why = f'node "n1" is simulated by Tessera ({names.LABEL_SIMULATED_KUBELET}=true): no containers run there'
    assert (error.code, error.reason, error.message) == (500, "", message.format(why=why))
    assert "reason" not in error.to_status(), "kubectl prints it as `Error from server: <message>`"


def test_another_node_is_unreachable_because_the_server_has_no_kubelets() -> None:
    error = kubelet.unreachable(kubelet.target("exec", pod("main"), ""), node())
    assert error.code == 500
    assert error.message.endswith('does not connect to kubelets, so it cannot reach the kubelet of node "n1"')


def test_streams_must_ask_to_upgrade_the_connection() -> None:
    kubelet.check_upgrade("log", "")
    kubelet.check_upgrade("exec", "keep-alive, Upgrade")
    with pytest.raises(StatusError) as e:
        kubelet.check_upgrade("portforward", "keep-alive")
    assert (e.value.code, e.value.message) == (400, "Upgrade request required")
