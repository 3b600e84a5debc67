"""`tessera up` removing what an earlier run applied under deploy/'s names, and nothing else,
against a real API server."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from apis.extension.names import ANNOTATION_HELM_RELEASE_NAME, ANNOTATION_KUBECTL_LAST_APPLIED, GroupVersionResource
from cli.launchers.apiserver import run_apiserver
from cli.localcluster import identities, ownnames, webhook
from kube import errors
from kube.client import Client
from kube.resources import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    ENDPOINTS,
    ROLES,
    SERVICE_ACCOUNTS,
    SERVICES,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
)

NAMESPACE = identities.NAMESPACE


@pytest.fixture
def client() -> Iterator[Client]:
    with run_apiserver() as server, server.client() as c:
        yield c


def exists(client: Client, gvr: GroupVersionResource, name: str, namespace: str = "") -> bool:
    try:
        client.resource(gvr).get(name, namespace=namespace)
    except errors.NotFound:
        return False
    return True


def marked(doc: dict[str, Any], annotation: str) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    out["metadata"].setdefault("annotations", {})[annotation] = "x"
    return out


def test_what_an_earlier_tessera_up_applied_under_deploys_names_goes_and_nothing_else(client: Client) -> None:
    # What tessera up applied before it had names of its own: deploy's RBAC and webhook as they are.
    rbac = identities.rbac_manifests()
    hooks = webhook.documents()
    service, configuration = hooks["Service"], hooks["ValidatingWebhookConfiguration"]
    endpoints = {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {
            "name": service["metadata"]["name"],
            "namespace": NAMESPACE,
            "labels": service["metadata"]["labels"],
        },
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "webhook", "port": 40000}]}],
    }
    identities.apply_manifests(client, rbac)
    client.resource(SERVICES).create({**service, "spec": {"ports": service["spec"]["ports"]}}, namespace=NAMESPACE)
    client.resource(ENDPOINTS).create(endpoints, namespace=NAMESPACE)
    client.resource(VALIDATING_WEBHOOK_CONFIGURATIONS).create(configuration)
    # ... but one ClusterRole is a Helm release's now and one was `kubectl apply`-ed: theirs, not ours.
    scheduler = next(d for d in rbac if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "tessera-scheduler")
    agent = next(d for d in rbac if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "tessera-agent")
    client.resource(CLUSTER_ROLES).update(marked(scheduler, ANNOTATION_HELM_RELEASE_NAME))
    applied = marked(agent, ANNOTATION_KUBECTL_LAST_APPLIED)
    applied["metadata"]["annotations"][ANNOTATION_KUBECTL_LAST_APPLIED] = json.dumps(agent)
    client.resource(CLUSTER_ROLES).update(applied)
    # And tessera up's own objects now, which must stay.
    identities.apply_rbac(client)

    retired = ownnames.retire_deploy_names(client, [*rbac, *hooks.values()])

    assert "ClusterRole tessera-controller" in retired and "ServiceAccount tessera-system/tessera-agent" in retired
    assert {
        "Service tessera-system/tessera-controller-webhook",
        "Endpoints tessera-system/tessera-controller-webhook",
        "ValidatingWebhookConfiguration tessera-controller",
    } <= set(retired)
    assert "ClusterRole tessera-scheduler" not in retired and "ClusterRole tessera-agent" not in retired
    assert exists(client, CLUSTER_ROLES, "tessera-scheduler") and exists(client, CLUSTER_ROLES, "tessera-agent")
    for gvr, name, namespace in (
        (CLUSTER_ROLES, "tessera-controller", ""),
        (CLUSTER_ROLE_BINDINGS, "tessera-scheduler", ""),
        (ROLES, "tessera-scheduler-leader-election", NAMESPACE),
        (SERVICE_ACCOUNTS, "tessera-scheduler", NAMESPACE),
        (VALIDATING_WEBHOOK_CONFIGURATIONS, "tessera-controller", ""),
    ):
        assert not exists(client, gvr, name, namespace), f"{gvr.kind} {name} was left"
    for doc in ownnames.own(rbac):  # tessera up's own are untouched
        namespace = doc["metadata"].get("namespace", "")
        kind = {"ClusterRole": CLUSTER_ROLES, "ClusterRoleBinding": CLUSTER_ROLE_BINDINGS, "Role": ROLES}.get(
            doc["kind"]
        )
        assert kind is None or exists(client, kind, doc["metadata"]["name"], namespace)
    assert ownnames.retire_deploy_names(client, [*rbac, *hooks.values()]) == [], "not idempotent"


def test_prune_removes_tessera_ups_own_rbac_it_applies_no_more(client: Client) -> None:
    applied = identities.apply_rbac(client)
    stale = {  # a role an earlier tessera up had (its dashboard's, before deploy/dashboard/)
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "tessera-up:dashboard", "labels": {"app.kubernetes.io/managed-by": "tessera-up"}},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}],
    }
    theirs = {**stale, "metadata": {"name": "tessera-up:someone-elses"}}  # no label: not tessera up's
    identities.apply_manifests(client, [stale, theirs])

    assert ownnames.prune(client, applied) == ["ClusterRole tessera-up:dashboard"]
    assert not exists(client, CLUSTER_ROLES, "tessera-up:dashboard")
    assert exists(client, CLUSTER_ROLES, "tessera-up:someone-elses")
    assert all(exists(client, CLUSTER_ROLES, d["metadata"]["name"]) for d in applied if d["kind"] == "ClusterRole"), (
        "pruned what it applies"
    )
    assert ownnames.prune(client, applied) == []
