"""Schemas as a real cluster enforces and publishes them, seen through each kubectl and the official client.

kubectl 1.27+ reads `/openapi/v3` for `kubectl explain` and sends `fieldValidation=Strict`;
kubectl 1.20 reads `/openapi/v2` in protobuf and validates manifests on the client. Either way an
invalid Device is refused naming the field, and a typo in a field name — of a custom resource or
of a built-in kind — does not pass silently. Built-in kinds are explained as in a real cluster.
"""

import json
import re
from collections.abc import Iterator
from typing import Any

import kubernetes
import kubernetes.dynamic
import pytest
import yaml

from cli.launchers.apiserver import EmbeddedAPIServer, run_apiserver
from kube.errors import APIError
from tests.support.kubectl import KubectlBinary, kubectl_binaries

pytestmark = pytest.mark.integration

KUBECTLS = kubectl_binaries()
if not KUBECTLS:
    pytest.skip(
        "no kubectl installed (as root, `make test` installs Debian's kubernetes-client)", allow_module_level=True
    )

DEVICE = """
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Device
metadata: {{name: {name}}}
spec:
  {field}:
  - {{type: gpu, minor: {minor}, health: true}}
"""


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedAPIServer]:
    with run_apiserver(secure=True) as server:
        server.install_crds()
        yield server


@pytest.fixture(params=KUBECTLS, ids=lambda k: k.id)
def kubectl(request: pytest.FixtureRequest) -> KubectlBinary:
    binary: KubectlBinary = request.param
    return binary


def test_explain_shows_the_crd_schema(server: EmbeddedAPIServer, kubectl: KubectlBinary) -> None:
    spec = kubectl.run(server.kubeconfig, "explain", "device.spec")
    assert spec.returncode == 0, spec.stderr
    assert "devices\t<[]Object>" in spec.stdout
    minor = kubectl.run(server.kubeconfig, "explain", "device.spec.devices.minor")
    assert minor.returncode == 0 and "minor <integer>" in " ".join(minor.stdout.split("\t"))
    metadata = kubectl.run(server.kubeconfig, "explain", "podgroup.metadata.labels")
    assert metadata.returncode == 0 and "labels" in metadata.stdout, metadata.stderr


def test_an_invalid_device_is_refused_naming_the_field(server: EmbeddedAPIServer, kubectl: KubectlBinary) -> None:
    bad = DEVICE.format(name=f"bad-{kubectl.minor}", field="devices", minor='"three"')
    result = kubectl.run(server.kubeconfig, "apply", "--validate=false", "-f", "-", stdin=bad)
    assert result.returncode == 1
    field = "spec.devices[0].minor"
    assert f'{field}: Invalid value: "string": {field} in body must be of type integer: "string"' in result.stderr
    client_side = kubectl.run(server.kubeconfig, "apply", "-f", "-", stdin=bad)
    assert client_side.returncode == 1 and "minor" in client_side.stderr


def test_a_misspelt_field_fails_apply(server: EmbeddedAPIServer, kubectl: KubectlBinary) -> None:
    typo = DEVICE.format(name=f"typo-{kubectl.minor}", field="devicez", minor=0)
    result = kubectl.run(server.kubeconfig, "apply", "-f", "-", stdin=typo)
    assert result.returncode == 1 and "devicez" in result.stderr
    ignored = kubectl.run(server.kubeconfig, "apply", "--validate=false", "-f", "-", stdin=typo)
    assert ignored.returncode == 0, ignored.stderr
    stored = kubectl.run(server.kubeconfig, "get", "device", f"typo-{kubectl.minor}", "-o", "jsonpath={.spec}")
    assert stored.stdout in ("", "{}"), "the unknown field was pruned"


