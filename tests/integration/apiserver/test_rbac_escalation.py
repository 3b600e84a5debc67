"""The findings of issue 33 replayed with the real kubectl: each gets kube-apiserver's answer.

- an identity allowed only to create ClusterRoleBindings cannot bind itself to cluster-admin,
  and one allowed only to create Roles cannot write a Role with `*` on Secrets ("is attempting to
  grant RBAC permissions not currently held"), unless it holds `bind` / `escalate`;
- `kubectl --as` / `--as-group` are applied (the request runs as the impersonated identity) or
  refused with kube's 403, never ignored;
- `system:masters` bypasses RBAC: deleting the cluster-admin binding does not lock the admin out.
"""

from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.launchers.apiserver import EmbeddedAPIServer, run_apiserver
from cli.localcluster import identities
from kube.client import Client
from kube.kubeconfig import write_kubeconfig
from kube.resources import CONFIG_MAPS
from tests.support.kubectl import KubectlBinary, kubectl_binaries

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not kubectl_binaries(), reason="no kubectl installed"),
]

RBAC = "rbac.authorization.k8s.io"
DASHBOARD = "system:serviceaccount:tessera-system:tessera-dashboard"
USERS = {"eve": "eve-token-0123456789", "mallory": "mallory-token-0123456789", "ivan": "ivan-token-0123456789"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedAPIServer, dict[str, Path]]]:
    directory = tmp_path_factory.mktemp("escalation")
    tokens = directory / "tokens.csv"
    identities.ensure_tokens(tokens, [identities.IDENTITIES["dashboard"]])
    with tokens.open("a") as f:
        f.writelines(f"{token},{user},,\n" for user, token in USERS.items())
    with run_apiserver(directory, secure=True, extra_args=["--token-auth-file", str(tokens)]) as server:
        server.install_crds()
        with server.client() as admin:
            identities.apply_rbac(admin)
            grants = [
                _role(
                    "bindings-only", {"apiGroups": [RBAC], "resources": ["clusterrolebindings"], "verbs": ["create"]}
                ),
                _binding("bindings-only", "eve"),
                _role("roles-only", {"apiGroups": [RBAC], "resources": ["roles"], "verbs": ["create"]}),
                _binding("roles-only", "mallory"),
                _role(
                    "impersonate-dashboard",
                    {
                        "apiGroups": [""],
                        "resources": ["serviceaccounts"],
                        "verbs": ["impersonate"],
                        "resourceNames": ["tessera-dashboard"],
                    },
                ),
                _binding("impersonate-dashboard", "ivan"),
            ]
            identities.apply_manifests(admin, grants)
            admin.resource(CONFIG_MAPS).create({"metadata": {"name": "keep"}}, namespace="default")
        kubeconfigs = {}
        for user, token in USERS.items():
            kubeconfigs[user] = directory / f"{user}.kubeconfig"
            write_kubeconfig(kubeconfigs[user], server.url, token=token, ca_pem=server.ca_pem, name=user)
        kubeconfigs["admin"] = server.kubeconfig
        yield server, kubeconfigs


def _role(name: str, *rules: dict[str, object]) -> dict[str, object]:
    return {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": {"name": name}, "rules": list(rules)}


def _binding(role: str, user: str) -> dict[str, object]:
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{role}:{user}"},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": RBAC, "kind": "User", "name": user}],
    }


KUBECTL = kubectl_binaries()[-1] if kubectl_binaries() else None


def kubectl(kubeconfig: Path, *args: str) -> tuple[int, str]:
    assert KUBECTL is not None
    result = KubectlBinary.run(KUBECTL, kubeconfig, *args)
    return result.returncode, (result.stdout + result.stderr).strip()


def test_create_clusterrolebindings_only_cannot_bind_itself_to_cluster_admin(
    cluster: tuple[EmbeddedAPIServer, dict[str, Path]],
) -> None:
    eve = cluster[1]["eve"]
    code, out = kubectl(eve, "create", "clusterrolebinding", "eve-admin", "--clusterrole=cluster-admin", "--user=eve")
    assert code == 1
    assert (
        'clusterrolebindings.rbac.authorization.k8s.io "eve-admin" is forbidden: user "eve" '
        '(groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:\n'
        '{APIGroups:["*"], Resources:["*"], Verbs:["*"]}\n{NonResourceURLs:["*"], Verbs:["*"]}'
    ) in out
    code, out = kubectl(eve, "get", "secrets", "-n", "default")
    assert code == 1 and "forbidden" in out


