"""RBAC escalation prevention and impersonation, decided as kube-apiserver decides them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from apiserver.authz.attributes import Attributes
from apiserver.authz.escalation import REQUESTER, EscalationGuard, missing_rules
from apiserver.authz.identity import AUTHENTICATED, User
from apiserver.authz.impersonation import ImpersonationWithoutUser, impersonate
from apiserver.authz.rbac import PolicyVersion, RBACAuthorizer
from apiserver.errors import StatusError
from tests.unit.apiserver.objects import StaticPolicy

RBAC = "rbac.authorization.k8s.io"


def cluster_role(name: str, *rules: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "rules": list(rules)}


def grant(role: str, user: str, *, namespace: str = "", kind: str = "ClusterRole") -> dict[str, Any]:
    meta = {"name": f"{role}-{user}", **({"namespace": namespace} if namespace else {})}
    return {
        "metadata": meta,
        "roleRef": {"apiGroup": RBAC, "kind": kind, "name": role},
        "subjects": [{"kind": "User", "name": user}],
    }


ADMIN_ROLE = cluster_role(
    "cluster-admin",
    {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
    {"nonResourceURLs": ["*"], "verbs": ["*"]},
)
BINDINGS_ONLY = cluster_role(
    "bindings-only", {"apiGroups": [RBAC], "resources": ["clusterrolebindings"], "verbs": ["create"]}
)
ROLES_ONLY = cluster_role("roles-only", {"apiGroups": [RBAC], "resources": ["roles"], "verbs": ["create"]})
SECRET_READER = cluster_role("secret-reader", {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]})
BIND_ADMIN = cluster_role(
    "bind-admin",
    {"apiGroups": [RBAC], "resources": ["clusterroles"], "verbs": ["bind"], "resourceNames": ["cluster-admin"]},
)
ESCALATE = cluster_role("escalate-roles", {"apiGroups": [RBAC], "resources": ["roles"], "verbs": ["escalate"]})


def guard(*bindings: dict[str, Any], roles: Sequence[dict[str, Any]] = ()) -> EscalationGuard:
    policy = StaticPolicy(
        {
            "clusterroles": [ADMIN_ROLE, BINDINGS_ONLY, ROLES_ONLY, SECRET_READER, BIND_ADMIN, ESCALATE],
            "clusterrolebindings": [b for b in bindings if "namespace" not in b["metadata"]],
            "rolebindings": [b for b in bindings if "namespace" in b["metadata"]],
            "roles": list(roles),
        }
    )
    g = EscalationGuard()
    g.bind(RBACAuthorizer(policy))
    return g


@pytest.fixture
def as_user() -> Any:
    tokens = []

    def set_user(name: str, *groups: str) -> User:
        user = User(name, "", (*groups, AUTHENTICATED))
        tokens.append(REQUESTER.set(user))
        return user

    yield set_user
    for token in reversed(tokens):
        REQUESTER.reset(token)


def binding_to(role: str, subject: str, *, kind: str = "ClusterRole", namespace: str = "") -> dict[str, Any]:
    b = grant(role, subject, namespace=namespace, kind=kind)
    b["metadata"]["name"] = "mine"
    return b


def test_binding_to_cluster_admin_without_holding_it_is_kubes_403(as_user: Any) -> None:
    as_user("eve")
    g = guard(grant("bindings-only", "eve"))
    with pytest.raises(StatusError) as e:
        g.check_binding(binding_to("cluster-admin", "eve"), None, resource="clusterrolebindings")
    assert e.value.code == 403
    assert e.value.message == (
        'clusterrolebindings.rbac.authorization.k8s.io "mine" is forbidden: user "eve" '
        '(groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:\n'
        '{APIGroups:["*"], Resources:["*"], Verbs:["*"]}\n{NonResourceURLs:["*"], Verbs:["*"]}'
    )


def test_bind_on_the_role_or_holding_its_rules_allows_the_binding(as_user: Any) -> None:
    as_user("eve")
    guard(grant("bindings-only", "eve"), grant("bind-admin", "eve")).check_binding(
        binding_to("cluster-admin", "eve"), None, resource="clusterrolebindings"
    )
    guard(grant("secret-reader", "eve")).check_binding(
        binding_to("secret-reader", "bob"), None, resource="clusterrolebindings"
    )
    # bind is on cluster-admin only: another role is still checked rule by rule
    with pytest.raises(StatusError, match=r'\{APIGroups:\[""\], Resources:\["secrets"\], Verbs:\["get" "list"\]\}'):
        guard(grant("bind-admin", "eve")).check_binding(
            binding_to("secret-reader", "bob"), None, resource="clusterrolebindings"
        )


def test_a_rolebinding_needs_the_rules_only_in_its_namespace(as_user: Any) -> None:
    as_user("eve")
    in_team = grant("secret-reader", "eve", namespace="team")
    guard(in_team).check_binding(binding_to("secret-reader", "bob", namespace="team"), None, resource="rolebindings")
    with pytest.raises(StatusError):
        guard(in_team).check_binding(
            binding_to("secret-reader", "bob", namespace="other"), None, resource="rolebindings"
        )


def test_binding_a_missing_role_without_bind_is_not_found(as_user: Any) -> None:
    as_user("eve")
    with pytest.raises(StatusError) as e:
        guard().check_binding(binding_to("nope", "eve"), None, resource="clusterrolebindings")
    assert e.value.code == 404 and e.value.message == 'clusterroles.rbac.authorization.k8s.io "nope" not found'


def test_a_role_with_rules_the_writer_lacks_is_403_unless_it_may_escalate(as_user: Any) -> None:
    as_user("eve")
    role = {
        "metadata": {"name": "steal", "namespace": "team"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["*"]}],
    }
    with pytest.raises(StatusError) as e:
        guard(grant("roles-only", "eve")).check_role(role, None, resource="roles")
    assert e.value.message.endswith(
        "is attempting to grant RBAC permissions not currently held:\n"
        '{APIGroups:[""], Resources:["secrets"], Verbs:["*"]}'
    )
    assert e.value.message.startswith('roles.rbac.authorization.k8s.io "steal" is forbidden: user "eve"')
    guard(grant("roles-only", "eve"), grant("escalate-roles", "eve")).check_role(role, None, resource="roles")
    reader = {**role, "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}
    guard(grant("secret-reader", "eve")).check_role(reader, None, resource="roles")


def test_masters_and_the_server_itself_are_not_checked(as_user: Any) -> None:
    g = guard()
    role = {"metadata": {"name": "r"}, "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}
    g.check_role(role, None, resource="clusterroles")  # no requester: the server's bootstrap
    as_user("root", "system:masters")
    g.check_role(role, None, resource="clusterroles")


def test_changing_only_what_the_garbage_collector_needs_is_not_checked(as_user: Any) -> None:
    as_user("eve")
    old = {
        "metadata": {"name": "r", "resourceVersion": "3"},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
    }
    new = {**old, "metadata": {**old["metadata"], "finalizers": ["x"], "ownerReferences": []}}
    guard().check_role(new, old, resource="clusterroles")
    with pytest.raises(StatusError):
        guard().check_role(
            {**new, "rules": [*old["rules"], {"apiGroups": [""], "resources": ["x"], "verbs": ["y"]}]},
            old,
            resource="clusterroles",
        )


def test_aggregation_rules_need_full_authority(as_user: Any) -> None:
    as_user("eve")
    role = {
        "metadata": {"name": "agg"},
        "rules": [],
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]},
    }
    with pytest.raises(StatusError, match="must have cluster-admin privileges to use the aggregationRule"):
        guard(grant("secret-reader", "eve")).check_role(role, None, resource="clusterroles")
    guard(grant("cluster-admin", "eve")).check_role(role, None, resource="clusterroles")


@pytest.mark.parametrize(
    ("owner", "wanted", "missing"),
    [
        (
            [{"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}],
            [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
            0,
        ),
        (
            [{"apiGroups": [""], "resources": ["*/status"], "verbs": ["get"]}],
            [{"apiGroups": [""], "resources": ["pods/status"], "verbs": ["get"]}],
            0,
        ),
        (
            [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["a"]}],
            [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
            1,
        ),
        (
            [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
            [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["a", "b"]}],
            0,
        ),
        (
            [{"nonResourceURLs": ["/api/*"], "verbs": ["get"]}],
            [{"nonResourceURLs": ["/api/v1", "/apis"], "verbs": ["get"]}],
            1,
        ),
        (
            [{"apiGroups": ["apps"], "resources": ["*"], "verbs": ["get"]}],
            [{"apiGroups": ["apps", ""], "resources": ["deployments"], "verbs": ["get", "list"]}],
            3,
        ),
    ],
    ids=["verb-star", "subresource-star", "names-narrower", "names-covered", "url-prefix", "groups-and-verbs"],
)
def test_rules_are_compared_broken_down_as_kube_does(owner: list[Any], wanted: list[Any], missing: int) -> None:
    assert len(missing_rules(owner, wanted)) == missing


# --- impersonation ---------------------------------------------------------------------------------
IMPERSONATOR = cluster_role(
    "impersonator",
    {"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"], "resourceNames": ["dashboard"]},
    {"apiGroups": [""], "resources": ["groups"], "verbs": ["impersonate"]},
    {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"]},
)


def authorizer(*bindings: dict[str, Any]) -> RBACAuthorizer:
    return RBACAuthorizer(StaticPolicy({"clusterroles": [IMPERSONATOR], "clusterrolebindings": list(bindings)}))


ALICE = User("alice", "", (AUTHENTICATED,))


def test_no_headers_keep_the_caller() -> None:
    assert impersonate(ALICE, [("Accept", "application/json")], authorizer()) is ALICE


def test_impersonating_without_the_verb_is_kubes_403() -> None:
    with pytest.raises(StatusError) as e:
        impersonate(ALICE, [("Impersonate-User", "dashboard")], authorizer())
    assert e.value.code == 403
    assert e.value.message == (
        'users "dashboard" is forbidden: User "alice" cannot impersonate resource "users" in API group "" '
        "at the cluster scope"
    )


def test_impersonation_applies_user_groups_and_extras_each_checked() -> None:
    allowed = authorizer(grant("impersonator", "alice"))
    user = impersonate(ALICE, [("Impersonate-User", "dashboard"), ("Impersonate-Group", "viewers")], allowed)
    assert user == User("dashboard", "", ("viewers", AUTHENTICATED))
    with pytest.raises(
        StatusError,
        match='uids.authentication.k8s.io "42" is forbidden: .* resource "uids" in API group "authentication.k8s.io"',
    ):
        impersonate(ALICE, [("Impersonate-User", "dashboard"), ("Impersonate-Uid", "42")], allowed)
    with pytest.raises(StatusError, match='resource "userextras/scopes" in API group "authentication.k8s.io"'):
        impersonate(ALICE, [("Impersonate-User", "dashboard"), ("Impersonate-Extra-Scopes", "x")], allowed)
    with pytest.raises(StatusError, match='users "admin" is forbidden'):
        impersonate(ALICE, [("Impersonate-User", "admin")], allowed)


def test_a_service_account_gets_its_groups_and_is_checked_in_its_namespace() -> None:
    allowed = authorizer(grant("impersonator", "alice"))
    user = impersonate(ALICE, [("Impersonate-User", "system:serviceaccount:tessera-system:tessera-dashboard")], allowed)
    assert user.name == "system:serviceaccount:tessera-system:tessera-dashboard"
    assert user.groups == ("system:serviceaccounts", "system:serviceaccounts:tessera-system", AUTHENTICATED)
    with pytest.raises(StatusError) as e:
        impersonate(ALICE, [("Impersonate-User", "system:serviceaccount:ns:sa")], authorizer())
    assert e.value.message.endswith(
        'cannot impersonate resource "serviceaccounts" in API group "" in the namespace "ns"'
    )


def test_groups_without_a_user_are_refused_as_kube_refuses_them() -> None:
    with pytest.raises(
        ImpersonationWithoutUser, match=r"requested \[\{Group  devs    \}\] without impersonating a user"
    ):
        impersonate(ALICE, [("Impersonate-Group", "devs")], authorizer())


def test_masters_may_impersonate_anyone() -> None:
    root = User("root", "", ("system:masters", AUTHENTICATED))
    assert impersonate(
        root, [("Impersonate-User", "x"), ("Impersonate-Group", "system:masters")], authorizer()
    ).groups == (
        "system:masters",
        AUTHENTICATED,
    )


def test_the_authorizer_caches_rules_until_the_policy_changes() -> None:
    """Rules per user and namespace are gathered once; a stored RBAC change (version bump) is
    seen by the very next request."""
    bindings: list[dict[str, Any]] = []
    version = PolicyVersion()
    authz = RBACAuthorizer(StaticPolicy({"clusterroles": [SECRET_READER], "clusterrolebindings": bindings}), version)
    read = Attributes(ALICE, "get", True, resource="secrets", namespace="default", name="s")
    assert not authz.authorize(read)
    bindings.append(grant("secret-reader", "alice"))
    assert not authz.authorize(read), "cached: the strategies had not told it"
    version.bump()
    assert authz.authorize(read)
    bindings.clear()
    version.bump()
    assert not authz.authorize(read)