def test_official_client_gets_422_with_causes(server: EmbeddedAPIServer) -> None:
    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(server.kubeconfig), client_configuration=config)
    api = kubernetes.client.CustomObjectsApi(kubernetes.client.ApiClient(config))
    body = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {"name": "official"},
        "spec": {"devices": [{"type": "gpu", "minor": 0, "health": True, "conditions": [{"status": "maybe"}]}]},
    }
    with pytest.raises(kubernetes.client.ApiException) as e:
        api.create_cluster_custom_object("scheduling.koordinator.sh", "v1alpha1", "devices", body)
    assert e.value.status == 422
    assert '"field":"spec.devices[0].conditions[0].status"' in e.value.body.replace(" ", "")
    assert "FieldValueNotSupported" in e.value.body


def test_openapi_documents_name_crds_as_kube_does(server: EmbeddedAPIServer) -> None:
    with server.client() as client:
        v2 = client.request("GET", "/openapi/v2")
        v3 = client.request("GET", "/openapi/v3/apis/scheduling.koordinator.sh/v1alpha1")
    device = v2["definitions"]["sh.koordinator.scheduling.v1alpha1.Device"]
    assert device["x-kubernetes-group-version-kind"] == [
        {"group": "scheduling.koordinator.sh", "kind": "Device", "version": "v1alpha1"}
    ]
    assert device["properties"]["metadata"]["$ref"] == "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    schemas = v3["components"]["schemas"]
    assert schemas["sh.koordinator.scheduling.v1alpha1.Device"]["properties"]["spec"]["properties"]["devices"]
    assert "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" in schemas


POD = """
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  {field}:
  - {{name: main, image: busybox, {image}: busybox}}
"""


@pytest.mark.parametrize(
    ("path", "shown"),
    [("pod", "spec"), ("deployment.spec.strategy", "rollingUpdate"), ("node.status", "allocatable")],
)
def test_explain_shows_builtin_kinds(server: EmbeddedAPIServer, kubectl: KubectlBinary, path: str, shown: str) -> None:
    result = kubectl.run(server.kubeconfig, "explain", path)
    assert result.returncode == 0, result.stderr
    assert any(line.split("\t")[0].strip() == shown for line in result.stdout.splitlines()), result.stdout


def test_a_misspelt_field_of_a_pod_fails_apply(server: EmbeddedAPIServer, kubectl: KubectlBinary) -> None:
    name = f"typo-{kubectl.minor}"
    nested = POD.format(name=name, field="containers", image="imagez")
    result = kubectl.run(server.kubeconfig, "apply", "-f", "-", stdin=nested)
    assert result.returncode == 1
    if kubectl.minor >= 25:  # the server refuses (kubectl sends fieldValidation=Strict)
        assert 'strict decoding error: unknown field "spec.containers[0].imagez"' in result.stderr
    else:  # kubectl 1.20 refuses on the client, against /openapi/v2
        assert 'unknown field "imagez" in io.k8s.api.core.v1.Container' in result.stderr
    top = kubectl.run(server.kubeconfig, "apply", "-f", "-", stdin=POD.format(name=name, field="containerz", image="x"))
    assert top.returncode == 1 and "containerz" in top.stderr
    ignored = kubectl.run(server.kubeconfig, "apply", "--validate=false", "-f", "-", stdin=nested)
    assert ignored.returncode == 0, ignored.stderr
    stored = kubectl.run(server.kubeconfig, "get", "pod", name, "-o", "jsonpath={.spec.containers[0]}")
    assert "imagez" not in stored.stdout and '"image":"busybox"' in stored.stdout


