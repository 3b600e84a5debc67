"""deploy/helm/tessera, rendered by real Helm: it lints, its defaults are deploy/ object for object,
each value changes what values.yaml says it does, and values.schema.json refuses bad values."""

import tarfile
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from agent.qos import config as qos_config
from apis.extension import names
from kube import catalogue
from scheduler.cache import ClusterCache
from scheduler.core import build_frameworks
from scheduler.framework import load_config
from tests.support import chart, manifests
from tests.support.manifests import DEPLOY, NAMESPACE

#: The objects that are off by default (they need CRDs that deploy/ does not ship), all on.
OPTIONAL_ON: dict[str, Any] = {
    "monitoring": {"podMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}},
    "schedulerPlugins": {"podGroupCRD": True},
}


def test_helm_lint_strict_finds_nothing_but_advice() -> None:
    for values in ({}, chart.CUSTOM, OPTIONAL_ON):
        found = chart.lint(values)
        assert found["errors"] == []
        assert [m for m in found["messages"] if m["severity"] > chart.LINT_INFO] == []


def test_default_render_is_the_kustomize_build_of_deploy() -> None:
    # One source of truth: `helm install` with the defaults and `kubectl apply -k deploy/` create
    # the same objects, field for field. The Namespace is the one difference: Helm keeps its
    # release record in the namespace, so it must exist before `helm install` (docs/user/deploy.md).
    built = chart.by_identity([o for o in chart.kustomize() if o["kind"] != "Namespace"])
    rendered = chart.by_identity(chart.objects())
    assert sorted(rendered) == sorted(built)
    for key, obj in built.items():
        assert rendered[key] == obj, f"{key}: the chart renders it differently from deploy/"


def test_namespace_create_renders_the_kustomize_namespace() -> None:
    (namespace,) = [o for o in chart.kustomize() if o["kind"] == "Namespace"]
    assert chart.one(chart.objects({"namespace": {"create": True}}), "Namespace", NAMESPACE) == namespace
    assert chart.one(chart.objects({"namespace": {"create": True}}, namespace="gpu"), "Namespace", "gpu")


def test_crds_are_deploy_crds() -> None:
    # crds/ is a link, not a copy: Helm follows it when it loads and packages the chart.
    assert (chart.CHART / "crds").resolve() == (DEPLOY / "crds").resolve()
    files = sorted(DEPLOY.joinpath("crds").glob("*.yaml"))
    expected = [doc for path in files for doc in chart.documents(path.read_text())]
    assert sorted(map(chart.identity, chart.crds())) == sorted(map(chart.identity, expected))
    assert len(expected) == len(catalogue.CUSTOM)


def test_the_packaged_chart_carries_the_crds_and_renders_the_same(tmp_path: Path) -> None:
    # `helm package` (what a chart repository serves) copies the linked CRDs in as plain files.
    archive = Path(helm.package(str(chart.CHART), destination=str(tmp_path)))
    with tarfile.open(archive) as tar:
        packed = {m.name: m for m in tar.getmembers() if m.name.startswith("tessera/crds/")}
        for path in DEPLOY.joinpath("crds").glob("*.yaml"):
            member = packed.pop(f"tessera/crds/{path.name}")
            assert member.isfile()
            extracted = tar.extractfile(member)
            assert extracted is not None and extracted.read() == path.read_bytes()
    assert packed == {}
    with helm.Chart.load(str(archive)) as loaded:
        assert loaded.render({}, name=chart.RELEASE, namespace=NAMESPACE, is_install=True) == chart.render()


def test_release_namespace_is_used_everywhere() -> None:
    objs = chart.objects(namespace="gpu")
    text = yaml.safe_dump_all(objs)
    assert NAMESPACE not in text
    namespaced = [o for o in objs if o["kind"] not in manifests.CLUSTER_SCOPED]
    assert namespaced and all(o["metadata"]["namespace"] == "gpu" for o in namespaced)


def test_image_values_reach_every_container() -> None:
    objs = chart.objects(chart.CUSTOM)
    workloads = [o for o in objs if o["kind"] in manifests.WORKLOAD_KINDS]
    assert len(workloads) == 4
    for w in workloads:
        spec = w["spec"]["template"]["spec"]
        assert spec["imagePullSecrets"] == [{"name": "regcred"}]
        for c in spec["containers"]:
            assert c["image"] == "registry.example.com/tessera:9.9.9"
            assert c["imagePullPolicy"] == "Always"


def test_scheduler_values(monkeypatch: pytest.MonkeyPatch) -> None:
    objs = chart.objects(chart.CUSTOM)
    deployment = chart.one(objs, "Deployment", "tessera-scheduler")
    container = chart.container(objs, "Deployment", "tessera-scheduler")
    assert deployment["spec"]["replicas"] == 1
    assert container["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"}}
    args = manifests.parse_args(container, monkeypatch)
    assert args.leader_elect is False
    assert args.v == 4
    text = chart.one(objs, "ConfigMap", "tessera-scheduler-config")["data"]["scheduler.yaml"]
    assert "gpu-scheduler" in build_frameworks(load_config(text), ClusterCache())  # each plugin checks its args
    (profile,) = yaml.safe_load(text)["profiles"]
    assert profile["schedulerName"] == "gpu-scheduler"
    strategies = {p["name"]: p["args"]["scoringStrategy"]["type"] for p in profile["pluginConfig"]}
    assert strategies == {"NodeResourcesFit": "LeastAllocated", "DeviceShare": "MostAllocated"}
    kinds = {o["kind"] for o in objs if o["metadata"]["name"] == "tessera-scheduler"}
    assert "PodDisruptionBudget" not in kinds and "NetworkPolicy" not in kinds
    assert "gpu-scheduler" in chart.notes(chart.CUSTOM)


