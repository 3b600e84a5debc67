"""ValidatingWebhookConfigurations called by the embedded server, as kube-apiserver calls them.

A real API server process, a real HTTPS webhook (`tests.support.webhooks`), and the three clients
users have: kubectl, the official Python client and ours. Each test registers its own
configuration, scoped by a namespaceSelector to its own namespace, and removes it after.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from concurrent import futures
from pathlib import Path
from typing import Any

import kubernetes.client
import kubernetes.config
import pytest

from apis.extension.names import GroupVersionResource
from cli.launchers.apiserver import EmbeddedAPIServer, run_apiserver
from kube.client import Client
from kube.errors import APIError
from kube.pki import CA
from kube.resources import CONFIG_MAPS, ENDPOINTS, NAMESPACES, SERVICES, VALIDATING_WEBHOOK_CONFIGURATIONS
from tests.support.kubectl import KUBECTL, Kubectl
from tests.support.waiting import wait_for
from tests.support.webhooks import ScriptedWebhook

pytestmark = pytest.mark.integration

CONFIGURATIONS = VALIDATING_WEBHOOK_CONFIGURATIONS
HOOK = "deny.tessera.test"
RULE = {
    "operations": ["CREATE", "UPDATE", "DELETE"],
    "apiGroups": [""],
    "apiVersions": ["v1"],
    "resources": ["configmaps"],
}


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedAPIServer]:
    with run_apiserver(secure=True) as s:
        yield s


@pytest.fixture
def client(server: EmbeddedAPIServer) -> Iterator[Client]:
    with server.client() as c:
        yield c


@pytest.fixture
def webhook(tmp_path: Path) -> Iterator[ScriptedWebhook]:
    with ScriptedWebhook(tmp_path, dns=("hook.webhooks.svc",)) as hook:
        yield hook


@pytest.fixture
def namespace(client: Client) -> str:
    """A namespace of this test only, labelled so only this test's webhooks see its objects."""
    name = f"wh-{uuid.uuid4().hex[:8]}"
    client.resource(NAMESPACES).create({"metadata": {"name": name, "labels": {"webhook-test": name}}})
    return name


@pytest.fixture
def register(client: Client, namespace: str) -> Iterator[Any]:
    names: list[str] = []

    def add(client_config: dict[str, Any], **fields: Any) -> dict[str, Any]:
        name = f"cfg-{uuid.uuid4().hex[:8]}"
        hook = {
            "name": HOOK,
            "clientConfig": client_config,
            "rules": [RULE],
            "namespaceSelector": {"matchLabels": {"webhook-test": namespace}},
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            **fields,
        }
        names.append(name)
        return client.resource(CONFIGURATIONS).create({"metadata": {"name": name}, "webhooks": [hook]})

    yield add
    for name in names:
        if _exists(client, name, CONFIGURATIONS):
            client.resource(CONFIGURATIONS).delete(name)


def url_config(hook: ScriptedWebhook) -> dict[str, Any]:
    return {"url": hook.url, "caBundle": hook.ca_bundle}


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"app": "x"}}, "data": data}


def test_a_configuration_is_defaulted_validated_and_listed(
    client: Client, register: Any, webhook: ScriptedWebhook
) -> None:
    stored = register(url_config(webhook))
    hook = stored["webhooks"][0]
    assert (hook["failurePolicy"], hook["matchPolicy"], hook["timeoutSeconds"]) == ("Fail", "Equivalent", 10)
    assert hook["objectSelector"] == {} and hook["rules"][0]["scope"] == "*"
    bad = {"metadata": {"name": "bad"}, "webhooks": [{"name": "short", "clientConfig": {"url": "http://x/"}}]}
    with pytest.raises(APIError) as refused:
        client.resource(CONFIGURATIONS).create(bad)
    assert refused.value.status == 422
    assert (
        'webhooks[0].name: Invalid value: "short": should be a domain with at least three segments'
        in refused.value.message
    )
    assert "webhooks[0].clientConfig.url: Invalid value: \"http://x/\": 'https' is the only allowed URL scheme" in (
        refused.value.message
    )
    assert "webhooks[0].sideEffects: Required value" in refused.value.message


