"""Authentication and RBAC decisions, as kube-apiserver makes them (no HTTP)."""

from typing import Any

import pytest

from apis.errors import ConfigError
from apiserver.authz.attributes import Attributes, forbidden_message, from_request
from apiserver.authz.identity import ADMIN, TokenAuthenticator, User, parse_token_file, service_account_user
from apiserver.authz.rbac import RBACAuthorizer, rule_allows
from tests.unit.apiserver.objects import StaticPolicy

SCHEDULER = service_account_user("tessera-system", "tessera-scheduler")


def test_token_file_in_kubes_format() -> None:
    users = parse_token_file('t1,alice,u1,"dev,ops"\n# comment\n\nt2,system:serviceaccount:ns:sa,,\n')
    assert users["t1"] == User("alice", "u1", ("dev", "ops", "system:authenticated"))
    assert users["t2"].name == "system:serviceaccount:ns:sa"
    with pytest.raises(ConfigError, match="line 1"):
        parse_token_file("only-a-token\n")
    with pytest.raises(ConfigError, match="twice"):
        parse_token_file("t,a,1\nt,b,2\n")


def test_bearer_tokens_name_users() -> None:
    auth = TokenAuthenticator("admin-token", {"sched-token": SCHEDULER})
    assert auth.authenticate("Bearer admin-token") == ADMIN
    assert auth.authenticate("Bearer sched-token") == SCHEDULER
    assert auth.authenticate("Bearer nope") is None
    assert auth.authenticate("Basic admin-token") is None
    assert auth.authenticate("") is None


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/namespaces/default/pods", {}, ("list", "", "pods", "", "default", "")),
        ("GET", "/api/v1/pods", {"watch": "true"}, ("watch", "", "pods", "", "", "")),
        ("POST", "/api/v1/namespaces/ns/pods/p/binding", {}, ("create", "", "pods", "binding", "ns", "p")),
        ("PATCH", "/api/v1/nodes/n/status", {}, ("patch", "", "nodes", "status", "", "n")),
        ("DELETE", "/apis/x.io/v1/things", {}, ("deletecollection", "x.io", "things", "", "", "")),
        ("GET", "/api/v1/namespaces/ns", {}, ("get", "", "namespaces", "", "ns", "ns")),
    ],
)
def test_request_attributes(method: str, path: str, query: dict[str, str], expected: tuple[str, ...]) -> None:
    a = from_request(ADMIN, method, path, query)
    assert a.resource_request and (a.verb, a.group, a.resource, a.subresource, a.namespace, a.name) == expected


def test_non_resource_requests() -> None:
    a = from_request(ADMIN, "GET", "/openapi/v3", {})
    assert not a.resource_request and a.verb == "get" and a.path == "/openapi/v3"
    assert not from_request(ADMIN, "GET", "/apis/x.io/v1", {}).resource_request


def test_forbidden_messages_are_kubes() -> None:
    named = Attributes(SCHEDULER, "get", True, group="x.io", resource="things", namespace="ns", name="t")
    assert forbidden_message(named) == (
        'things.x.io "t" is forbidden: User "system:serviceaccount:tessera-system:tessera-scheduler" cannot get '
        'resource "things" in API group "x.io" in the namespace "ns"'
    )
    sub = Attributes(SCHEDULER, "create", True, resource="pods", subresource="binding", namespace="ns", name="p")
    assert 'cannot create resource "pods/binding" in API group ""' in forbidden_message(sub)
    path = Attributes(SCHEDULER, "get", False, path="/metrics")
    assert forbidden_message(path) == (
        'forbidden: User "system:serviceaccount:tessera-system:tessera-scheduler" cannot get path "/metrics"'
    )


def attrs(
    verb: str, resource: str, *, group: str = "", namespace: str = "", name: str = "", sub: str = ""
) -> Attributes:
    return Attributes(
        SCHEDULER, verb, True, group=group, resource=resource, subresource=sub, namespace=namespace, name=name
    )


@pytest.mark.parametrize(
    ("rule", "request_", "allowed"),
    [
        ({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}, attrs("get", "pods"), True),
        ({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}, attrs("list", "pods"), False),
        ({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}, attrs("get", "pods", sub="status"), False),
        ({"apiGroups": [""], "resources": ["*/status"], "verbs": ["*"]}, attrs("patch", "pods", sub="status"), True),
        ({"apiGroups": ["x.io"], "resources": ["pods"], "verbs": ["get"]}, attrs("get", "pods"), False),
        (
            {"apiGroups": [""], "resources": ["leases"], "resourceNames": ["a"], "verbs": ["get"]},
            attrs("get", "leases", name="a"),
            True,
        ),
        (
            {"apiGroups": [""], "resources": ["leases"], "resourceNames": ["a"], "verbs": ["get"]},
            attrs("get", "leases", name="b"),
            False,
        ),
        (
            {"apiGroups": [""], "resources": ["leases"], "resourceNames": ["a"], "verbs": ["create"]},
            attrs("create", "leases"),
            False,
        ),
        ({"nonResourceURLs": ["/apis/*"], "verbs": ["get"]}, Attributes(SCHEDULER, "get", False, path="/apis/x"), True),
        ({"nonResourceURLs": ["/apis"], "verbs": ["get"]}, Attributes(SCHEDULER, "get", False, path="/apis/x"), False),
    ],
)
def test_rule_matching(rule: dict[str, Any], request_: Attributes, allowed: bool) -> None:
    assert rule_allows(rule, request_) is allowed


def binding(name: str, role_kind: str, role: str, namespace: str = "") -> dict[str, Any]:
    return {
        "metadata": {"name": name, **({"namespace": namespace} if namespace else {})},
        "roleRef": {"kind": role_kind, "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": "tessera-scheduler", "namespace": "tessera-system"}],
    }


def test_role_bindings_grant_only_in_their_namespace() -> None:
    reader = {"metadata": {"name": "reader"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}
    policy = StaticPolicy({"clusterroles": [reader], "rolebindings": [binding("b", "ClusterRole", "reader", "team-a")]})
    rbac = RBACAuthorizer(policy)
    assert rbac.authorize(attrs("get", "pods", namespace="team-a"))
    assert not rbac.authorize(attrs("get", "pods", namespace="team-b"))
    assert not rbac.authorize(attrs("get", "pods"))


def test_cluster_role_bindings_grant_everywhere_and_missing_roles_grant_nothing() -> None:
    reader = {"metadata": {"name": "reader"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}
    policy = StaticPolicy(
        {
            "clusterroles": [reader],
            "clusterrolebindings": [binding("b", "ClusterRole", "reader"), binding("c", "ClusterRole", "gone")],
        }
    )
    rbac = RBACAuthorizer(policy)
    assert rbac.authorize(attrs("get", "pods", namespace="any"))
    assert not rbac.authorize(attrs("delete", "pods", namespace="any"))
    other = Attributes(service_account_user("tessera-system", "other"), "get", True, resource="pods")
    assert not rbac.authorize(other)
