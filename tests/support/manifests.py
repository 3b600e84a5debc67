"""deploy/ as the tests see it: the kustomization's objects, parsed once, and lookups over them.

Also the bridge to the real command line: `parse_args(container)` runs a container's `args`
through `cli.main.build_parser`, so the manifests cannot name a flag `tessera` does not have.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from apiserver.authz import bootstrap
from cli import main

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
NAMESPACE = "tessera-system"

Obj = dict[str, Any]

#: Kinds that are not namespaced.
CLUSTER_SCOPED = frozenset(
    {"Namespace", "ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration", "DeviceClass"}
)
#: Secrets workloads mount that deploy/ cannot ship (they hold keys made at install), and who makes them.
INSTALL_SECRETS = {
    "tessera-controller-webhook-cert": "cert-manager (deploy/cert-manager/) or `kubectl create secret tls`",
}
WORKLOAD_KINDS = frozenset({"Deployment", "DaemonSet"})
#: The workload each component runs in.
WORKLOADS = {
    "scheduler": "tessera-scheduler",
    "controller": "tessera-controller",
    "descheduler": "tessera-descheduler",
    "agent": "tessera-agent",
    "dashboard": "tessera-dashboard",
}


@dataclass(frozen=True)
class Manifest:
    """One object and the file it came from (relative to deploy/)."""

    path: str
    obj: Obj

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind", ""))

    @property
    def api_version(self) -> str:
        return str(self.obj.get("apiVersion", ""))

    @property
    def name(self) -> str:
        return str((self.obj.get("metadata") or {}).get("name", ""))

    @property
    def namespace(self) -> str | None:
        return (self.obj.get("metadata") or {}).get("namespace")

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name} ({self.path})"


#: The kustomizations of deploy/: the base (`kubectl apply -k deploy/`, the chart's defaults) and
#: the optional dashboard (`kubectl apply -k deploy/dashboard/`, the chart's dashboard.enabled).
KUSTOMIZATIONS = (DEPLOY, DEPLOY / "dashboard", DEPLOY / "dra")


@functools.cache
def kustomization(directory: Path = DEPLOY) -> Obj:
    doc = yaml.safe_load((directory / "kustomization.yaml").read_text())
    assert isinstance(doc, dict), f"{directory}/kustomization.yaml: expected a mapping"
    return doc


@functools.cache
def objects(directory: Path | None = None) -> tuple[Manifest, ...]:
    """Every object of every file a kustomization lists (None: all of `KUSTOMIZATIONS`, what an
    install with the dashboard applies), in order. Do not mutate them."""
    found = []
    for where in KUSTOMIZATIONS if directory is None else (directory,):
        for resource in kustomization(where)["resources"]:
            path = where / resource
            for doc in yaml.safe_load_all(path.read_text()):
                if doc is not None:
                    found.append(Manifest(str(path.relative_to(DEPLOY)), doc))
    return tuple(found)


def find(kind: str, name: str, namespace: str | None = None) -> Manifest | None:
    for m in objects():
        if m.kind == kind and m.name == name and m.namespace == namespace:
            return m
    return None


def role(kind: str, name: str, namespace: str | None = None) -> Manifest | None:
    """A Role or ClusterRole a binding names: deploy/'s, or one of kube-apiserver's bootstrap
    ClusterRoles (`system:auth-delegator`), which every cluster has."""
    found = find(kind, name, namespace)
    if found is None and kind == "ClusterRole" and name in bootstrap.CLUSTER_ROLES:
        obj = {"kind": kind, "metadata": {"name": name}, "rules": bootstrap.CLUSTER_ROLES[name]}
        return Manifest("(kube-apiserver's bootstrap policy)", obj)
    return found


def of_kind(*kinds: str) -> list[Manifest]:
    return [m for m in objects() if m.kind in kinds]


def workloads() -> list[Manifest]:
    return of_kind(*WORKLOAD_KINDS)


def workload(name: str) -> Manifest:
    found = [m for m in workloads() if m.name == name]
    assert len(found) == 1, f"expected one workload named {name}, found {len(found)}"
    return found[0]


def pod_template(m: Manifest) -> Obj:
    template: Obj = m.obj["spec"]["template"]
    return template


def pod_spec(m: Manifest) -> Obj:
    spec: Obj = pod_template(m)["spec"]
    return spec


def containers(m: Manifest) -> list[Obj]:
    spec = pod_spec(m)
    return [*spec.get("initContainers", []), *spec["containers"]]


def all_containers() -> Iterator[tuple[Manifest, Obj]]:
    for m in workloads():
        for c in containers(m):
            yield m, c


def subcommand(container: Obj) -> str:
    """The `tessera` subcommand a container runs (its first argument)."""
    assert container.get("command") == ["tessera"], f"container {container['name']}: command must be [tessera]"
    args = container.get("args") or []
    assert args and not str(args[0]).startswith("-"), (
        f"container {container['name']}: args must start with a subcommand"
    )
    return str(args[0])


def field_env(container: Obj) -> dict[str, str]:
    """Env variables set from the downward API: name -> fieldPath."""
    return {
        e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
        for e in container.get("env", [])
        if "fieldRef" in (e.get("valueFrom") or {})
    }


#: Values the downward API would give, for parsing flags whose defaults read the environment.
DOWNWARD_EXAMPLES = {"spec.nodeName": "gpu-1", "metadata.name": "tessera-pod-0", "metadata.namespace": NAMESPACE}


def parse_args(container: Obj, monkeypatch: pytest.MonkeyPatch) -> argparse.Namespace:
    """The container's args parsed by the real `tessera` parser, in the environment the pod has.

    Fails the test (with argparse's message) when a flag is unknown or a value does not parse.
    """
    sub = subcommand(container)
    assert sub in main.COMMANDS, f"container {container['name']}: {sub!r} is not a tessera subcommand"
    for name, path in field_env(container).items():
        monkeypatch.setenv(name, DOWNWARD_EXAMPLES[path])
    for e in container.get("env", []):
        if "value" in e:
            monkeypatch.setenv(e["name"], str(e["value"]))
    parser = main.build_parser(sub)
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            return parser.parse_args([str(a) for a in container["args"]])
    except SystemExit:
        pytest.fail(f"container {container['name']}: tessera {sub} rejects its args: {stderr.getvalue().strip()}")


def settings(container: Obj, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The component's settings built from the container's args, validated as the command does."""
    args = parse_args(container, monkeypatch)
    module = importlib.import_module(main.COMMANDS[args.command][0])
    built = module.settings_from(args)
    validate = getattr(built, "validate", None)
    if validate is not None:
        validate()
    return built


def mounted_file(m: Manifest, container: Obj, path: str) -> tuple[Obj, str]:
    """The volume a file path inside the container comes from, and the path inside that volume."""
    target = PurePosixPath(path)
    best: tuple[Obj, PurePosixPath] | None = None
    for mount in container.get("volumeMounts", []):
        mount_path = PurePosixPath(mount["mountPath"])
        if (target == mount_path or mount_path in target.parents) and (
            best is None or len(mount_path.parts) > len(best[1].parts)
        ):
            volume = next(v for v in pod_spec(m)["volumes"] if v["name"] == mount["name"])
            best = (volume, mount_path)
    assert best is not None, f"{m}: {path} is on no volume of container {container['name']}"
    volume, mount_path = best
    return volume, str(target.relative_to(mount_path))


def host_path(m: Manifest, container: Obj, path: str | PurePosixPath | Path) -> str:
    """Where `path` inside a container is on the node (it must be on a hostPath volume)."""
    volume, rest = mounted_file(m, container, str(path))
    assert "hostPath" in volume, f"{path} should be on a hostPath volume"
    base = str(volume["hostPath"]["path"])
    return base if rest == "." else f"{base}/{rest}"
