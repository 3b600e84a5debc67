"""RBAC as a real cluster enforces it, with deploy/'s roles and each component's own token.

Every call in tests/support/rbac.py's table is allowed to its component by the API
server's own authorizer (SubjectAccessReview), and taking any one verb out of a rule in deploy/
makes a call of that table forbidden: so a verb missing from deploy/ fails here, not first in
a cluster. The 403s, 401s and `kubectl auth can-i` answers are kube's.
"""

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from cli.launchers.apiserver import EmbeddedAPIServer, run_apiserver
from cli.localcluster import identities
from kube import errors
from kube.client import Client
from kube.kubeconfig import write_kubeconfig
from tests.support.kubectl import KubectlBinary, kubectl_binaries
from tests.support.rbac import NEEDED, NON_RESOURCE, Call

pytestmark = pytest.mark.integration

RBAC = "rbac.authorization.k8s.io"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedAPIServer, dict[str, Path]]]:
    directory = tmp_path_factory.mktemp("rbac")
    tokens = identities.ensure_tokens(directory / "tokens.csv", identities.IDENTITIES.values())
    flags = ["--token-auth-file", str(directory / "tokens.csv")]
    with run_apiserver(directory, secure=True, extra_args=flags) as server:
        server.install_crds()
        with server.client() as admin:
            # deploy/ alone, without `tessera up`'s own grants (identities.LOCAL_ROLES).
            identities.apply_manifests(admin, identities.rbac_manifests())
        yield server, identities.component_kubeconfigs(directory / "kubeconfigs", server.kubeconfig, tokens)


@pytest.fixture
def admin(cluster: tuple[EmbeddedAPIServer, dict[str, Path]]) -> Iterator[Client]:
    with cluster[0].client() as client:
        yield client


def review(admin: Client, service_account: str, call: Call) -> bool:
    identity = identities.Identity(service_account)
    spec: dict[str, Any] = {"user": identity.user, "groups": list(identity.groups)}
    if call.group == NON_RESOURCE:
        spec["nonResourceAttributes"] = {"verb": call.verb, "path": call.resource}
    else:
        spec["resourceAttributes"] = {
            "verb": call.verb,
            "group": call.group,
            "resource": call.resource.split("/")[0],
            "subresource": call.resource.partition("/")[2],
            "namespace": call.namespace or "",
            "name": call.name or "",
        }
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
    result = admin.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=body)
    return bool(result["status"]["allowed"])


@pytest.mark.parametrize("service_account", sorted(NEEDED))
def test_every_call_a_component_makes_is_allowed_by_the_server(admin: Client, service_account: str) -> None:
    refused = sorted(str(c) for c in NEEDED[service_account] if not review(admin, service_account, c))
    assert refused == []


def _rules_with_one_verb_less() -> list[tuple[str, str, int, str]]:
    """(kind, name, rule index, verb) for every verb of every rule of deploy/'s Roles bound to a
    component (not `tessera-metrics-reader`, which deploy/ leaves for the cluster to bind)."""
    docs = identities.rbac_manifests()
    bound = {
        (d["roleRef"]["kind"], d["roleRef"]["name"])
        for d in docs
        if d.get("kind") in ("RoleBinding", "ClusterRoleBinding")
    }
    out = []
    for doc in docs:
        if doc.get("kind") in ("Role", "ClusterRole") and (doc["kind"], doc["metadata"]["name"]) in bound:
            for i, rule in enumerate(doc.get("rules") or []):
                out += [(doc["kind"], doc["metadata"]["name"], i, verb) for verb in rule["verbs"]]
    return out


@pytest.mark.parametrize(("kind", "name", "index", "verb"), _rules_with_one_verb_less(), ids=str)
def test_removing_any_verb_from_deploy_forbids_a_call_the_component_makes(
    admin: Client, kind: str, name: str, index: int, verb: str
) -> None:
    docs = identities.rbac_manifests()
    (role,) = [d for d in docs if d.get("kind") == kind and d["metadata"]["name"] == name]
    (service_account,) = {
        subject["name"]
        for b in docs
        if b.get("kind") in ("RoleBinding", "ClusterRoleBinding")
        and b["roleRef"] == {"apiGroup": RBAC, "kind": kind, "name": name}
        for subject in b["subjects"]
    }
    weaker: dict[str, Any] = copy.deepcopy(role)
    weaker["rules"][index]["verbs"].remove(verb)
    if not weaker["rules"][index]["verbs"]:
        del weaker["rules"][index]
    try:
        identities.apply_manifests(admin, [weaker])
        refused = [c for c in NEEDED[service_account] if c.verb == verb and not review(admin, service_account, c)]
        assert refused, f"{kind} {name} without {verb!r} in rule {index}: no call of {service_account} fails"
    finally:
        identities.apply_manifests(admin, [role])


