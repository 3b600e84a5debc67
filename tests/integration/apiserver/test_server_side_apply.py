"""Server-side apply through each kubectl and the official client, as against a real cluster."""

from collections.abc import Iterator

import kubernetes
import pytest
import urllib3
import yaml

from cli.launchers.apiserver import EmbeddedAPIServer, run_apiserver
from tests.support.kubectl import KubectlBinary, kubectl_binaries

pytestmark = pytest.mark.integration

KUBECTLS = kubectl_binaries()

DEVICE = """
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Device
metadata:
  name: {name}
  labels: {{pool: {pool}}}
spec:
  devices:
  - {{type: gpu, minor: 0, health: true}}
"""


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedAPIServer]:
    with run_apiserver(secure=True) as server:
        server.install_crds()
        yield server


@pytest.mark.skipif(not KUBECTLS, reason="no kubectl installed")
@pytest.mark.parametrize("kubectl", KUBECTLS, ids=lambda k: k.id)
def test_kubectl_apply_server_side_conflicts_and_force(server: EmbeddedAPIServer, kubectl: KubectlBinary) -> None:
    name = f"ssa-{kubectl.minor}"
    first = kubectl.run(
        server.kubeconfig, "apply", "--server-side", "-f", "-", stdin=DEVICE.format(name=name, pool="a")
    )
    assert first.returncode == 0 and "serverside-applied" in first.stdout, first.stderr
    other = ["apply", "--server-side", "--field-manager=team-b", "-f", "-"]
    clash = kubectl.run(server.kubeconfig, *other, stdin=DEVICE.format(name=name, pool="b"))
    assert clash.returncode == 1
    conflict = 'Apply failed with 1 conflict: conflict with "kubectl" using scheduling.koordinator.sh/v1alpha1'
    assert f"{conflict}: .metadata.labels.pool" in clash.stderr
    forced = kubectl.run(server.kubeconfig, *other, "--force-conflicts", stdin=DEVICE.format(name=name, pool="b"))
    assert forced.returncode == 0, forced.stderr
    got = yaml.safe_load(kubectl.run(server.kubeconfig, "get", "device", name, "-o", "yaml").stdout)
    assert got["metadata"]["labels"] == {"pool": "b"}
    show = ["--show-managed-fields"] if kubectl.minor >= 21 else []  # kubectl 1.21+ hides them by default
    shown = kubectl.run(server.kubeconfig, "get", "device", name, "-o", "json", *show)
    managers = {m["manager"]: m for m in yaml.safe_load(shown.stdout)["metadata"]["managedFields"]}
    assert set(managers) == {"kubectl", "team-b"}
    assert managers["team-b"]["fieldsV1"]["f:metadata"] == {"f:labels": {"f:pool": {}}}
    assert "f:labels" not in managers["kubectl"]["fieldsV1"].get("f:metadata", {}), "forced away from kubectl"
    # Re-applying an unchanged manifest changes nothing.
    again = kubectl.run(server.kubeconfig, *other, stdin=DEVICE.format(name=name, pool="b"))
    assert again.returncode == 0, again.stderr


def test_official_client_server_side_apply(server: EmbeddedAPIServer) -> None:
    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(server.kubeconfig), client_configuration=config)
    dynamic = kubernetes.dynamic.DynamicClient(kubernetes.client.ApiClient(config))
    configmaps = dynamic.resources.get(api_version="v1", kind="ConfigMap")
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "1"}}
    created = configmaps.server_side_apply(body=body, name="ssa", namespace="default", field_manager="one")
    assert created.data.a == "1" and created.metadata.managedFields[0].manager == "one"
    with pytest.raises(kubernetes.client.ApiException) as e:
        configmaps.server_side_apply(
            body={**body, "data": {"a": "2"}}, name="ssa", namespace="default", field_manager="two"
        )
    assert e.value.status == 409 and "FieldManagerConflict" in e.value.body
    forced = configmaps.server_side_apply(
        body={**body, "data": {"a": "2"}}, name="ssa", namespace="default", field_manager="two", force_conflicts=True
    )
    assert forced.data.a == "2"


@pytest.mark.skipif(not KUBECTLS, reason="no kubectl installed")
def test_a_label_set_by_kubectl_label_conflicts_with_a_later_apply(server: EmbeddedAPIServer) -> None:
    kubectl = KUBECTLS[-1]
    name = "ssa-label"
    applied = kubectl.run(
        server.kubeconfig, "apply", "--server-side", "-f", "-", stdin=DEVICE.format(name=name, pool="a")
    )
    assert applied.returncode == 0, applied.stderr
    labelled = kubectl.run(server.kubeconfig, "label", "--overwrite", "device", name, "pool=z")
    assert labelled.returncode == 0, labelled.stderr
    clash = kubectl.run(
        server.kubeconfig, "apply", "--server-side", "-f", "-", stdin=DEVICE.format(name=name, pool="a")
    )
    assert clash.returncode == 1 and 'conflict with "kubectl-label"' in clash.stderr, clash.stderr


def test_an_apply_that_creates_is_201(server: EmbeddedAPIServer) -> None:
    pool = urllib3.PoolManager(ssl_context=server.ssl_context())
    headers = {"Authorization": f"Bearer {server.token}", "Content-Type": "application/apply-patch+yaml"}
    url = f"{server.url}/api/v1/namespaces/default/configmaps/made?fieldManager=t"
    body = b"{apiVersion: v1, kind: ConfigMap, metadata: {name: made}, data: {a: '1'}}"
    assert pool.request("PATCH", url, body=body, headers=headers).status == 201
    assert pool.request("PATCH", url, body=body, headers=headers).status == 200
    no_manager = pool.request("PATCH", url.partition("?")[0], body=body, headers=headers)
    assert no_manager.status == 400 and b"fieldManager is required for apply requests" in no_manager.data