def test_bind_on_cluster_admin_is_what_lets_a_binding_through(
    cluster: tuple[EmbeddedAPIServer, dict[str, Path]],
) -> None:
    admin, eve = cluster[1]["admin"], cluster[1]["eve"]
    with Client.from_kubeconfig(admin) as client:
        identities.apply_manifests(
            client,
            [
                _role(
                    "bind-view",
                    {"apiGroups": [RBAC], "resources": ["clusterroles"], "verbs": ["bind"], "resourceNames": ["view"]},
                ),
                _role("view", {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}),
                _binding("bind-view", "eve"),
            ],
        )
    code, out = kubectl(eve, "create", "clusterrolebinding", "eve-view", "--clusterrole=view", "--user=eve")
    assert code == 0, out
    code, out = kubectl(eve, "get", "configmap", "keep", "-n", "default", "-o", "name")
    assert (code, out) == (0, "configmap/keep")


def test_create_roles_only_cannot_write_a_role_on_secrets(cluster: tuple[EmbeddedAPIServer, dict[str, Path]]) -> None:
    mallory = cluster[1]["mallory"]
    code, out = kubectl(mallory, "create", "role", "steal", "--verb=*", "--resource=secrets", "-n", "default")
    assert code == 1
    assert 'roles.rbac.authorization.k8s.io "steal" is forbidden: user "mallory"' in out
    assert (
        "is attempting to grant RBAC permissions not currently held:\n"
        '{APIGroups:[""], Resources:["secrets"], Verbs:["*"]}' in out
    )
    with Client.from_kubeconfig(cluster[1]["admin"]) as client:
        identities.apply_manifests(
            client,
            [
                _role("escalate", {"apiGroups": [RBAC], "resources": ["roles"], "verbs": ["escalate"]}),
                _binding("escalate", "mallory"),
            ],
        )
    code, out = kubectl(mallory, "create", "role", "steal", "--verb=*", "--resource=secrets", "-n", "default")
    assert code == 0, out


def test_impersonation_is_applied_never_ignored(cluster: tuple[EmbeddedAPIServer, dict[str, Path]]) -> None:
    kubeconfigs = cluster[1]
    # The admin, as the dashboard: the delete runs as the dashboard, which may not delete.
    code, out = kubectl(kubeconfigs["admin"], f"--as={DASHBOARD}", "delete", "configmap", "keep", "-n", "default")
    assert code == 1
    assert (
        f'configmaps "keep" is forbidden: User "{DASHBOARD}" cannot delete resource "configmaps" in API group "" '
        'in the namespace "default"'
    ) in out
    assert kubectl(kubeconfigs["admin"], "get", "configmap", "keep", "-n", "default", "-o", "name")[0] == 0
    code, out = kubectl(kubeconfigs["admin"], f"--as={DASHBOARD}", "auth", "can-i", "list", "pods")
    assert (code, out) == (0, "yes")
    # --as-group is applied too: the group's grants, not the caller's.
    code, out = kubectl(kubeconfigs["admin"], "--as=nobody", "--as-group=viewers", "auth", "can-i", "list", "pods")
    assert (code, out) == (1, "no")
    # Without the impersonate verb: kube's 403.
    code, out = kubectl(kubeconfigs["eve"], f"--as={DASHBOARD}", "get", "pods")
    assert code == 1
    assert (
        'serviceaccounts "tessera-dashboard" is forbidden: User "eve" cannot impersonate resource "serviceaccounts" '
        'in API group "" in the namespace "tessera-system"'
    ) in out
    # Allowed to impersonate the dashboard, and then only what the dashboard may do.
    code, out = kubectl(kubeconfigs["ivan"], f"--as={DASHBOARD}", "get", "pods", "-A", "-o", "name")
    assert code == 0, out
    code, out = kubectl(kubeconfigs["ivan"], f"--as={DASHBOARD}", "delete", "configmap", "keep", "-n", "default")
    assert code == 1 and f'User "{DASHBOARD}" cannot delete' in out
    code, out = kubectl(kubeconfigs["ivan"], "--as=tessera-admin", "get", "pods")
    assert code == 1 and 'users "tessera-admin" is forbidden: User "ivan" cannot impersonate resource "users"' in out


def test_deleting_the_cluster_admin_binding_does_not_lock_the_admin_out(
    cluster: tuple[EmbeddedAPIServer, dict[str, Path]],
) -> None:
    admin = cluster[1]["admin"]
    saved = kubectl(admin, "get", "clusterrolebinding", "cluster-admin", "-o", "json")
    assert saved[0] == 0, saved[1]
    code, out = kubectl(admin, "delete", "clusterrolebinding", "cluster-admin")
    assert code == 0, out
    try:
        assert kubectl(admin, "get", "configmap", "keep", "-n", "default", "-o", "name") == (0, "configmap/keep")
        assert kubectl(admin, "auth", "can-i", "*", "*") == (0, "yes")
    finally:
        code, out = kubectl(
            admin,
            "create",
            "clusterrolebinding",
            "cluster-admin",
            "--clusterrole=cluster-admin",
            "--group=system:masters",
        )
        assert code == 0, out
