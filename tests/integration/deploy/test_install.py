"""Both install paths of docs/user/deploy.md, applied to a running API server.

`kubectl apply -k deploy/` with each kubectl the machine has, and `helm install`/`upgrade`/
`uninstall` of deploy/helm/tessera with real Helm (helm-python-sdk, Helm's Go library), against
the embedded API server over HTTPS: it validates every field it knows of apps/v1, policy/v1,
RBAC and the CRDs, so a typo that only a server would catch fails here, not on a cluster.

Helm keeps its releases where it does by default, in Secrets, which its client-go writes in
protobuf (apiserver/protobuf.py); its ConfigMap driver, the other storage a cluster offers, too.
"""

from __future__ import annotations

import base64
import gzip
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from cli.launchers.apiserver import EmbeddedAPIServer, run_apiserver
from tests.support import chart
from tests.support.kubectl import KubectlBinary, kubectl_binaries
from tests.support.manifests import DEPLOY, NAMESPACE, Obj

pytestmark = pytest.mark.integration

KUBECTLS = kubectl_binaries()
if not KUBECTLS:
    pytest.skip(
        "no kubectl installed (as root, `make test` installs Debian's kubernetes-client)", allow_module_level=True
    )
NEWEST = KUBECTLS[-1]


@pytest.fixture
def server() -> Iterator[EmbeddedAPIServer]:
    """A fresh server per test: each install path starts from an empty cluster."""
    with run_apiserver(secure=True) as server:
        yield server


def ok(result: Any) -> str:
    assert result.returncode == 0, f"kubectl failed ({result.returncode}):\n{result.stderr}"
    return str(result.stdout)


def live(server: EmbeddedAPIServer, kubectl: KubectlBinary, obj: Obj) -> Obj | None:
    """The object as the server stores it, or None."""
    api_version, kind, namespace, name = chart.identity(obj)
    resource = f"{kind.lower()}.{api_version.split('/')[0]}" if "/" in api_version else kind.lower()
    where = ["-n", namespace] if namespace else []
    result = kubectl.run(server.kubeconfig, "get", resource, name, *where, "-o", "json", "--ignore-not-found")
    text = ok(result).strip()
    return json.loads(text) if text else None


def test_kubectl_apply_k_deploy_creates_every_object_and_is_idempotent(server: EmbeddedAPIServer) -> None:
    for kubectl in KUBECTLS:
        ok(kubectl.run(server.kubeconfig, "apply", "-f", str(DEPLOY / "crds")))
        first = ok(kubectl.run(server.kubeconfig, "apply", "-k", str(DEPLOY)))
        expected = chart.kustomize()
        assert len(first.splitlines()) == len(expected), first
        for obj in expected:
            stored = live(server, kubectl, obj)
            assert stored is not None, f"{chart.identity(obj)} was not created"
            assert stored["metadata"].get("labels") == obj["metadata"].get("labels")
        # The server's defaults do not look like changes to kubectl: applying again changes nothing.
        # (kubectl still says "configured" for PodDisruptionBudgets: their selector's patch strategy
        # is "replace", so every apply sends it, as against kube-apiserver.)
        again = ok(kubectl.run(server.kubeconfig, "apply", "-k", str(DEPLOY)))
        changed = [line for line in again.splitlines() if not line.endswith(" unchanged")]
        assert all(line.startswith("poddisruptionbudget.policy/") for line in changed), again


def test_kubectl_apply_k_deploy_dashboard_after_deploy(server: EmbeddedAPIServer) -> None:
    # The optional dashboard (docs/user/dashboard.md) goes on top of the base install.
    ok(NEWEST.run(server.kubeconfig, "apply", "-f", str(DEPLOY / "crds")))
    ok(NEWEST.run(server.kubeconfig, "apply", "-k", str(DEPLOY)))
    out = ok(NEWEST.run(server.kubeconfig, "apply", "-k", str(DEPLOY / "dashboard")))
    expected = chart.kustomize(DEPLOY / "dashboard")
    assert out.count(" created") == len(expected), out
    for obj in expected:
        assert live(server, NEWEST, obj) is not None, f"{chart.identity(obj)} was not created"


def test_the_server_refuses_an_invalid_field_in_deploy(server: EmbeddedAPIServer, tmp_path: Path) -> None:
    # The check above can fail: the same manifests with one value a server refuses do not apply.
    # (The embedded server validates the fields kube-apiserver's workload strategies check, and
    # every field of a CRD; it does not yet refuse unknown fields of built-in kinds.)
    overlay = tmp_path / "invalid"
    shutil.copytree(DEPLOY, overlay, ignore=shutil.ignore_patterns("helm", "node", "cert-manager"))
    scheduler = overlay / "scheduler.yaml"
    scheduler.write_text(scheduler.read_text().replace("replicas: 2", "replicas: -2"))
    result = NEWEST.run(server.kubeconfig, "apply", "-k", str(overlay))
    assert result.returncode == 1
    assert "spec.replicas: Invalid value: -2: must be greater than or equal to 0" in result.stderr, result.stderr


def config(server: EmbeddedAPIServer, storage: str | None = None) -> helm.Config:
    """Helm as a user runs it: with its default release storage (Secrets) unless told otherwise."""
    return helm.Config(namespace=NAMESPACE, kubeconfig_path=str(server.kubeconfig), storage_driver=storage)


def stored_releases(server: EmbeddedAPIServer, kind: str = "secrets") -> dict[str, Obj]:
    """Helm's release records as the server holds them: name -> the object (labels `owner=helm`)."""
    text = ok(NEWEST.run(server.kubeconfig, "get", kind, "-n", NAMESPACE, "-l", "owner=helm", "-o", "json"))
    return {item["metadata"]["name"]: item for item in json.loads(text)["items"]}


