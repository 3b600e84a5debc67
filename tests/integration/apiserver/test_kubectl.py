"""The real `kubectl` against the embedded server (HTTPS with a token, as `tessera up` runs it)."""

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from apis.extension.names import LABEL_SIMULATED_KUBELET as SIMULATED
from cli.launchers.apiserver import DEFAULT_CRDS, run_apiserver
from tests.support.kubectl import KUBECTL, Kubectl

pytestmark = pytest.mark.integration

if KUBECTL is None:
    pytest.skip(
        "kubectl is not installed (as root, `make test` installs Debian's kubernetes-client)", allow_module_level=True
    )

DEVICE = """
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Device
metadata:
  name: node-1
  labels: {pool: a}
spec:
  devices:
  - type: gpu
    id: GPU-0
    minor: 0
    health: true
    resources:
      koordinator.sh/gpu-core: "100"
      koordinator.sh/gpu-memory-ratio: "100"
"""

POD = """
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: main
    image: nginx:1.25
    resources:
      limits: {cpu: "1", memory: 1Gi}
"""


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    with run_apiserver(secure=True) as server:
        yield Kubectl(server, tmp_path_factory.mktemp("kubectl-home"))


def test_apply_crds_and_manage_a_device(kubectl: Kubectl) -> None:
    out = kubectl("apply", "-f", str(DEFAULT_CRDS))
    assert out.count("created") == len(list(DEFAULT_CRDS.glob("*.yaml")))
    assert "nodeslos.slo.koordinator.sh created" in out  # the NodeSLO CRD's shared class schema (a YAML anchor)
    assert "devices.scheduling.koordinator.sh" in kubectl("get", "crds")
    assert "unchanged" in kubectl("apply", "-f", str(DEFAULT_CRDS))
    assert "device.scheduling.koordinator.sh/node-1 created" in kubectl("create", "-f", "-", stdin=DEVICE)
    listing = kubectl("get", "devices")
    assert listing.split()[:2] == ["NAME", "AGE"] and "node-1" in listing
    kubectl("patch", "device", "node-1", "--type", "merge", "-p", '{"metadata":{"labels":{"pool":"b"}}}')
    kubectl(
        "patch",
        "device",
        "node-1",
        "--type",
        "json",
        "-p",
        '[{"op":"replace","path":"/spec/devices/0/health","value":false}]',
    )
    device = yaml.safe_load(kubectl("get", "device", "node-1", "-o", "yaml"))
    assert device["metadata"]["labels"] == {"pool": "b"} and device["spec"]["devices"][0]["health"] is False
    assert kubectl("get", "devices", "-l", "pool=b", "-o", "name").strip() == "device.scheduling.koordinator.sh/node-1"
    assert 'device.scheduling.koordinator.sh "node-1" deleted' in kubectl("delete", "device", "node-1")
    assert "NotFound" in kubectl("get", "device", "node-1", check=False)