def test_controller_values(monkeypatch: pytest.MonkeyPatch) -> None:
    objs = chart.objects(chart.CUSTOM)
    assert chart.one(objs, "Deployment", "tessera-controller")["spec"]["replicas"] == 3
    args = manifests.parse_args(chart.container(objs, "Deployment", "tessera-controller"), monkeypatch)
    assert args.leader_elect is True
    assert args.v == 5
    configuration = chart.one(objs, "ValidatingWebhookConfiguration", "tessera-controller")
    assert "annotations" not in configuration["metadata"]
    quotas, pods = configuration["webhooks"]
    assert (quotas["name"], pods["name"]) == ("velasticquota.koordinator.sh", "vpod.koordinator.sh")
    assert quotas["clientConfig"]["caBundle"] == pods["clientConfig"]["caBundle"] == "Q0EK"
    assert quotas["failurePolicy"] == "Ignore"  # the value's; pods always Ignore
    assert not [o for o in objs if o["kind"] == "PodDisruptionBudget"]


def test_webhook_disabled_leaves_no_webhook_and_no_certificate_to_wait_for(monkeypatch: pytest.MonkeyPatch) -> None:
    objs = chart.objects({"controller": {"webhook": {"enabled": False}}})
    assert not [o for o in objs if o["kind"] == "ValidatingWebhookConfiguration"]
    assert not [o for o in objs if o["metadata"]["name"] == "tessera-controller-webhook"]
    deployment = chart.one(objs, "Deployment", "tessera-controller")
    assert "tessera-controller-webhook-cert" not in yaml.safe_dump(deployment)
    container = chart.container(objs, "Deployment", "tessera-controller")
    assert not [a for a in container["args"] if a.startswith("--webhook")]
    manifests.parse_args(container, monkeypatch)
    assert "tessera-controller-webhook-cert" not in chart.notes({"controller": {"webhook": {"enabled": False}}})


