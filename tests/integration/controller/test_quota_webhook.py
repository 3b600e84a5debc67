"""The controller's ElasticQuota webhook, live: a real API server calling a real controller process
over HTTPS, registered exactly as `tessera up` registers it (Service, Endpoints, configuration from
deploy/), and quotas written by kubectl and the official Python client."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes.client
import kubernetes.config
import pytest

from apis.extension import names
from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.controller import ControllerProcess
from cli.launchers.scheduler import pod_manifest
from cli.localcluster import webhook
from kube.client import Client
from kube.errors import APIError, Conflict
from kube.resources import PODS
from tests.support import apiservers
from tests.support.kubectl import KUBECTL, Kubectl
from tests.support.quotas import elastic_quota
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

DENIED = 'admission webhook "velasticquota.koordinator.sh" denied the request: '


apiserver = apiservers.apiserver_fixture("module", secure=True)


@pytest.fixture(scope="module")
def hooks(tmp_path_factory: pytest.TempPathFactory) -> webhook.WebhookSetup:
    return webhook.prepare(tmp_path_factory.mktemp("webhook"))


@pytest.fixture(scope="module")
def controller(
    start_controller: Callable[..., ControllerProcess], client: Client, hooks: webhook.WebhookSetup
) -> ControllerProcess:
    process = start_controller(*hooks.controller_args())
    webhook.register(client, hooks)
    return process


def quota(name: str, **fields: Any) -> dict[str, Any]:
    min_gpu = fields.pop("min_gpu", 0)
    return elastic_quota(name, min_gpu=str(min_gpu), **fields)


def test_quotas_that_break_the_tree_are_refused_by_every_client(
    controller: ControllerProcess, client: Client, apiserver: EmbeddedAPIServer, tmp_path: Path
) -> None:
    quotas = client.resource(names.ELASTIC_QUOTAS)
    quotas.create(quota("wh-org", is_parent=True, min_gpu=4), namespace="default")
    quotas.create(quota("wh-a", parent="wh-org", min_gpu=3), namespace="default")  # a good quota is stored
    too_much = quota("wh-b", parent="wh-org", min_gpu=2)
    expected = (
        DENIED + "checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: wh-org "
        "(quota wh-org: children's min[nvidia.com/gpu] sum to 5, more than its min[nvidia.com/gpu] 4 "
        "(children: wh-a, wh-b))"
    )
    with pytest.raises(APIError) as ours:
        quotas.create(too_much, namespace="default")
    assert (ours.value.status, ours.value.message) == (403, expected)

    official = kubernetes.config.new_client_from_config(config_file=str(apiserver.kubeconfig))
    try:
        with pytest.raises(kubernetes.client.ApiException) as theirs:
            kubernetes.client.CustomObjectsApi(official).create_namespaced_custom_object(
                "scheduling.sigs.k8s.io", "v1alpha1", "default", "elasticquotas", too_much
            )
    finally:
        official.close()
    assert theirs.value.status == 403 and json.loads(theirs.value.body)["message"] == expected

    if KUBECTL is not None:
        kubectl = Kubectl(apiserver, tmp_path)
        manifest = tmp_path / "quota.json"
        manifest.write_text(json.dumps(too_much))
        out = kubectl("apply", "-f", str(manifest), check=False)
        assert f'Error from server (Forbidden): error when creating "{manifest}": {expected}' in out
        out = kubectl("delete", "elasticquota", "wh-org", "-n", "default", check=False)
        assert (
            f"Error from server (Forbidden): {DENIED}quota wh-org: cannot be deleted while it has children (wh-a)"
            in out
        )

    flip = quota("wh-org", is_parent=False, min_gpu=4)
    flip["metadata"]["resourceVersion"] = quotas.get("wh-org", namespace="default")["metadata"]["resourceVersion"]
    with pytest.raises(APIError) as flipped:
        quotas.update(flip, namespace="default")
    assert flipped.value.message == (
        DENIED + "quota has children, isParent is forbidden to modify as false, quotaName:wh-org "
        "(quota wh-org: is-parent cannot change from true to false while it has children (wh-a))"
    )
    assert controller.metric("tessera_controller_webhook_reviews_total", allowed="false") >= 3


def test_with_the_controller_down_quota_writes_fail_closed(
    controller: ControllerProcess, client: Client, hooks: webhook.WebhookSetup
) -> None:
    controller.terminate()
    try:
        with pytest.raises(APIError) as refused:
            client.resource(names.ELASTIC_QUOTAS).create(quota("wh-down"), namespace="default")
        assert refused.value.status == 500
        assert refused.value.message.startswith(
            'Internal error occurred: failed calling webhook "velasticquota.koordinator.sh": failed to call webhook: '
            f'Post "https://{webhook.SERVICE}.tessera-system.svc:443/validate-scheduling-sigs-k8s-io-v1alpha1'
            '-elasticquota?timeout=10s": dial tcp 127.0.0.1:'
        )
        # Pods do not wait on the controller (failurePolicy Ignore for vpod.koordinator.sh).
        client.resource(PODS).create(pod_manifest("while-down", {"cpu": "1"}))
    finally:
        controller.start()
    client.resource(names.ELASTIC_QUOTAS).create(quota("wh-up"), namespace="default")


def test_the_kubectl_view_of_the_configuration(
    controller: ControllerProcess, apiserver: EmbeddedAPIServer, tmp_path: Path
) -> None:
    if KUBECTL is None:
        pytest.skip("kubectl is not installed")
    out = subprocess.run(
        [KUBECTL, "get", "validatingwebhookconfigurations", "-o", "name"],
        capture_output=True,
        text=True,
        env=Kubectl(apiserver, tmp_path).env,
        timeout=60,
        check=True,
    ).stdout
    # tessera up's own name for deploy's tessera-controller (cli/localcluster/ownnames.py)
    assert out.strip() == "validatingwebhookconfiguration.admissionregistration.k8s.io/tessera-up-tessera-controller"


def test_a_pod_on_a_parent_quota_is_refused_at_admission(controller: ControllerProcess, client: Client) -> None:
    """Koordinator's vpod.koordinator.sh rule, served by the controller: refused with
    Koordinator's words instead of admitted to wait forever; an update making a quota with pods
    a parent is refused too."""
    quotas = client.resource(names.ELASTIC_QUOTAS)
    quotas.create(quota("wh-parent", is_parent=True), namespace="default")
    quotas.create(quota("wh-used"), namespace="default")
    # The pod webhook checks against the controller's cache (as Koordinator's does): once the
    # controller has seen the quotas (it writes their Valid condition), it refuses.
    for name in ("wh-parent", "wh-used"):
        wait_for(lambda n=name: (quotas.get(n, namespace="default").get("status") or {}).get("conditions"), what=name)
    pods = client.resource(PODS)
    with pytest.raises(APIError) as refused:
        pods.create(pod_manifest("on-parent", {"cpu": "1"}, labels={names.LABEL_QUOTA_NAME: "wh-parent"}))
    assert (refused.value.status, refused.value.message) == (
        403,
        'admission webhook "vpod.koordinator.sh" denied the request: '
        "pod can not be linked to a parentQuotaGroup,quota:wh-parent, pod:on-parent",
    )
    pods.create(pod_manifest("on-child", {"cpu": "1"}, labels={names.LABEL_QUOTA_NAME: "wh-used"}))

    def refusal() -> APIError | None:
        """The update's refusal; None (try again) when the controller's status write came first
        (ElasticQuota has no status subresource, as Koordinator ships it: 409 Conflict)."""
        flip = quota("wh-used", is_parent=True)
        current = quotas.get("wh-used", namespace="default")
        flip["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        with pytest.raises(APIError) as flipped:
            quotas.update(flip, namespace="default")
        return None if isinstance(flipped.value, Conflict) else flipped.value

    error = wait_for(refusal, what="the update refused by the webhook")
    assert (
        error is not None
        and error.message
        == DENIED + "quota has bound pods, isParent is forbidden to modify as true, quotaName: wh-used"
    )
    assert controller.metric("tessera_controller_webhook_reviews_total", webhook="vpod.koordinator.sh") >= 2
