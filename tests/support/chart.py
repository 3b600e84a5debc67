"""deploy/helm/tessera as the tests see it: rendered by real Helm, and deploy/ as kustomize builds it.

Helm here is helm-python-sdk, Helm's own Go library behind a C ABI (no helm binary, no template
engine of ours), so what the tests render is what `helm template` and `helm install` would send.
Kustomize is the real `kubectl kustomize`. The two are compared object by object, so the chart and
the kustomize manifests cannot drift apart.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from tests.support.manifests import DEPLOY, NAMESPACE, Obj

CHART = DEPLOY / "helm" / "tessera"
RELEASE = "tessera"

#: Values that differ from every default, for the tests that check each value is used.
CUSTOM: dict[str, Any] = {
    "image": {"repository": "registry.example.com/tessera", "tag": "9.9.9", "pullPolicy": "Always"},
    "imagePullSecrets": [{"name": "regcred"}],
    "scheduler": {
        "name": "gpu-scheduler",
        "replicas": 1,
        "leaderElect": False,
        "logLevel": 4,
        "deviceScoringStrategy": "MostAllocated",
        # Helm merges maps with the defaults: null removes a default key.
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": None},
        "podDisruptionBudget": {"enabled": False},
        "networkPolicy": {"enabled": False},
    },
    "controller": {
        "replicas": 3,
        "leaderElect": True,
        "logLevel": 5,
        "webhook": {"enabled": True, "certManager": False, "caBundle": "Q0EK", "failurePolicy": "Ignore"},
        "podDisruptionBudget": {"enabled": False},
    },
    "agent": {
        "logLevel": 3,
        "affinity": None,
        "nodeSelector": {"nvidia.com/gpu.present": "true"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "resources": {"requests": None, "limits": {"memory": "1Gi"}},
        "qos": {"beCPUSuppression": True, "ls": {"cpuQOS": True}, "be": {"memoryQOS": True}},
    },
}

#: Helm's lint severities (helm.sh/helm/v4/pkg/chart/v2/lint/support): info is advice, the rest is not.
LINT_INFO = 1


def render(values: dict[str, Any] | None = None, namespace: str = NAMESPACE) -> dict[str, str]:
    """What `helm template tessera deploy/helm/tessera -n NAMESPACE` renders: template path -> text.

    Raises helm.HelmValuesError when values.schema.json refuses the values.
    """
    with helm.Chart.load(str(CHART)) as chart:
        return chart.render(values or {}, name=RELEASE, namespace=namespace, is_install=True)


def documents(text: str) -> list[Obj]:
    """The objects of a multi-document YAML text, without the empty documents."""
    return [doc for doc in yaml.safe_load_all(text) if doc]


def objects(values: dict[str, Any] | None = None, namespace: str = NAMESPACE) -> list[Obj]:
    """The rendered objects of every template (NOTES.txt is text for the user, not an object)."""
    rendered = render(values, namespace)
    return [obj for path in sorted(rendered) if path.endswith(".yaml") for obj in documents(rendered[path])]


def notes(values: dict[str, Any] | None = None) -> str:
    """The rendered NOTES.txt, as `helm install` prints it."""
    return next(text for path, text in render(values).items() if path.endswith("/NOTES.txt"))


def crds() -> list[Obj]:
    """The CRDs `helm install` creates before the templates (the chart's crds/)."""
    with helm.Chart.load(str(CHART)) as chart:
        return [obj for crd in chart.crds for obj in documents(crd["data"])]


def lint(values: dict[str, Any] | None = None) -> dict[str, Any]:
    """`helm lint --strict`'s findings, as data."""
    return helm.lint(str(CHART), values or {}, strict=True, namespace=NAMESPACE)


def kubectl() -> str:
    """The real kubectl, or the test is skipped (as root, `make test` installs Debian's kubernetes-client)."""
    path = shutil.which("kubectl")
    if path is None:
        pytest.skip("kubectl is not installed: deploy/ is not built with kustomize")
    return path


def kustomize(directory: Path = DEPLOY) -> list[Obj]:
    """`kubectl kustomize DIRECTORY`: the objects `kubectl apply -k` would send."""
    result = subprocess.run(
        [kubectl(), "kustomize", str(directory)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, f"kubectl kustomize {directory} failed: {result.stderr}"
    return documents(result.stdout)


def identity(obj: Obj) -> tuple[str, str, str, str]:
    """apiVersion, kind, namespace and name: what makes an object the same object on a server."""
    meta = obj.get("metadata") or {}
    return (str(obj.get("apiVersion")), str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta["name"]))


def by_identity(objs: list[Obj]) -> dict[tuple[str, str, str, str], Obj]:
    found: dict[tuple[str, str, str, str], Obj] = {}
    for obj in objs:
        assert identity(obj) not in found, f"{identity(obj)} appears twice"
        found[identity(obj)] = obj
    return found


def one(objs: list[Obj], kind: str, name: str) -> Obj:
    """The one object of that kind and name."""
    found = [obj for obj in objs if obj["kind"] == kind and obj["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def container(objs: list[Obj], kind: str, name: str) -> Obj:
    """The first container of a workload."""
    containers: list[Obj] = one(objs, kind, name)["spec"]["template"]["spec"]["containers"]
    return containers[0]