def test_issue_certificate_renders_deploy_cert_manager_for_the_release_namespace() -> None:
    issue = {"controller": {"webhook": {"issueCertificate": True}}}
    rendered = [o for o in chart.objects(issue) if o["apiVersion"].startswith("cert-manager.io/")]
    assert chart.by_identity(rendered) == chart.by_identity(chart.kustomize(DEPLOY / "cert-manager"))
    assert "cert-manager makes it" in chart.notes(issue)
    elsewhere = chart.objects(issue, namespace="gpu")
    certificate = chart.one(elsewhere, "Certificate", "tessera-controller-webhook")
    assert certificate["spec"]["dnsNames"][0] == "tessera-controller-webhook.gpu.svc"
    configuration = chart.one(elsewhere, "ValidatingWebhookConfiguration", "tessera-controller")
    assert configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
        "gpu/" + certificate["metadata"]["name"]
    )
    assert not [o for o in chart.objects() if o["kind"] == "Certificate"]


def test_agent_values(monkeypatch: pytest.MonkeyPatch) -> None:
    objs = chart.objects(chart.CUSTOM)
    spec = chart.one(objs, "DaemonSet", "tessera-agent")["spec"]["template"]["spec"]
    assert "affinity" not in spec
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert spec["tolerations"] == chart.CUSTOM["agent"]["tolerations"]
    container = chart.container(objs, "DaemonSet", "tessera-agent")
    assert container["resources"] == {"limits": {"memory": "1Gi"}}
    assert manifests.parse_args(container, monkeypatch).v == 3
    # The QoS switches, as the agent's own parser reads the file.
    qos = qos_config.load(chart.one(objs, "ConfigMap", "tessera-agent-config")["data"]["nodeslo.yaml"])
    assert qos.cpu_suppress.enable
    switched = {
        (name, knob)
        for name in ("lsr", "ls", "be")
        for knob in ("cpu", "memory", "network")
        if getattr(getattr(qos.resource_qos, name), knob).enable
    }
    assert switched == {("ls", "cpu"), ("be", "memory")}


def test_notes_say_how_to_check_every_workload() -> None:
    text = chart.notes()
    for obj in chart.objects():
        if obj["kind"] in manifests.WORKLOAD_KINDS:
            assert f"{obj['kind'].lower()}/{obj['metadata']['name']}" in text
    assert f"-n {NAMESPACE}" in text
    assert "kubectl apply -k deploy/cert-manager/" in text


@pytest.mark.parametrize(
    ("values", "where"),
    [
        ({"scheduler": {"replicas": 0}}, "/scheduler/replicas"),
        ({"scheduler": {"deviceScoringStrategy": "Packed"}}, "/scheduler/deviceScoringStrategy"),
        ({"scheduler": {"name": "Tessera Scheduler"}}, "/scheduler/name"),
        ({"controller": {"webhook": {"failurePolicy": "Retry"}}}, "/controller/webhook/failurePolicy"),
        ({"agent": {"tolerations": "all"}}, "/agent/tolerations"),
        ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
        ({"imagee": {"tag": "1"}}, "imagee"),
        ({"agent": {"nodeselector": {}}}, "nodeselector"),
    ],
)
def test_schema_refuses_bad_values_by_name(values: dict[str, Any], where: str) -> None:
    with pytest.raises(helm.HelmValuesError, match=where):
        chart.render(values)


def test_every_value_has_a_schema_and_a_default_that_passes_it() -> None:
    schema = yaml.safe_load((chart.CHART / "values.schema.json").read_text())
    defaults = yaml.safe_load((chart.CHART / "values.yaml").read_text())

    def walk(node: dict[str, Any], values: dict[str, Any], where: str) -> None:
        assert set(node["properties"]) == set(values), f"{where or '/'}: schema and values.yaml name different keys"
        for key, value in values.items():
            child = node["properties"][key]
            if isinstance(value, dict) and "properties" in child:
                walk(child, value, f"{where}/{key}")

    walk(schema, defaults, "")
    with helm.Chart.load(str(chart.CHART)) as loaded:
        loaded.validate_schema(defaults)


def test_descheduler_disabled_removes_it_and_its_way_into_the_scheduler() -> None:
    objs = chart.objects({"descheduler": {"enabled": False}})
    assert not [o for o in objs if "descheduler" in o["metadata"]["name"]]
    policy = chart.one(objs, "NetworkPolicy", "tessera-scheduler")
    assert [p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]] == ["http"]