def release_record(obj: Obj) -> Obj:
    """What Helm wrote in a record: base64 of gzip of the release's JSON (in a Secret's data, base64 once more)."""
    payload = obj["data"]["release"]
    if obj["kind"] == "Secret":
        payload = base64.b64decode(payload).decode()
    decoded: Obj = json.loads(gzip.decompress(base64.b64decode(payload)))
    return decoded


def test_helm_install_upgrade_uninstall(server: EmbeddedAPIServer) -> None:
    ok(NEWEST.run(server.kubeconfig, "create", "namespace", NAMESPACE))
    with config(server) as cfg:
        release = cfg.install(str(chart.CHART), chart.RELEASE, {}, timeout=60)
        assert (release["revision"], release["status"]) == (1, "deployed")
        assert release["notes"] == chart.notes()
        crd_names = {crd["metadata"]["name"] for crd in chart.crds()}
        installed = ok(NEWEST.run(server.kubeconfig, "get", "crds", "-o", "jsonpath={.items[*].metadata.name}"))
        assert crd_names <= set(installed.split())
        rendered = chart.objects()
        for obj in rendered:
            stored = live(server, NEWEST, obj)
            assert stored is not None, f"{chart.identity(obj)} was not installed"
            assert stored["metadata"]["annotations"]["meta.helm.sh/release-name"] == chart.RELEASE

        values = {"scheduler": {"replicas": 3}, "controller": {"webhook": {"enabled": False}}}
        upgraded = cfg.upgrade(str(chart.CHART), chart.RELEASE, values, timeout=60)
        assert (upgraded["revision"], upgraded["status"]) == (2, "deployed")
        scheduler = live(server, NEWEST, chart.one(rendered, "Deployment", "tessera-scheduler"))
        assert scheduler is not None and scheduler["spec"]["replicas"] == 3
        webhook = chart.one(rendered, "ValidatingWebhookConfiguration", "tessera-controller")
        assert live(server, NEWEST, webhook) is None, "the upgrade left the disabled webhook behind"

        cfg.rollback(chart.RELEASE, version=1)
        assert [(r["revision"], r["status"]) for r in cfg.history(chart.RELEASE)] == [
            (1, "superseded"),
            (2, "superseded"),
            (3, "deployed"),
        ]
        scheduler = live(server, NEWEST, chart.one(rendered, "Deployment", "tessera-scheduler"))
        assert scheduler is not None and scheduler["spec"]["replicas"] == 2, "the rollback kept revision 2's replicas"
        assert live(server, NEWEST, webhook) is not None, "the rollback did not bring the webhook back"
        assert [(r["name"], r["revision"], r["status"]) for r in cfg.list()] == [(chart.RELEASE, 3, "deployed")]

        # Each revision is a Secret of type helm.sh/release.v1 whose labels and payload are what Helm sent.
        records = stored_releases(server)
        assert sorted(records) == [f"sh.helm.release.v1.{chart.RELEASE}.v{n}" for n in (1, 2, 3)]
        latest = records[f"sh.helm.release.v1.{chart.RELEASE}.v3"]
        assert latest["type"] == "helm.sh/release.v1"
        labels = latest["metadata"]["labels"]
        assert (labels["owner"], labels["name"], labels["status"], labels["version"]) == (
            "helm",
            chart.RELEASE,
            "deployed",
            "3",
        )
        assert release_record(latest)["version"] == 3
        assert release_record(latest)["name"] == chart.RELEASE

        cfg.uninstall(chart.RELEASE)
        assert [obj for obj in rendered if live(server, NEWEST, obj) is not None] == []
        assert stored_releases(server) == {}, "uninstall left release records behind"
        assert cfg.list(all_states=True) == []


def test_helm_configmap_storage_and_create_namespace(server: EmbeddedAPIServer) -> None:
    # Helm's other in-cluster storage, ConfigMaps (HELM_DRIVER=configmap), and `--create-namespace`:
    # a Namespace and ConfigMaps sent in protobuf, a release listed across namespaces.
    with config(server, "configmap") as cfg:
        release = cfg.install(str(chart.CHART), chart.RELEASE, {}, timeout=60, create_namespace=True)
        assert (release["revision"], release["status"]) == (1, "deployed")
        namespace = json.loads(ok(NEWEST.run(server.kubeconfig, "get", "namespace", NAMESPACE, "-o", "json")))
        assert namespace["status"]["phase"] == "Active"
        records = stored_releases(server, "configmaps")
        assert list(records) == [f"sh.helm.release.v1.{chart.RELEASE}.v1"]
        assert release_record(records[f"sh.helm.release.v1.{chart.RELEASE}.v1"])["info"]["status"] == "deployed"
        assert [(r["name"], r["namespace"]) for r in cfg.list(all_namespaces=True)] == [(chart.RELEASE, NAMESPACE)]
        cfg.uninstall(chart.RELEASE)
        assert stored_releases(server, "configmaps") == {}


def test_helm_rendered_custom_values_apply_in_another_namespace(server: EmbeddedAPIServer) -> None:
    # `helm template` output with non-default values, applied by kubectl: every value lands in a
    # field the server accepts.
    objs = chart.objects({**chart.CUSTOM, "namespace": {"create": True}}, namespace="gpu")
    objs.sort(key=lambda obj: obj["kind"] != "Namespace")  # as Helm orders them: the namespace first
    out = ok(NEWEST.run(server.kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump_all(objs)))
    assert out.count(" created") == len(objs), out
    agent = live(server, NEWEST, chart.one(objs, "DaemonSet", "tessera-agent"))
    assert agent is not None
    assert agent["spec"]["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
