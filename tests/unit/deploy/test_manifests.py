"""deploy/ as Kubernetes objects: they parse, use the kinds and fields Kubernetes has, reference
only what exists, and the kustomization holds all of them (and renders, where kubectl is here)."""

import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import yaml

from apis.extension import names
from kube import catalogue
from tests.support import manifests
from tests.support.manifests import DEPLOY, NAMESPACE, Manifest

#: The kinds and API versions the manifests may use: GA versions only, nothing that needs an
#: add-on (no ServiceMonitor: Prometheus finds the pods by their prometheus.io annotations).
ALLOWED_KINDS = {
    ("v1", "Namespace"),
    ("v1", "ServiceAccount"),
    ("v1", "ConfigMap"),
    ("v1", "Service"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "DaemonSet"),
    ("policy/v1", "PodDisruptionBudget"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
    # deploy/dra/ only (Kubernetes 1.34 or newer), not part of deploy/kustomization.yaml.
    ("resource.k8s.io/v1", "DeviceClass"),
}

#: Namespaced objects outside tessera-system, and why.
#: (None today: the controller's Events, once only in `default`, now go to the namespaces of the
#: quotas and pods they are about, through its ClusterRole.)
OTHER_NAMESPACES: dict[tuple[str, str], str] = {}


@pytest.mark.parametrize("directory", manifests.KUSTOMIZATIONS, ids=lambda d: str(d.relative_to(DEPLOY.parent)))
def test_kustomization_lists_every_manifest_and_nothing_else(directory: Path) -> None:
    listed = manifests.kustomization(directory)["resources"]
    on_disk = sorted(p.name for p in directory.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(listed) == on_disk
    assert len(set(listed)) == len(listed), "a file is listed twice"


def test_every_yaml_file_under_deploy_parses() -> None:
    # The Helm chart's templates are Go templates, not YAML: test_helm.py renders them with Helm.
    templates = DEPLOY / "helm" / "tessera" / "templates"
    files = sorted(p for p in DEPLOY.rglob("*.yaml") if templates not in p.parents)
    assert files
    for path in files:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        assert docs, f"{path}: empty"
        assert all(isinstance(d, dict) for d in docs), f"{path}: every document must be a mapping"


@pytest.mark.parametrize("m", manifests.objects(), ids=str)
def test_kind_and_api_version_are_allowed(m: Manifest) -> None:
    assert (m.api_version, m.kind) in ALLOWED_KINDS


@pytest.mark.parametrize("m", manifests.objects(), ids=str)
def test_namespace_is_explicit(m: Manifest) -> None:
    if m.kind in manifests.CLUSTER_SCOPED:
        assert m.namespace is None
    else:
        assert m.namespace == OTHER_NAMESPACES.get((m.kind, m.name), NAMESPACE)


def test_objects_are_unique() -> None:
    keys = [(m.kind, m.namespace, m.name) for m in manifests.objects()]
    assert len(set(keys)) == len(keys)


def test_the_namespace_admits_the_privileged_agent() -> None:
    namespace = manifests.find("Namespace", NAMESPACE)
    assert namespace is not None
    assert namespace.obj["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


# --- every field is one Kubernetes has, with the right type --------------------------------------


def _model(m: Manifest) -> str:
    version = m.api_version.rsplit("/", 1)[-1]
    return f"{version.capitalize()}{m.kind}"


def _unknown_fields(value: Any, type_name: str, path: str) -> list[str]:
    """Where `value` does not fit the kubernetes client's model `type_name` (fields and types)."""
    scalars = {"str": (str,), "int": (int,), "bool": (bool,), "float": (int, float)}
    if type_name in scalars:
        ok = isinstance(value, scalars[type_name]) and not (type_name == "int" and isinstance(value, bool))
        return [] if ok else [f"{path}: expected {type_name}, got {value!r}"]
    if type_name in ("object", "datetime", "date", "bytes"):
        return []
    # The client's spelling changed between versions: list[X] / List[X], dict(str, X) / Dict[str, X].
    if match := re.fullmatch(r"[Ll]ist\[(.+)\]", type_name):
        if not isinstance(value, list):
            return [f"{path}: expected a list"]
        return [p for i, v in enumerate(value) for p in _unknown_fields(v, match.group(1), f"{path}[{i}]")]
    if match := re.fullmatch(r"dict\(str, (.+)\)|Dict\[str, (.+)\]", type_name):
        if not isinstance(value, dict):
            return [f"{path}: expected a mapping"]
        item = match.group(1) or match.group(2)
        return [p for k, v in value.items() for p in _unknown_fields(v, item, f"{path}.{k}")]
    model = getattr(kubernetes.client, type_name)
    if not isinstance(value, dict):
        return [f"{path}: expected a {type_name} object"]
    by_json_name = {json_name: attr for attr, json_name in model.attribute_map.items()}
    problems = []
    for key, v in value.items():
        if key not in by_json_name:
            problems.append(f"{path}.{key}: not a field of {type_name}")
        else:
            problems += _unknown_fields(v, model.openapi_types[by_json_name[key]], f"{path}.{key}")
    return problems


@pytest.mark.parametrize("m", manifests.objects(), ids=str)
def test_every_field_is_known_to_kubernetes(m: Manifest) -> None:
    assert _unknown_fields(m.obj, _model(m), m.kind) == []


def test_the_field_check_can_fail() -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x", "labels": {"a": 1}}}
    deployment["spec"] = {"template": {"spec": {"containers": [{"name": "c", "readinessprobe": {}}]}}}
    problems = _unknown_fields(deployment, "V1Deployment", "Deployment")
    assert problems == [
        "Deployment.metadata.labels.a: expected str, got 1",
        "Deployment.spec.template.spec.containers[0].readinessprobe: not a field of V1Container",
    ]


# --- references --------------------------------------------------------------------------------


@pytest.mark.parametrize("m", manifests.workloads(), ids=str)
def test_selector_matches_the_pod_template(m: Manifest) -> None:
    selector = m.obj["spec"]["selector"]["matchLabels"]
    labels = manifests.pod_template(m)["metadata"]["labels"]
    assert selector and selector.items() <= labels.items()


@pytest.mark.parametrize("m", manifests.workloads(), ids=str)
def test_service_account_config_maps_and_secrets_exist(m: Manifest) -> None:
    spec = manifests.pod_spec(m)
    assert manifests.find("ServiceAccount", spec["serviceAccountName"], m.namespace) is not None
    for volume in spec.get("volumes", []):
        if "configMap" in volume:
            assert manifests.find("ConfigMap", volume["configMap"]["name"], m.namespace) is not None, volume
        if "secret" in volume and volume["secret"]["secretName"] not in manifests.INSTALL_SECRETS:
            assert manifests.find("Secret", volume["secret"]["secretName"], m.namespace) is not None, volume
    for container in manifests.containers(m):
        for env in container.get("env", []):
            ref = env.get("valueFrom") or {}
            if "configMapKeyRef" in ref:
                found = manifests.find("ConfigMap", ref["configMapKeyRef"]["name"], m.namespace)
                assert found is not None and ref["configMapKeyRef"]["key"] in found.obj["data"], env
            assert "secretKeyRef" not in ref, f"{m}: no Secret is shipped"
        for mount in container.get("volumeMounts", []):
            assert any(v["name"] == mount["name"] for v in spec.get("volumes", [])), mount


@pytest.mark.parametrize("m", manifests.of_kind("RoleBinding", "ClusterRoleBinding"), ids=str)
def test_bindings_reference_existing_roles_and_service_accounts(m: Manifest) -> None:
    ref = m.obj["roleRef"]
    role_namespace = m.namespace if ref["kind"] == "Role" else None
    assert manifests.role(ref["kind"], ref["name"], role_namespace) is not None
    for subject in m.obj["subjects"]:
        assert subject["kind"] == "ServiceAccount"
        assert manifests.find("ServiceAccount", subject["name"], subject["namespace"]) is not None


def _pods_selected(selector: dict[str, str], namespace: str | None) -> list[Manifest]:
    return [
        w
        for w in manifests.workloads()
        if w.namespace == namespace and selector.items() <= manifests.pod_template(w)["metadata"]["labels"].items()
    ]


@pytest.mark.parametrize("m", manifests.of_kind("Service"), ids=str)
def test_services_select_a_workload_and_its_ports(m: Manifest) -> None:
    selected = _pods_selected(m.obj["spec"]["selector"], m.namespace)
    assert len(selected) == 1
    ports = {p["name"]: p["containerPort"] for c in manifests.containers(selected[0]) for p in c.get("ports", [])}
    for port in m.obj["spec"]["ports"]:
        target = port["targetPort"]
        assert target in ports if isinstance(target, str) else target in ports.values(), port


@pytest.mark.parametrize("m", manifests.of_kind("NetworkPolicy", "PodDisruptionBudget"), ids=str)
def test_policies_select_a_workload(m: Manifest) -> None:
    selector = m.obj["spec"]["podSelector" if m.kind == "NetworkPolicy" else "selector"]["matchLabels"]
    assert len(_pods_selected(selector, m.namespace)) == 1


def test_the_network_policy_lets_in_http_from_scrapers_and_the_dashboard_and_grpc_only_from_the_descheduler() -> None:
    policy = manifests.find("NetworkPolicy", names.SCHEDULER_NAME, NAMESPACE)
    assert policy is not None
    http, descheduler = policy.obj["spec"]["ingress"]
    assert [p["port"] for p in http["ports"]] == ["http"]
    scrapers, dashboard = http["from"]
    assert scrapers == {
        "namespaceSelector": {},
        "podSelector": {"matchLabels": {"tessera.dev/metrics-scraper": "true"}},
    }
    assert dashboard == {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "tessera-dashboard"}}}
    assert [p["port"] for p in descheduler["ports"]] == ["grpc"]
    (peer,) = descheduler["from"]
    assert [w.name for w in _pods_selected(peer["podSelector"]["matchLabels"], NAMESPACE)] == ["tessera-descheduler"]


# --- images and priorities ------------------------------------------------------------------------


def test_images_are_the_project_version() -> None:
    version = tomllib.loads((manifests.ROOT / "pyproject.toml").read_text())["project"]["version"]
    images = {c["image"] for _, c in manifests.all_containers()}
    assert images == {f"tessera:{version}"}
    for directory in manifests.KUSTOMIZATIONS:
        if not [m for m in manifests.objects(directory) if m.kind in manifests.WORKLOAD_KINDS]:
            continue  # deploy/dra/: objects only, no image to set
        expected = [{"name": "tessera", "newName": "tessera", "newTag": version}]
        assert manifests.kustomization(directory)["images"] == expected, directory


@pytest.mark.parametrize("m", manifests.workloads(), ids=str)
def test_priority_classes_are_built_in(m: Manifest) -> None:
    # The dashboard is a view, not the control plane: under pressure it goes first.
    expected = {"DaemonSet": "system-node-critical", "Deployment": "system-cluster-critical"}[m.kind]
    assert manifests.pod_spec(m).get("priorityClassName") == (None if m.name == "tessera-dashboard" else expected)


@pytest.mark.parametrize("m", manifests.workloads(), ids=str)
def test_tessera_pods_never_wait_for_the_hook_server(m: Manifest) -> None:
    # Under failure-policy Fail, a pod without this label cannot start while the node's agent is
    # down; the agent's own pod would never start at all.
    assert manifests.pod_template(m)["metadata"]["labels"][names.LABEL_SKIP_HOOKSERVER] == "true"


# --- kubectl, where it is installed -------------------------------------------------------------------


@pytest.mark.parametrize("directory", manifests.KUSTOMIZATIONS, ids=lambda d: str(d.relative_to(DEPLOY.parent)))
def test_kubectl_kustomize_renders_every_object(directory: Path) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: `kubectl kustomize deploy/` not checked")
    result = subprocess.run(
        [kubectl, "kustomize", str(directory)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    rendered = [d for d in yaml.safe_load_all(result.stdout) if d is not None]
    listed = manifests.objects(directory)
    assert sorted(map(_key, rendered)) == sorted(_key(m.obj) for m in listed)
    images = {c["image"] for d in rendered if d["kind"] in manifests.WORKLOAD_KINDS for c in _containers(d)}
    assert images == {c["image"] for m in listed if m.kind in manifests.WORKLOAD_KINDS for c in manifests.containers(m)}


def _key(doc: dict[str, Any]) -> tuple[str, str, str]:
    return doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"]


def _containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return list(doc["spec"]["template"]["spec"]["containers"])


def test_crds_are_applied_separately() -> None:
    # deploy/crds/ holds plain CRD files for `kubectl apply -f deploy/crds/`; a kustomization.yaml
    # there would break that command, and the top-level one must not own them (Koordinator may).
    assert not (DEPLOY / "crds" / "kustomization.yaml").exists()
    assert not any(str(r).startswith("crds") for r in manifests.kustomization()["resources"])
    assert sorted(Path(p).name for p in (DEPLOY / "crds").glob("*.yaml")) == sorted(
        f"{gvr.group}_{gvr.plural}.yaml" for gvr in catalogue.CUSTOM
    )


# --- the admission webhook ------------------------------------------------------------------------


def test_the_webhook_configuration_calls_the_controllers_webhook_through_its_service() -> None:
    from controller.webhook import POD_PATH, POD_WEBHOOK, QUOTA_PATH, QUOTA_WEBHOOK

    configuration = manifests.find("ValidatingWebhookConfiguration", "tessera-controller", None)
    assert configuration is not None
    hook, pods = configuration.obj["webhooks"]
    service_ref = hook["clientConfig"]["service"]
    assert (hook["name"], service_ref["path"]) == (QUOTA_WEBHOOK, QUOTA_PATH)
    assert (pods["name"], pods["clientConfig"]["service"]["path"]) == (POD_WEBHOOK, POD_PATH)
    assert pods["clientConfig"]["service"] == {**service_ref, "path": POD_PATH}
    service = manifests.find("Service", service_ref["name"], service_ref["namespace"])
    assert service is not None
    assert [p["targetPort"] for p in service.obj["spec"]["ports"] if p["port"] == service_ref["port"]] == ["webhook"]
    annotation = configuration.obj["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
    certificate = next(
        d
        for d in yaml.safe_load_all((manifests.DEPLOY / "cert-manager" / "webhook-certificate.yaml").read_text())
        if d["kind"] == "Certificate"
    )
    assert annotation == f"{certificate['metadata']['namespace']}/{certificate['metadata']['name']}"
    assert certificate["spec"]["secretName"] in manifests.INSTALL_SECRETS
    assert f"{service_ref['name']}.{service_ref['namespace']}.svc" in certificate["spec"]["dnsNames"]