def test_descheduler_values_reach_its_flags() -> None:
    values = {"descheduler": {"dryRun": True, "defragmentation": False, "logLevel": 4, "replicas": 1}}
    deployment = chart.one(chart.objects(values), "Deployment", "tessera-descheduler")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--dry-run" in args and "--v=4" in args
    assert not [a for a in args if a.startswith("--scheduler-address")]
    assert deployment["spec"]["replicas"] == 1


def test_monitoring_objects_are_deploy_monitorings_and_off_by_default() -> None:
    assert not [o for o in chart.objects() if o["kind"] in ("PodMonitor", "PrometheusRule")]
    on = OPTIONAL_ON
    objs = chart.objects(on)
    (podmonitor,) = chart.documents((DEPLOY / "monitoring" / "podmonitor.yaml").read_text())
    assert chart.one(objs, "PodMonitor", "tessera") == podmonitor
    rule = chart.one(objs, "PrometheusRule", "tessera")
    assert rule["spec"]["groups"] == yaml.safe_load((DEPLOY / "monitoring" / "rules.yaml").read_text())["groups"]
    assert rule["metadata"]["namespace"] == NAMESPACE
    labelled = {key: {"enabled": True, "labels": {"release": "kube-prometheus"}} for key in on["monitoring"]}
    for obj in chart.objects({"monitoring": labelled}, namespace="gpu"):
        if obj["kind"] in ("PodMonitor", "PrometheusRule"):
            assert obj["metadata"]["namespace"] == "gpu"
            assert obj["metadata"]["labels"] == {"app.kubernetes.io/part-of": "tessera", "release": "kube-prometheus"}


def test_the_packaged_chart_carries_the_rules_as_a_file(tmp_path: Path) -> None:
    # files/rules.yaml links deploy/monitoring/rules.yaml; a packaged chart has the file itself.
    assert (chart.CHART / "files" / "rules.yaml").resolve() == (DEPLOY / "monitoring" / "rules.yaml").resolve()
    archive = Path(helm.package(str(chart.CHART), destination=str(tmp_path)))
    with tarfile.open(archive) as tar:
        member = tar.getmember("tessera/files/rules.yaml")
        extracted = tar.extractfile(member)
        assert member.isfile() and extracted is not None
        assert extracted.read() == (DEPLOY / "monitoring" / "rules.yaml").read_bytes()


def test_the_dashboard_is_deploy_dashboard_and_off_by_default() -> None:
    # Off by default, as deploy/kustomization.yaml leaves it out; on, it is deploy/dashboard/.
    base = chart.by_identity(chart.objects())
    on = chart.by_identity(chart.objects({"dashboard": {"enabled": True}}))
    assert not [key for key in base if "dashboard" in key[3]]
    added = {key: obj for key, obj in on.items() if key not in base}
    built = chart.by_identity(chart.kustomize(DEPLOY / "dashboard"))
    assert sorted(added) == sorted(built)
    for key, obj in built.items():
        assert added[key] == obj, f"{key}: the chart renders it differently from deploy/dashboard/"
    assert {key: on[key] for key in base} == base, "enabling the dashboard changed other objects"


def test_device_classes_are_deploy_dras_and_off_by_default() -> None:
    # Off by default (resource.k8s.io/v1 needs Kubernetes 1.34), as deploy/kustomization.yaml
    # leaves them out; on, they are deploy/dra/, and nothing else changes.
    base = chart.by_identity(chart.objects())
    on = chart.by_identity(chart.objects({"dra": {"deviceClasses": True}}))
    added = {key: obj for key, obj in on.items() if key not in base}
    built = chart.by_identity(chart.kustomize(DEPLOY / "dra"))
    assert built and sorted(added) == sorted(built)
    for key, obj in built.items():
        assert added[key] == obj, f"{key}: the chart renders it differently from deploy/dra/"
    assert {key: on[key] for key in base} == base