def test_the_official_client_gets_kubes_strict_decoding_error(server: EmbeddedAPIServer) -> None:
    """Through its dynamic client: the typed API checks models on the client and sends no unknown field."""
    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(server.kubeconfig), client_configuration=config)
    dynamic = kubernetes.dynamic.DynamicClient(kubernetes.client.ApiClient(config))
    deployments = dynamic.resources.get(api_version="apps/v1", kind="Deployment")
    labels = {"app": "strict"}
    container = {"name": "main", "image": "busybox", "imagez": "x"}
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "strict"},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }
    with pytest.raises(kubernetes.dynamic.exceptions.BadRequestError) as e:
        deployments.create(body=body, namespace="default", query_params=[("fieldValidation", "Strict")])
    message = json.loads(e.value.body)["message"]
    assert message == (
        'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
        'unknown field "spec.template.spec.containers[0].imagez"'
    )
    created = deployments.create(body=body, namespace="default", query_params=[("fieldValidation", "Ignore")])
    assert "imagez" not in created.to_dict()["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize(("mode", "warned"), [("Warn", True), ("Ignore", False), ("", True)])
def test_warn_and_ignore_store_the_pod_without_the_field(server: EmbeddedAPIServer, mode: str, warned: bool) -> None:
    name = f"lenient-{mode.lower() or 'default'}"
    pod = yaml.safe_load(POD.format(name=name, field="containers", image="imagez"))
    query = [("fieldValidation", mode)] if mode else []
    with server.client() as client:
        response = client.open("POST", "/api/v1/namespaces/default/pods", query=query, body=pod)
        response.release_conn()
        warnings = response.headers.get_all("Warning") or []
        assert (warnings == ['299 - "unknown field \\"spec.containers[0].imagez\\""']) is warned, warnings
        stored = client.request("GET", f"/api/v1/namespaces/default/pods/{name}")
        assert "imagez" not in stored["spec"]["containers"][0]
        with pytest.raises(APIError, match="strict decoding error"):
            client.request(
                "PUT",
                f"/api/v1/namespaces/default/pods/{name}",
                query=[("fieldValidation", "Strict")],
                body={**stored, "spec": {**stored["spec"], "containerz": 1}},
            )


@pytest.mark.parametrize(
    ("content_type", "patch", "unknown"),
    [
        ("application/merge-patch+json", {"spec": {"containerz": 1}}, "spec.containerz"),
        (
            "application/strategic-merge-patch+json",
            {"spec": {"containers": [{"name": "main", "imagez": "y"}]}},
            "spec.containers[0].imagez",
        ),
        ("application/json-patch+json", [{"op": "add", "path": "/metadata/typo", "value": 1}], "metadata.typo"),
        (
            "application/apply-patch+yaml",
            {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": "main", "imagez": "y"}]}},
            "spec.containers[0].imagez",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) and "/" in v else "",
)
def test_every_write_of_a_builtin_kind_is_checked(
    server: EmbeddedAPIServer, content_type: str, patch: Any, unknown: str
) -> None:
    name = "patched-" + content_type.split("/")[1].split("-", maxsplit=1)[0]
    pod = yaml.safe_load(POD.format(name=name, field="containers", image="image"))
    path = f"/api/v1/namespaces/default/pods/{name}"
    manager = [("fieldManager", "tester")]
    with server.client() as client:
        client.request("POST", "/api/v1/namespaces/default/pods", body=pod)
        with pytest.raises(APIError, match=f'strict decoding error: unknown field "{re.escape(unknown)}"'):
            query = [("fieldValidation", "Strict"), *manager]
            client.request("PATCH", path, query=query, body=patch, content_type=content_type)
        stored = client.request("PATCH", path, query=manager, body=patch, content_type=content_type)
    leaf = unknown.rsplit(".", 1)[1]
    assert leaf not in json.dumps(stored), "dropped, and no manager owns it"


def test_a_status_write_of_a_builtin_kind_is_checked(server: EmbeddedAPIServer) -> None:
    pod = yaml.safe_load(POD.format(name="status-typo", field="containers", image="image"))
    path = "/api/v1/namespaces/default/pods/status-typo/status"
    patch = {"status": {"phase": "Running", "bogus": 1}}
    merge = "application/merge-patch+json"
    with server.client() as client:
        client.request("POST", "/api/v1/namespaces/default/pods", body=pod)
        with pytest.raises(APIError, match='strict decoding error: unknown field "status.bogus"'):
            client.request("PATCH", path, query=[("fieldValidation", "Strict")], body=patch, content_type=merge)
        stored = client.request("PATCH", path, body=patch, content_type=merge)
    assert stored["status"]["phase"] == "Running" and "bogus" not in stored["status"]


BAD_DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: "3"
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
      - {{name: main, image: busybox}}
"""
BAD_POD = """
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  containers:
  - name: main
    image: busybox
    ports: [{{containerPort: "80"}}]
"""
_CANNOT = "cannot unmarshal string into Go struct field"


_CASES = {
    "deployment": (BAD_DEPLOYMENT, f"{_CANNOT} DeploymentSpec.spec.replicas of type int32"),
    "pod": (BAD_POD, f"{_CANNOT} ContainerPort.spec.containers.ports.containerPort of type int32"),
}


@pytest.mark.parametrize("kind", sorted(_CASES))
@pytest.mark.parametrize("how", ["apply", "create", "apply --server-side"])
def test_a_field_of_the_wrong_type_is_refused_and_nothing_is_stored(
    server: EmbeddedAPIServer, kubectl: KubectlBinary, kind: str, how: str
) -> None:
    """`--validate=false`: kubectl 1.20 would refuse the type on the client first; the server must too."""
    if "server-side" in how and kubectl.minor < 22:
        pytest.skip("kubectl 1.20's server-side apply is beta, behind its own flag")
    manifest, error = _CASES[kind]
    name = f"typed-{kind}-{how.rsplit(maxsplit=1)[-1].strip('-')}-{kubectl.minor}"
    args = [*how.split(), "--validate=false", "-f", "-"]
    result = kubectl.run(server.kubeconfig, *args, stdin=manifest.format(name=name))
    assert result.returncode != 0
    title = kind.capitalize()
    assert "Error from server (BadRequest)" in result.stderr, result.stderr
    assert f'{title} in version "v1" cannot be handled as a {title}: json: {error}' in result.stderr
    stored = kubectl.run(server.kubeconfig, "get", kind, name, "-o", "name")
    assert stored.returncode != 0 and "NotFound" in stored.stderr, "nothing was stored"


def test_the_server_keeps_serving_and_stores_the_corrected_manifest(
    server: EmbeddedAPIServer, kubectl: KubectlBinary
) -> None:
    name = f"typed-fixed-{kubectl.minor}"
    bad = BAD_DEPLOYMENT.format(name=name)
    refused = kubectl.run(server.kubeconfig, "apply", "--validate=false", "-f", "-", stdin=bad)
    assert refused.returncode != 0
    fixed = kubectl.run(server.kubeconfig, "apply", "-f", "-", stdin=bad.replace('"3"', "3.0"))  # sent as 3
    assert fixed.returncode == 0, fixed.stderr
    stored = kubectl.run(server.kubeconfig, "get", "deployment", name, "-o", "jsonpath={.spec.replicas}")
    assert stored.stdout == "3"
    patch = ["--type=merge", "-p", '{"spec":{"paused":"no"}}']
    patched = kubectl.run(server.kubeconfig, "patch", "deployment", name, *patch)
    assert patched.returncode != 0
    assert f"{_CANNOT} DeploymentSpec.spec.paused of type bool" in patched.stderr


def test_a_binding_is_decoded_before_it_reaches_the_pod(server: EmbeddedAPIServer) -> None:
    """A Binding bypasses the pod's strategy and copies its annotations: it is decoded on its own."""
    pod = yaml.safe_load(POD.format(name="bound-typed", field="containers", image="image"))
    binding = {"metadata": {"name": "bound-typed", "annotations": {"a": 1}}, "target": {"name": "n1"}}
    path = "/api/v1/namespaces/default/pods/bound-typed"
    with server.client() as client:
        client.request("POST", "/api/v1/namespaces/default/pods", body=pod)
        with pytest.raises(APIError) as e:
            client.request("POST", f"{path}/binding", body=binding)
        assert e.value.status == 400
        assert str(e.value).endswith(
            'Binding in version "v1" cannot be handled as a Binding: json: cannot unmarshal number into '
            "Go struct field ObjectMeta.metadata.annotations of type string"
        )
        assert "nodeName" not in client.request("GET", path)["spec"]
        binding["metadata"]["annotations"] = {"a": "1"}
        client.request("POST", f"{path}/binding", body=binding)
        stored = client.request("GET", path)
    assert stored["spec"]["nodeName"] == "n1" and stored["metadata"]["annotations"]["a"] == "1"
