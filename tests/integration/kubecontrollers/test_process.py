"""`tessera kube-controller-manager` as a process against the real API server process, with no
scheduler and no kubelet: what the controllers do from objects alone (pods stay Pending).

The full story — pods Running, Jobs finishing, rollouts, evictions — is tests/e2e/test_workloads.py.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.kubecontrollers import KubeControllersProcess
from kube import errors
from kube.client import Client
from kubecontrollers.kinds import DEPLOYMENTS, JOBS, PODS, REPLICA_SETS
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def controllers(
    apiserver: EmbeddedAPIServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KubeControllersProcess]:
    directory = tmp_path_factory.mktemp("kcm")
    process = KubeControllersProcess(apiserver.kubeconfig, directory=directory, args=["--job-backoff", "0.1"])
    process.start()
    yield process
    assert process.terminate() == 0
    shutil.rmtree(directory, ignore_errors=True)


def template(app: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": app}}, "spec": {"containers": [{"name": "m", "image": "x"}], **spec}}


def pods(client: Client, namespace: str, selector: str = "") -> list[dict[str, Any]]:
    return client.resource(PODS).list(namespace=namespace, label_selector=selector).items


def test_a_replicaset_keeps_its_pods_and_a_foreground_delete_takes_them_along(
    controllers: KubeControllersProcess, client: Client, namespace: str
) -> None:
    rs = {
        "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": template("web")},
    }
    client.resource(REPLICA_SETS).create(rs, namespace=namespace)
    made = wait_for(
        lambda: len(pods(client, namespace)) == 3 and pods(client, namespace), timeout_s=TIMEOUT_S, what="3 pods"
    )
    refs = [p["metadata"]["ownerReferences"][0] for p in made]
    assert {(r["kind"], r["name"], r["controller"]) for r in refs} == {("ReplicaSet", "web", True)}
    client.resource(PODS).delete(made[0]["metadata"]["name"], namespace=namespace)
    wait_for(
        lambda: (
            len(pods(client, namespace)) == 3
            and made[0]["metadata"]["name"] not in {p["metadata"]["name"] for p in pods(client, namespace)}
        ),
        timeout_s=TIMEOUT_S,
        what="a replacement pod",
    )
    client.resource(REPLICA_SETS).delete("web", namespace=namespace, propagation_policy="Foreground")

    def gone() -> bool:
        try:
            client.resource(REPLICA_SETS).get("web", namespace=namespace)
        except errors.NotFound:
            return not pods(client, namespace)
        return False

    wait_for(gone, timeout_s=TIMEOUT_S, what="the ReplicaSet and its pods to go")


def test_a_deployment_makes_a_replicaset_and_orphan_keeps_it(
    controllers: KubeControllersProcess, client: Client, namespace: str
) -> None:
    deployment = {
        "metadata": {"name": "api"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "api"}}, "template": template("api")},
    }
    client.resource(DEPLOYMENTS).create(deployment, namespace=namespace)
    sets = wait_for(
        lambda: client.resource(REPLICA_SETS).list(namespace=namespace).items, timeout_s=TIMEOUT_S, what="a ReplicaSet"
    )
    assert sets[0]["metadata"]["name"].startswith("api-") and sets[0]["spec"]["replicas"] == 2
    wait_for(lambda: len(pods(client, namespace, "app=api")) == 2, timeout_s=TIMEOUT_S, what="2 pods")
    client.resource(DEPLOYMENTS).delete("api", namespace=namespace, propagation_policy="Orphan")
    kept = wait_for(
        lambda: [
            rs
            for rs in client.resource(REPLICA_SETS).list(namespace=namespace).items
            if not rs["metadata"].get("ownerReferences")
        ],
        timeout_s=TIMEOUT_S,
        what="the ReplicaSet to be orphaned",
    )
    assert len(kept) == 1
    wait_for(
        lambda: not _exists(client, DEPLOYMENTS, "api", namespace), timeout_s=TIMEOUT_S, what="the Deployment to go"
    )
    assert len(pods(client, namespace, "app=api")) == 2


def test_a_job_whose_pods_fail_stops_at_its_backoff_limit(
    controllers: KubeControllersProcess, client: Client, namespace: str
) -> None:
    job = {
        "metadata": {"name": "j"},
        "spec": {
            "backoffLimit": 1,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "m", "image": "x"}]}},
        },
    }
    client.resource(JOBS).create(job, namespace=namespace)
    for _ in range(2):  # play the kubelet: the pod fails
        running = wait_for(
            lambda: [p for p in pods(client, namespace) if p["status"].get("phase") == "Pending"],
            timeout_s=TIMEOUT_S,
            what="a pod of the Job",
        )
        name = running[0]["metadata"]["name"]
        client.resource(PODS).patch(name, {"status": {"phase": "Failed"}}, namespace=namespace, subresource="status")
    failed = wait_for(
        lambda: [
            c
            for c in (client.resource(JOBS).get("j", namespace=namespace).get("status") or {}).get("conditions") or ()
            if c["type"] == "Failed" and c["status"] == "True"
        ],
        timeout_s=TIMEOUT_S,
        what="the Job to fail",
    )
    assert failed[0]["reason"] == "BackoffLimitExceeded"
    assert len(pods(client, namespace)) == 2  # no third try


def _exists(client: Client, resource: Any, name: str, namespace: str) -> bool:
    try:
        client.resource(resource).get(name, namespace=namespace)
    except errors.NotFound:
        return False
    return True


def test_it_serves_health_and_metrics(controllers: KubeControllersProcess) -> None:
    status, _ = controllers.request("GET", "/readyz", timeout=5)
    assert status == 200
    assert controllers.metric_sum("tessera_kube_controllers_syncs_total", {}) is not None