def test_the_kubelet_dra_plugin_mounts_kubelets_directories_at_their_host_paths_and_is_off_by_default() -> None:
    def agent(values: dict[str, Any]) -> tuple[list[str], dict[str, str], dict[str, tuple[str, str]]]:
        """The agent's args, its mounts (volume -> container path), its hostPaths (volume -> (path, type))."""
        spec = chart.one(chart.objects(values), "DaemonSet", "tessera-agent")["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        hosts = {v["name"]: (v["hostPath"]["path"], v["hostPath"]["type"]) for v in spec["volumes"] if "hostPath" in v}
        return container["args"], mounts, hosts

    args, mounts, hosts = agent({})
    assert not [a for a in args if a.startswith(("--dra", "--kubelet-registry-dir", "--cdi-dir"))]
    on_args, on_mounts, on_hosts = agent({"dra": {"kubeletPlugin": True, "kubeletDir": "/var/lib/k0s/kubelet"}})
    assert [a for a in on_args if a not in args] == [
        "--dra-plugin",
        "--kubelet-registry-dir=/var/lib/k0s/kubelet/plugins_registry",
        "--dra-plugin-dir=/var/lib/k0s/kubelet/plugins/gpu.tessera.dev",
        "--cdi-dir=/var/run/cdi",
    ]
    added = {name: (on_mounts[name], on_hosts[name]) for name in on_mounts if name not in mounts}
    assert added == {
        "kubelet-plugins-registry": (
            "/var/lib/k0s/kubelet/plugins_registry",
            ("/var/lib/k0s/kubelet/plugins_registry", "Directory"),
        ),
        "kubelet-dra-plugin": (
            "/var/lib/k0s/kubelet/plugins/gpu.tessera.dev",
            ("/var/lib/k0s/kubelet/plugins/gpu.tessera.dev", "DirectoryOrCreate"),
        ),
        "cdi": ("/var/run/cdi", ("/var/run/cdi", "DirectoryOrCreate")),
    }
    assert {k: v for k, v in on_hosts.items() if k in hosts} == hosts


def test_dashboard_values() -> None:
    values = {
        "dashboard": {
            "enabled": True,
            "logLevel": 4,
            "resources": {"requests": {"cpu": "1"}, "limits": None},
            "networkPolicy": {"enabled": False},
        },
        "scheduler": {"networkPolicy": {"enabled": False}},
        "image": {"tag": "9.9.9"},
    }
    objs = chart.objects(values, namespace="gpu")
    deployment = chart.one(objs, "Deployment", "tessera-dashboard")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "--v=4" in container["args"] and container["image"] == "tessera:9.9.9"
    assert "--scheduler=tessera-scheduler.gpu.svc:10260" in container["args"]
    assert container["resources"] == {"requests": {"cpu": "1", "memory": "96Mi"}}
    assert not [o for o in objs if o["kind"] == "NetworkPolicy"], "both policies follow their switches"


def test_scheduler_plugins_pod_group_crd_is_deploy_crds_optionals_and_off_by_default(tmp_path: Path) -> None:
    """Optional (a cluster may have it from scheduler-plugins, Kubeflow or KubeRay): off, nothing;
    on, deploy/crds-optional's CRD, kept when the release is uninstalled. A packaged chart
    carries the file itself."""
    kind = "CustomResourceDefinition"
    name = f"{names.UPSTREAM_POD_GROUPS.plural}.{names.UPSTREAM_POD_GROUPS.group}"
    assert not [o for o in chart.objects() if o["kind"] == kind]
    rendered = chart.one(chart.objects(OPTIONAL_ON), kind, name)
    (expected,) = chart.documents((DEPLOY / "crds-optional" / "scheduling.x-k8s.io_podgroups.yaml").read_text())
    assert rendered["metadata"].pop("annotations") == {"helm.sh/resource-policy": "keep"}
    assert rendered == expected
    archive = Path(helm.package(str(chart.CHART), destination=str(tmp_path)))
    with tarfile.open(archive) as tar:
        extracted = tar.extractfile("tessera/files/scheduling.x-k8s.io_podgroups.yaml")
        assert extracted is not None
        assert extracted.read() == (DEPLOY / "crds-optional" / "scheduling.x-k8s.io_podgroups.yaml").read_bytes()