def test_the_review_carries_what_kube_apiserver_sends(
    client: Client, register: Any, webhook: ScriptedWebhook, namespace: str
) -> None:
    register(url_config(webhook))
    cms = client.resource(CONFIG_MAPS)
    cms.create(configmap("a", k="1"), namespace=namespace)
    cms.patch("a", {"data": {"k": "2"}}, namespace=namespace)
    cms.delete("a", namespace=namespace)
    create, update, delete = (r["request"] for r in webhook.reviews)
    assert webhook.reviews[0]["apiVersion"] == "admission.k8s.io/v1"
    assert create["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert create["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert create["requestResource"] == create["resource"] and "subResource" not in create
    assert (create["operation"], create["name"], create["namespace"]) == ("CREATE", "a", namespace)
    assert create["object"]["data"] == {"k": "1"} and create["oldObject"] is None
    assert create["userInfo"]["username"] == "tessera-admin" and create["dryRun"] is False
    assert create["options"] == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
    assert len({create["uid"], update["uid"], delete["uid"]}) == 3
    assert update["operation"] == "UPDATE" and update["object"]["data"] == {"k": "2"}
    assert update["oldObject"]["data"] == {"k": "1"}
    assert delete["operation"] == "DELETE" and delete["object"] is None and delete["oldObject"]["data"] == {"k": "2"}
    assert delete["options"]["kind"] == "DeleteOptions"


def test_a_denial_reaches_all_three_clients_as_kube_apiserver_words_it(  # noqa: PLR0917 - fixtures
    server: EmbeddedAPIServer, client: Client, register: Any, webhook: ScriptedWebhook, namespace: str, tmp_path: Path
) -> None:
    register(url_config(webhook))
    webhook.answer = ScriptedWebhook.deny("configmaps are closed today")
    expected = f'admission webhook "{HOOK}" denied the request: configmaps are closed today'
    with pytest.raises(APIError) as ours:
        client.resource(CONFIG_MAPS).create(configmap("b"), namespace=namespace)
    assert (ours.value.status, ours.value.reason, ours.value.message) == (403, "Forbidden", expected)
    official = kubernetes.config.new_client_from_config(config_file=str(server.kubeconfig))
    try:
        with pytest.raises(kubernetes.client.ApiException) as theirs:
            kubernetes.client.CoreV1Api(official).create_namespaced_config_map(namespace, configmap("b"))
    finally:
        official.close()
    assert theirs.value.status == 403 and json.loads(theirs.value.body)["message"] == expected
    if KUBECTL is not None:
        manifest = tmp_path / "cm.yaml"
        manifest.write_text(f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: b, namespace: {namespace}}}\n")
        out = Kubectl(server, tmp_path)("apply", "-f", str(manifest), check=False)
        assert f'Error from server (Forbidden): error when creating "{manifest}": {expected}' in out
    assert client.resource(CONFIG_MAPS).list(namespace=namespace).items == []


def test_dry_run_is_reviewed_with_dry_run_true_and_nothing_is_stored(
    client: Client, register: Any, webhook: ScriptedWebhook, namespace: str
) -> None:
    register(url_config(webhook))
    client.resource(CONFIG_MAPS).create(configmap("c"), namespace=namespace, dry_run=True)
    review = webhook.reviews[-1]["request"]
    assert review["dryRun"] is True and review["options"]["dryRun"] == ["All"]
    assert client.resource(CONFIG_MAPS).list(namespace=namespace).items == []


def test_a_webhook_that_is_down_fails_closed_or_open_by_failure_policy(
    client: Client, register: Any, webhook: ScriptedWebhook, namespace: str
) -> None:
    port = webhook.port
    webhook.__exit__()
    config = {"url": f"https://127.0.0.1:{port}/validate", "caBundle": webhook.ca_bundle}
    name = register(config)["metadata"]["name"]
    with pytest.raises(APIError) as refused:
        client.resource(CONFIG_MAPS).create(configmap("d"), namespace=namespace)
    assert refused.value.status == 500 and refused.value.reason == "InternalError"
    assert refused.value.message == (
        f'Internal error occurred: failed calling webhook "{HOOK}": failed to call webhook: '
        f'Post "https://127.0.0.1:{port}/validate?timeout=10s": dial tcp 127.0.0.1:{port}: connect: connection refused'
    )
    client.resource(CONFIGURATIONS).delete(name)
    register(config, failurePolicy="Ignore")
    assert client.resource(CONFIG_MAPS).create(configmap("d"), namespace=namespace)["metadata"]["name"] == "d"


def test_a_slow_webhook_times_out_after_timeout_seconds(
    client: Client, register: Any, webhook: ScriptedWebhook, namespace: str
) -> None:
    register(url_config(webhook), timeoutSeconds=1)
    webhook.hold()  # it answers only once the create has failed: the server did not wait for it
    started = time.monotonic()
    with pytest.raises(APIError) as refused:
        client.resource(CONFIG_MAPS).create(configmap("e"), namespace=namespace)
    took = time.monotonic() - started
    webhook.release()
    assert refused.value.status == 500 and refused.value.message.endswith("context deadline exceeded")
    assert "?timeout=1s" in refused.value.message
    assert len(webhook.reviews) == 1
    assert took >= 1.0  # it waited out the timeout


def test_a_certificate_the_ca_bundle_does_not_vouch_for_is_a_tls_failure(
    client: Client, register: Any, webhook: ScriptedWebhook, namespace: str
) -> None:
    stranger = base64.b64encode(CA.create("someone-else").pem).decode()
    register({"url": webhook.url, "caBundle": stranger})
    with pytest.raises(APIError) as refused:
        client.resource(CONFIG_MAPS).create(configmap("f"), namespace=namespace)
    assert refused.value.status == 500
    assert "tls: failed to verify certificate: x509: certificate signed by unknown authority" in refused.value.message
    assert webhook.reviews == []