def test_pods_watch_label_annotate_patch_apply_describe_delete(kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD)
    watcher = kubectl.popen("get", "pods", "-w", "--output-watch-events")
    try:
        assert "pod/web created" in kubectl("apply", "-f", str(manifest))
        kubectl("label", "pod", "web", "tier=front")
        kubectl("annotate", "pod", "web", "note=hello")
        kubectl(
            "patch",
            "pod",
            "web",
            "--type",
            "strategic",
            "-p",
            '{"spec":{"containers":[{"name":"main","image":"nginx:1.26"}]}}',
        )
        patched = json.loads(kubectl("get", "pod", "web", "-o", "json"))
        assert [c["image"] for c in patched["spec"]["containers"]] == ["nginx:1.26"]
        manifest.write_text(POD.replace("app: web", "app: web2"))
        assert "pod/web configured" in kubectl("apply", "-f", str(manifest))
        pod = json.loads(kubectl("get", "pod", "web", "-o", "json"))
        assert pod["metadata"]["labels"] == {"app": "web2", "tier": "front"}
        assert pod["metadata"]["annotations"]["note"] == "hello"
        assert "kubectl.kubernetes.io/last-applied-configuration" in pod["metadata"]["annotations"]
        assert pod["spec"]["containers"][0]["image"] == "nginx:1.25", "apply restores the fields it manages"
        table = kubectl("get", "pods", "-o", "wide")
        assert table.split()[:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
        described = kubectl("describe", "pod", "web")
        assert "QoS Class:" in described and "Guaranteed" in described and "nginx:1.25" in described
        assert 'pod "web" deleted' in kubectl("delete", "pod", "web")
        deadline = time.monotonic() + 10
        seen = ""
        while "DELETED" not in seen and time.monotonic() < deadline:
            assert watcher.stdout is not None
            seen += watcher.stdout.readline()
    finally:
        watcher.kill()
        watcher.wait()
        if watcher.stdout is not None:
            watcher.stdout.close()
    lines = [line.split()[:2] for line in seen.splitlines() if "web" in line]
    assert lines[0] == ["ADDED", "web"] and ["MODIFIED", "web"] in lines and lines[-1] == ["DELETED", "web"]


def test_errors_read_like_kubernetes(kubectl: Kubectl) -> None:
    assert 'pods "nope" not found' in kubectl("get", "pod", "nope", check=False)
    assert "the server doesn't have a resource type" in kubectl("get", "widgets", check=False)
    bad = kubectl(
        "create",
        "-f",
        "-",
        stdin="apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nspec: {containers: []}\n",
        check=False,
    )
    assert "is invalid" in bad and "spec.containers" in bad


def pod_yaml(name: str, limits: str, *, node: str = "") -> str:
    """`POD` renamed, with other limits (a YAML flow map's content) and maybe a node."""
    text = POD.replace("name: web", f"name: {name}").replace('cpu: "1", memory: 1Gi', limits)
    return text.replace("spec:\n", f"spec:\n  nodeName: {node}\n") if node else text


def test_apply_prints_kubes_error_for_resources_kube_refuses(kubectl: Kubectl) -> None:
    integer = 'Invalid value: "500m": must be an integer'
    assert kubectl("apply", "-f", "-", stdin=pod_yaml("half", "nvidia.com/gpu: 0.5"), check=False) == (
        'The Pod "half" is invalid: \n'
        f"* spec.containers[0].resources.limits[nvidia.com/gpu]: {integer}\n"
        f"* spec.containers[0].resources.requests[nvidia.com/gpu]: {integer}\n"
    )
    percent = (
        'Invalid value: "12500m": must be an integer '
        "(koordinator.sh/gpu-core is a whole percent of one device: 100 = a whole device)"
    )
    assert kubectl("apply", "-f", "-", stdin=pod_yaml("share", 'koordinator.sh/gpu-core: "12.5"'), check=False) == (
        'The Pod "share" is invalid: \n'
        f"* spec.containers[0].resources.limits[koordinator.sh/gpu-core]: {percent}\n"
        f"* spec.containers[0].resources.requests[koordinator.sh/gpu-core]: {percent}\n"
    )
    assert "pod/whole created" in kubectl("apply", "-f", "-", stdin=pod_yaml("whole", "nvidia.com/gpu: 1"))
    assert "pod/notebook created" in kubectl(
        "apply", "-f", "-", stdin=pod_yaml("notebook", "koordinator.sh/gpu-memory: 10Gi")
    )
    kubectl("delete", "pod", "whole", "notebook", "--wait=false")


def test_logs_and_exec_on_a_simulated_node_say_so(kubectl: Kubectl) -> None:
    kubectl("create", "-f", "-", stdin=pod_yaml("pending", "cpu: 1"))
    assert kubectl("logs", "pending") == "", "an unscheduled pod has no logs yet, as in kube"
    assert kubectl("exec", "pending", "--", "true", check=False).strip() == (
        "Error from server (BadRequest): pod pending does not have a host assigned"
    )
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-sim", "labels": {SIMULATED: "true"}}}
    kubectl("create", "-f", "-", stdin=json.dumps(node))
    kubectl("create", "-f", "-", stdin=pod_yaml("placed", "cpu: 1", node="gpu-sim"))
    why = f'node "gpu-sim" is simulated by Tessera ({SIMULATED}=true): no containers run there'
    assert kubectl("logs", "placed", check=False).strip() == (
        f'Error from server: cannot get logs of container "main" of pod "default/placed": {why}, so there are no logs'
    )
    assert kubectl("exec", "placed", "--", "true", check=False).strip() == (
        f'Error from server: cannot exec into container "main" of pod "default/placed": {why}, '
        "so there is nothing to exec into"
    )
    kubectl("delete", "pod", "pending", "placed", "--wait=false")
    kubectl("delete", "node", "gpu-sim")
