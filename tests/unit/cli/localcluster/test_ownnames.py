"""`tessera up`'s own names for deploy's objects: the same rights, no name the Helm chart uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from apis.extension.names import LABEL_MANAGED_BY
from cli.localcluster import identities, ownnames, webhook
from kube.pki import CA, dns_names
from tests.support import chart

RBAC_KINDS = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")


def applied_by_tessera_up() -> list[dict[str, object]]:
    """Every object `tessera up` applies from deploy/ and of its own (its RBAC and webhook)."""
    setup = webhook.WebhookSetup(b"CA", Path("tls.crt"), Path("tls.key"), 9443)
    return [*ownnames.own(identities.rbac_manifests()), *identities.LOCAL_ROLES, *webhook.objects(setup)]


def test_deploys_rbac_keeps_its_rules_and_subjects_under_names_of_tessera_ups_own() -> None:
    deploy = identities.rbac_manifests()
    owned = ownnames.own(deploy)
    assert [d["kind"] for d in owned if d["kind"] not in RBAC_KINDS] == ["Namespace"], "ServiceAccounts left out"
    by_name = {(d["kind"], d["metadata"]["name"]): d for d in owned}
    rbac = [d for d in deploy if d["kind"] in RBAC_KINDS]
    deploys_roles = {d["metadata"]["name"] for d in rbac if d["kind"] in ("Role", "ClusterRole")}
    assert len(rbac) == len(by_name) - 1
    for doc in rbac:
        mine = by_name[(doc["kind"], f"tessera-up:{doc['metadata']['name']}")]
        assert mine["metadata"]["labels"] == {**doc["metadata"]["labels"], LABEL_MANAGED_BY: "tessera-up"}
        assert mine.get("rules") == doc.get("rules") and mine.get("subjects") == doc.get("subjects")
        if "roleRef" in doc and doc["roleRef"]["name"] in deploys_roles:
            # a binding grants the renamed role, which tessera up applies too
            ref = mine["roleRef"]
            assert ref["name"] == f"tessera-up:{doc['roleRef']['name']}" and (ref["kind"], ref["name"]) in by_name
        elif "roleRef" in doc:  # one of kube's own (system:auth-delegator), which every cluster has
            assert mine["roleRef"] == doc["roleRef"] and doc["roleRef"]["name"].startswith("system:")
    assert deploy == identities.rbac_manifests(), "own() changed what it was given"


def test_a_binding_to_a_role_deploy_does_not_define_keeps_its_reference() -> None:
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "auth"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"},
        "subjects": [],
    }
    (owned,) = ownnames.own([binding])
    assert owned["metadata"]["name"] == "tessera-up:auth"
    assert owned["roleRef"]["name"] == "system:auth-delegator"


@pytest.mark.parametrize("namespace", ["tessera-system", "default"])
def test_no_object_tessera_up_applies_is_one_the_chart_installs(namespace: str) -> None:
    # `helm install tessera deploy/helm/tessera [-n tessera-system]` into a running tessera up
    # creates every object of the chart; none may be one of tessera up's (Helm would refuse it,
    # or, made Helm's, `helm uninstall` would delete it).
    ours = {chart.identity(o) for o in applied_by_tessera_up() if o["kind"] != "Namespace"}
    theirs = {chart.identity(o) for o in chart.objects(namespace=namespace)}
    assert theirs and ours and not ours & theirs, ours & theirs


def test_the_webhook_is_deploys_under_tessera_ups_names() -> None:
    setup = webhook.WebhookSetup(b"CA", Path("tls.crt"), Path("tls.key"), 9443)
    service, endpoints, configuration = webhook.objects(setup)
    assert service["metadata"]["name"] == endpoints["metadata"]["name"] == webhook.SERVICE
    assert webhook.SERVICE == "tessera-up-tessera-controller-webhook"
    assert configuration["metadata"]["name"] == "tessera-up-tessera-controller"
    deploy = webhook.documents()["ValidatingWebhookConfiguration"]
    for hook, theirs in zip(configuration["webhooks"], deploy["webhooks"], strict=True):
        assert hook["clientConfig"]["service"]["name"] == webhook.SERVICE
        assert hook["rules"] == theirs["rules"] and hook["failurePolicy"] == theirs["failurePolicy"]


def test_the_webhook_certificate_is_made_again_for_a_new_service_name(tmp_path: Path) -> None:
    old = CA.create("old").issue("x", server=True, dns=["tessera-controller-webhook.tessera-system.svc"])
    old.write(tmp_path / "tls")
    (tmp_path / "ca.crt").write_bytes(b"old CA")
    setup = webhook.prepare(tmp_path)
    assert f"{webhook.SERVICE}.tessera-system.svc" in dns_names(setup.cert_file.read_bytes())
    assert setup.ca_pem != b"old CA"
    assert webhook.prepare(tmp_path).ca_pem == setup.ca_pem, "a certificate for the name is kept"