def test_a_service_reference_is_resolved_through_its_endpoints(
    client: Client, register: Any, webhook: ScriptedWebhook, namespace: str
) -> None:
    if not _exists(client, "webhooks"):
        client.resource(NAMESPACES).create({"metadata": {"name": "webhooks"}})
    service = {"namespace": "webhooks", "name": "hook", "path": "/validate", "port": 443}
    register({"service": service, "caBundle": webhook.ca_bundle})
    svc = {
        "metadata": {"name": "hook"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": webhook.port}]},
    }
    client.resource(SERVICES).create(svc, namespace="webhooks")
    try:
        with pytest.raises(APIError) as refused:
            client.resource(CONFIG_MAPS).create(configmap("g"), namespace=namespace)
        assert refused.value.message.endswith(
            'Post "https://hook.webhooks.svc:443/validate?timeout=10s": no endpoints available for service "hook"'
        )
        endpoints = {
            "metadata": {"name": "hook"},
            "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": webhook.port}]}],
        }
        client.resource(ENDPOINTS).create(endpoints, namespace="webhooks")
        webhook.answer = ScriptedWebhook.deny("through the service")
        with pytest.raises(APIError) as denied:
            client.resource(CONFIG_MAPS).create(configmap("g"), namespace=namespace)
        assert denied.value.message.endswith("denied the request: through the service")
    finally:
        client.resource(SERVICES).delete("hook", namespace="webhooks")
        if _exists(client, "hook", ENDPOINTS, "webhooks"):
            client.resource(ENDPOINTS).delete("hook", namespace="webhooks")


def _exists(client: Client, name: str, gvr: GroupVersionResource = NAMESPACES, namespace: str = "") -> bool:
    try:
        client.resource(gvr).get(name, namespace=namespace)
    except APIError:
        return False
    return True


def test_webhooks_are_not_called_for_other_namespaces_or_selectors_that_do_not_match(
    client: Client, register: Any, webhook: ScriptedWebhook, namespace: str
) -> None:
    register(
        url_config(webhook), objectSelector={"matchExpressions": [{"key": "app", "operator": "In", "values": ["y"]}]}
    )
    webhook.answer = ScriptedWebhook.deny("no")
    client.resource(CONFIG_MAPS).create(configmap("h"), namespace=namespace)  # labelled app=x
    client.resource(CONFIG_MAPS).create(configmap("h"), namespace="default")
    client.resource(CONFIG_MAPS).delete("h", namespace="default")
    assert webhook.reviews == []


def test_configurations_survive_a_restart(tmp_path: Path) -> None:
    with ScriptedWebhook(tmp_path) as hook, run_apiserver() as server:
        with server.client() as c:
            c.resource(CONFIGURATIONS).create(
                {
                    "metadata": {"name": "persisted"},
                    "webhooks": [
                        {
                            "name": HOOK,
                            "clientConfig": url_config(hook),
                            "rules": [RULE],
                            "sideEffects": "None",
                            "admissionReviewVersions": ["v1"],
                        }
                    ],
                }
            )
        server.restart()
        hook.answer = ScriptedWebhook.deny("still here")
        with server.client() as c, pytest.raises(APIError) as refused:
            c.resource(CONFIG_MAPS).create(configmap("i"), namespace="default")
        assert refused.value.message.endswith("denied the request: still here")


def test_an_object_changed_while_its_webhooks_answered_is_a_conflict(
    client: Client, register: Any, webhook: ScriptedWebhook, namespace: str
) -> None:
    register(url_config(webhook))
    cms = client.resource(CONFIG_MAPS)
    cms.create(configmap("j", k="0"), namespace=namespace)

    fast_written = threading.Event()

    def slow_for_the_first_update(review: Mapping[str, Any]) -> dict[str, Any]:
        if (review["request"]["object"] or {}).get("data", {}).get("k") == "slow":
            fast_written.wait(60)  # answers once the other update went through
        return {"allowed": True}

    webhook.answer = slow_for_the_first_update
    with futures.ThreadPoolExecutor(1) as pool:
        slow = pool.submit(cms.patch, "j", {"data": {"k": "slow"}}, namespace=namespace)
        wait_for(lambda: len(webhook.reviews) == 2, what="the create's and the slow update's reviews")
        cms.patch("j", {"data": {"k": "fast"}}, namespace=namespace)
        fast_written.set()
        with pytest.raises(APIError) as conflict:
            slow.result(timeout=60)
    assert conflict.value.status == 409 and "the object has been modified" in conflict.value.message
    assert cms.get("j", namespace=namespace)["data"] == {"k": "fast"}