def test_a_forbidden_call_is_kubes_403(cluster: tuple[EmbeddedAPIServer, dict[str, Path]], admin: Client) -> None:
    with Client.from_kubeconfig(cluster[1]["tessera-agent"]) as agent:
        agent.request("GET", "/api/v1/pods")  # granted: list pods
        with pytest.raises(errors.Forbidden) as e:
            agent.request("POST", "/api/v1/namespaces/default/pods", body={"metadata": {"name": "x"}})
        assert e.value.message == (
            'pods is forbidden: User "system:serviceaccount:tessera-system:tessera-agent" cannot create '
            'resource "pods" in API group "" in the namespace "default"'
        )
        with pytest.raises(errors.Forbidden) as e:
            agent.request("GET", "/api/v1/nodes/n1/status")
        assert e.value.message == (
            'nodes "n1" is forbidden: User "system:serviceaccount:tessera-system:tessera-agent" cannot get '
            'resource "nodes/status" in API group "" at the cluster scope'
        )
        assert e.value.details.get("kind") == "nodes" and e.value.details.get("name") == "n1"
        agent.request("GET", "/apis")  # discovery: every authenticated user (system:discovery)


def test_a_missing_or_wrong_token_is_401(cluster: tuple[EmbeddedAPIServer, dict[str, Path]], tmp_path: Path) -> None:
    server = cluster[0]
    write_kubeconfig(tmp_path / "bad", server.url, token="not-a-token", ca_pem=server.ca_pem)
    with Client.from_kubeconfig(tmp_path / "bad") as stranger, pytest.raises(errors.Unauthorized):
        stranger.request("GET", "/api/v1/pods")


def test_rbac_objects_are_validated(admin: Client) -> None:
    bad = {"metadata": {"name": "no-ref"}, "subjects": [{"kind": "User", "name": "u"}]}
    with pytest.raises(errors.Invalid):
        admin.request("POST", f"/apis/{RBAC}/v1/clusterrolebindings", body=bad)
    role = {
        "metadata": {"name": "urls", "namespace": "default"},
        "rules": [{"nonResourceURLs": ["/x"], "verbs": ["get"]}],
    }
    with pytest.raises(errors.Invalid):
        admin.request("POST", f"/apis/{RBAC}/v1/namespaces/default/roles", body=role)


KUBECTLS = kubectl_binaries()


@pytest.mark.skipif(not KUBECTLS, reason="no kubectl installed")
@pytest.mark.parametrize("kubectl", KUBECTLS, ids=lambda k: k.id)
def test_kubectl_auth_can_i(cluster: tuple[EmbeddedAPIServer, dict[str, Path]], kubectl: KubectlBinary) -> None:
    server, kubeconfigs = cluster
    scheduler = kubeconfigs["tessera-scheduler"]

    def can_i(kubeconfig: Path, *args: str) -> tuple[int, str]:
        result = kubectl.run(kubeconfig, "auth", "can-i", *args)
        return result.returncode, result.stdout.strip()

    assert can_i(scheduler, "create", "pods", "--subresource=binding", "-n", "default") == (0, "yes")
    assert can_i(scheduler, "create", "pods", "-n", "default") == (1, "no")
    assert can_i(scheduler, "list", "devices.scheduling.koordinator.sh") == (0, "yes")
    assert can_i(scheduler, "delete", "nodes") == (1, "no")
    assert can_i(scheduler, "update", "leases/tessera-scheduler", "-n", "tessera-system")[1] == "yes"
    assert can_i(scheduler, "update", "leases/someone-else", "-n", "tessera-system")[1] == "no"
    assert can_i(server.kubeconfig, "*", "*") == (0, "yes"), "the user's kubeconfig is cluster-admin"
    listed = kubectl.run(scheduler, "get", "pods", "-A")
    assert listed.returncode == 0, listed.stderr
    refused = kubectl.run(scheduler, "get", "secrets", "-n", "default")
    assert refused.returncode == 1
    assert (
        'secrets is forbidden: User "system:serviceaccount:tessera-system:tessera-scheduler" cannot list '
        'resource "secrets" in API group "" in the namespace "default"' in refused.stderr
    )


def test_official_client_as_a_component(cluster: tuple[EmbeddedAPIServer, dict[str, Path]]) -> None:
    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(cluster[1]["tessera-scheduler"]), client_configuration=config)
    core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(config))
    core.list_pod_for_all_namespaces()
    with pytest.raises(kubernetes.client.ApiException) as e:
        core.list_namespaced_secret("default")
    assert e.value.status == 403 and '"reason":"Forbidden"' in e.value.body.replace(" ", "")
    review = kubernetes.client.V1SelfSubjectAccessReview(
        spec=kubernetes.client.V1SelfSubjectAccessReviewSpec(
            resource_attributes=kubernetes.client.V1ResourceAttributes(verb="delete", resource="nodes")
        )
    )
    answer = kubernetes.client.AuthorizationV1Api(
        kubernetes.client.ApiClient(config)
    ).create_self_subject_access_review(review)
    assert answer.status.allowed is False
