"""The Node authorizer and NodeRestriction, decision by decision (no HTTP): kube's rules and reasons."""

from typing import Any

import pytest

from apis.extension import names
from apiserver.admission import noderestriction
from apiserver.admission.matching import Attributes as Write
from apiserver.authz.attributes import Attributes, from_request
from apiserver.authz.authorizer import ALLOW, NO_OPINION, Chain, Decision, Verdict
from apiserver.authz.identity import ADMIN, User, node_name, node_user, service_account_user
from apiserver.authz.node import NodeAuthorizer
from apiserver.authz.policy import pod_references
from apiserver.errors import StatusError

NODE = node_user("sim-1")


class Graph:
    """What ties objects to nodes, as a table: (resource, namespace, name) -> node."""

    def __init__(self, related: dict[tuple[str, str, str], str]) -> None:
        self._related = related

    def related(self, node: str, group: str, resource: str, namespace: str, name: str) -> bool:
        return self._related.get((resource, namespace, name)) == node


AUTHORIZER = NodeAuthorizer(Graph({("pods", "ml", "mine"): "sim-1", ("secrets", "ml", "pull"): "sim-1"}))


def decide(method: str, path: str, query: dict[str, str] | None = None, user: User = NODE) -> Decision:
    return AUTHORIZER.authorize(from_request(user, method, path, query or {}))


def test_node_identity_is_kubes() -> None:
    assert node_name(NODE) == "sim-1"
    assert node_name(User("system:node:sim-1")) is None, "not in system:nodes: not a node"
    assert node_name(User("system:node:", groups=("system:nodes",))) == ""
    assert node_name(service_account_user("tessera-system", "tessera-agent")) is None


def test_other_users_get_no_opinion() -> None:
    assert decide("GET", "/api/v1/nodes/sim-2", user=ADMIN) == NO_OPINION


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/nodes/sim-1", {}, ALLOW),
        ("GET", "/api/v1/nodes", {"fieldSelector": "metadata.name=sim-1"}, ALLOW),
        (
            "GET",
            "/api/v1/nodes",
            {},
            Decision(Verdict.NO_OPINION, "node 'sim-1' cannot read all nodes, only its own Node object"),
        ),
        (
            "GET",
            "/api/v1/nodes/sim-2",
            {},
            Decision(Verdict.NO_OPINION, "node 'sim-1' cannot read 'sim-2', only its own Node object"),
        ),
        ("PATCH", "/api/v1/nodes/sim-2/status", {}, ALLOW),  # NodeRestriction sees the name
        ("DELETE", "/api/v1/nodes/sim-1", {}, NO_OPINION),
        ("GET", "/api/v1/pods", {"fieldSelector": "spec.nodeName=sim-1"}, ALLOW),
        (
            "GET",
            "/api/v1/pods",
            {"fieldSelector": "spec.nodeName=sim-2"},
            Decision(Verdict.NO_OPINION, "can only list/watch pods with spec.nodeName field selector"),
        ),
        ("GET", "/api/v1/namespaces/ml/pods/mine", {}, ALLOW),
        (
            "GET",
            "/api/v1/namespaces/ml/pods/theirs",
            {},
            Decision(Verdict.NO_OPINION, "no relationship found between node 'sim-1' and this object"),
        ),
        ("GET", "/api/v1/namespaces/ml/secrets/pull", {}, ALLOW),
        (
            "GET",
            "/api/v1/namespaces/ml/secrets/other",
            {},
            Decision(Verdict.NO_OPINION, "no relationship found between node 'sim-1' and this object"),
        ),
        ("GET", "/api/v1/secrets", {}, Decision(Verdict.NO_OPINION, "can only read namespaced object of this type")),
        (
            "DELETE",
            "/api/v1/namespaces/ml/secrets/pull",
            {},
            Decision(Verdict.NO_OPINION, "can only read resources of this type"),
        ),
        ("PATCH", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/sim-1", {}, ALLOW),
        ("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", {}, ALLOW),
        (
            "PATCH",
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/sim-2",
            {},
            Decision(Verdict.NO_OPINION, "can only access node lease with the same name as the requesting node"),
        ),
        (
            "GET",
            "/apis/coordination.k8s.io/v1/namespaces/default/leases/sim-1",
            {},
            Decision(Verdict.NO_OPINION, 'can only access leases in the "kube-node-lease" system namespace'),
        ),
        ("PUT", "/apis/scheduling.koordinator.sh/v1alpha1/devices/sim-1", {}, ALLOW),
        ("POST", "/apis/scheduling.koordinator.sh/v1alpha1/devices", {}, ALLOW),  # NodeRestriction sees the name
        (
            "PUT",
            "/apis/scheduling.koordinator.sh/v1alpha1/devices/sim-2",
            {},
            Decision(Verdict.NO_OPINION, "can only access devices with the same name as the requesting node"),
        ),
        (
            "DELETE",
            "/apis/scheduling.koordinator.sh/v1alpha1/devices/sim-1",
            {},
            Decision(Verdict.NO_OPINION, "can only get, create, update, patch the devices object named after the node"),
        ),
        (
            "GET",
            "/apis/slo.koordinator.sh/v1alpha1/nodeslos",
            {"fieldSelector": "metadata.name=sim-1", "watch": "true"},
            ALLOW,
        ),
        (
            "GET",
            "/apis/slo.koordinator.sh/v1alpha1/nodeslos",
            {},
            Decision(Verdict.NO_OPINION, "can only list/watch nodeslos with the field selector metadata.name=sim-1"),
        ),
        ("POST", "/apis/authentication.k8s.io/v1/tokenreviews", {}, ALLOW),
        ("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", {}, ALLOW),
        ("POST", "/api/v1/namespaces/default/events", {}, ALLOW),
        ("GET", "/apis/apps/v1/deployments", {}, NO_OPINION),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_decisions_and_reasons(method: str, path: str, query: dict[str, str], expected: Decision) -> None:
    assert decide(method, path, query) == expected


def test_a_list_of_one_object_is_named_as_kube_names_it() -> None:
    listed = from_request(ADMIN, "GET", "/api/v1/nodes", {"fieldSelector": "metadata.name==n1"})
    assert (listed.verb, listed.name) == ("list", "n1")
    assert from_request(ADMIN, "GET", "/api/v1/nodes", {"fieldSelector": "metadata.name!=n1"}).name == ""


def test_the_chain_keeps_every_reason_and_stops_at_an_allow() -> None:
    class Says:
        def __init__(self, decision: Decision) -> None:
            self.decision = decision

        def authorize(self, attrs: Attributes) -> Decision:
            return self.decision

    attrs = from_request(NODE, "GET", "/api/v1/nodes/x", {})
    no = Decision(Verdict.NO_OPINION, "first")
    assert Chain([Says(no), Says(Decision(Verdict.NO_OPINION, "second"))]).authorize(attrs).reason == "first\nsecond"
    assert Chain([Says(no), Says(ALLOW), Says(Decision(Verdict.DENY))]).authorize(attrs) == ALLOW


def test_what_a_pod_uses_is_what_kubes_graph_records() -> None:
    pod: dict[str, Any] = {
        "spec": {
            "serviceAccountName": "runner",
            "imagePullSecrets": [{"name": "pull"}],
            "volumes": [
                {"secret": {"secretName": "vol"}},
                {"configMap": {"name": "cm-vol"}},
                {"projected": {"sources": [{"secret": {"name": "proj"}}, {"configMap": {"name": "cm-proj"}}]}},
                {"persistentVolumeClaim": {"claimName": "data"}},
            ],
            "initContainers": [{"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "init-env"}}}]}],
            "containers": [{"envFrom": [{"secretRef": {"name": "env-from"}}, {"configMapRef": {"name": "cm-env"}}]}],
        }
    }
    assert pod_references(pod, "secrets") == {"pull", "vol", "proj", "init-env", "env-from"}
    assert pod_references(pod, "configmaps") == {"cm-vol", "cm-proj", "cm-env"}
    assert pod_references(pod, "persistentvolumeclaims") == {"data"}
    assert pod_references(pod, "serviceaccounts") == {"runner"}
    assert pod_references({"spec": {}}, "serviceaccounts") == {"default"}


def write(
    operation: str,
    resource: str,
    name: str = "",
    *,
    obj: dict[str, Any] | None = None,
    old: dict[str, Any] | None = None,
    group: str = "",
    namespace: str = "",
    subresource: str = "",
    user: User = NODE,
) -> Write:
    return Write(operation, group, "v1", resource, "", namespace, name, obj, old, subresource, user=user)


def refusal(attrs: Write) -> str | None:
    try:
        noderestriction.admit(attrs)
    except StatusError as e:
        return e.message
    return None


def node(name: str, labels: dict[str, str] | None = None, taints: list[Any] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {"taints": taints or []}}


def test_node_restriction_lets_a_node_write_its_own() -> None:
    mine = node("sim-1", {"kubernetes.io/hostname": "sim-1", "node.kubernetes.io/instance-type": "a100", "x.io/y": "z"})
    assert refusal(write("CREATE", "nodes", obj=mine)) is None
    assert refusal(write("UPDATE", "nodes", "sim-1", obj=mine, old=node("sim-1"))) is None
    pod = {"metadata": {"labels": {"a": "1"}}, "spec": {"nodeName": "sim-1"}}
    assert refusal(write("UPDATE", "pods", "p", obj=pod, old=pod, namespace="ml", subresource="status")) is None
    assert refusal(write("DELETE", "pods", "p", old=pod, namespace="ml")) is None
    lease = {"metadata": {"name": "sim-1"}}
    assert (
        refusal(write("CREATE", "leases", obj=lease, group="coordination.k8s.io", namespace="kube-node-lease")) is None
    )
    device = {"metadata": {"name": "sim-1"}}
    assert refusal(write("CREATE", "devices", obj=device, group=names.DEVICES.group)) is None
    other = {"metadata": {"name": "sim-2"}}
    assert refusal(write("CREATE", "devices", obj=other, group=names.DEVICES.group, user=ADMIN)) is None


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        (
            write("CREATE", "nodes", obj=node("sim-1", {"kubernetes.io/role": "master"})),
            'nodes "sim-1" is forbidden: node "sim-1" is not allowed to set the following labels: kubernetes.io/role',
        ),
        (
            write("UPDATE", "nodes", "sim-1", obj=node("sim-1", taints=[]), old=node("sim-1", taints=[{"key": "k"}])),
            'nodes "sim-1" is forbidden: node "sim-1" is not allowed to modify taints',
        ),
        (
            write("CREATE", "pods", obj={"metadata": {"name": "p"}, "spec": {"nodeName": "sim-1"}}, namespace="ml"),
            'pods "p" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, node "sim-1" can '
            "only create mirror pods",
        ),
        (
            write(
                "UPDATE",
                "pods",
                "p",
                obj={"metadata": {"labels": {"a": "2"}}, "spec": {"nodeName": "sim-1"}},
                old={"metadata": {"labels": {"a": "1"}}, "spec": {"nodeName": "sim-1"}},
                namespace="ml",
                subresource="status",
            ),
            'pods "p" is forbidden: node "sim-1" cannot update labels through pod status',
        ),
        (
            write(
                "CREATE",
                "leases",
                obj={"metadata": {"name": "sim-2"}},
                group="coordination.k8s.io",
                namespace="kube-node-lease",
            ),
            'leases.coordination.k8s.io "sim-2" is forbidden: can only access node lease with the same name as the '
            "requesting node",
        ),
        (
            write("UPDATE", "devices", "sim-2", obj={}, old={}, group=names.DEVICES.group),
            'devices.scheduling.koordinator.sh "sim-2" is forbidden: node "sim-1" can only modify the Device named '
            "after itself",
        ),
        (
            write("DELETE", "nodes", "sim-1", old=node("sim-1"), user=User("system:node:", groups=("system:nodes",))),
            'nodes "sim-1" is forbidden: could not determine node from user "system:node:"',
        ),
    ],
    ids=["kube-label", "taints", "not-mirror", "labels-via-status", "lease", "device", "no-name"],
)
def test_node_restriction_refuses_with_kubes_messages(attrs: Write, message: str) -> None:
    assert refusal(attrs) == message
