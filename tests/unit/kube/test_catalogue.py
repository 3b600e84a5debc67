"""The resource catalogue is the one place a kind is declared, and the CRD files, the embedded API
server and the typed accessors agree with it."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from apis.extension import names
from apis.extension.names import GroupVersionResource
from apiserver.catalog import BUILTINS as SERVED
from kube import catalogue, crds

ROOT = Path(__file__).resolve().parents[3]
CRD_DIR = ROOT / "deploy" / "crds"
OPTIONAL_CRD_DIR = ROOT / "deploy" / "crds-optional"
#: Where a GroupVersionResource may be declared: the CRDs (the protocol's) and the built-in kinds.
DECLARED_IN = {
    ROOT / "apis" / "extension" / "names.py",
    ROOT / "apis" / "dra" / "__init__.py",
    ROOT / "kube" / "resources.py",
}
#: Our packages, as the import contracts list them (proto holds generated code only).
SOURCE_PACKAGES = [
    p
    for p in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]
    if p != "proto"
]


def crd_files(directory: Path = CRD_DIR) -> dict[str, dict[str, Any]]:
    return {path.name: yaml.safe_load(path.read_text()) for path in sorted(directory.glob("*.yaml"))}


def test_kinds_are_unique() -> None:
    assert len({(r.api_version, r.kind) for r in catalogue.ALL}) == len(catalogue.ALL)
    assert len({(r.group, r.plural) for r in catalogue.ALL}) == len(catalogue.ALL)


@pytest.mark.parametrize(
    ("gvr", "directory"),
    [*((r, CRD_DIR) for r in catalogue.CUSTOM), *((r, OPTIONAL_CRD_DIR) for r in catalogue.OPTIONAL)],
    ids=lambda v: v.api_version if isinstance(v, GroupVersionResource) else "",
)
def test_each_crd_file_is_its_catalogue_entry(gvr: GroupVersionResource, directory: Path) -> None:
    doc = crd_files(directory)[f"{gvr.group}_{gvr.plural}.yaml"]
    spec = doc["spec"]
    assert doc["metadata"]["name"] == f"{gvr.plural}.{gvr.group}"
    assert (spec["group"], spec["names"]["plural"], spec["names"]["kind"]) == (gvr.group, gvr.plural, gvr.kind)
    assert spec["scope"] == ("Namespaced" if gvr.namespaced else "Cluster")
    (stored,) = [v for v in spec["versions"] if v["storage"]]
    assert stored["name"] == gvr.version and stored["served"]
    assert ("status" in (stored.get("subresources") or {})) is gvr.status_subresource


def test_every_crd_file_is_catalogued() -> None:
    assert sorted(crd_files()) == sorted(f"{r.group}_{r.plural}.yaml" for r in catalogue.CUSTOM)
    assert sorted(crd_files(OPTIONAL_CRD_DIR)) == sorted(f"{r.group}_{r.plural}.yaml" for r in catalogue.OPTIONAL)


@pytest.mark.parametrize("gvr", catalogue.BUILTINS, ids=lambda r: r.kind)
def test_the_embedded_api_server_serves_each_built_in_kind_as_catalogued(gvr: GroupVersionResource) -> None:
    (served,) = [t for t in SERVED if (t.group, t.version, t.plural) == (gvr.group, gvr.version, gvr.plural)]
    assert (served.kind, served.namespaced, served.has_status) == (gvr.kind, gvr.namespaced, gvr.status_subresource)


def test_lookups() -> None:
    assert catalogue.for_kind("v1", "ServiceAccount") is not None
    assert catalogue.for_kind("scheduling.koordinator.sh/v1alpha1", "Device") == names.DEVICES
    assert catalogue.for_kind("v1", "Gadget") is None
    assert catalogue.for_resource("", "pods") == catalogue.BUILTINS[2]
    assert catalogue.for_resource("apps", "pods") is None


def _declarations(path: Path) -> list[int]:
    """Lines of `path` that construct a GroupVersionResource."""
    tree = ast.parse(path.read_text(), str(path))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Name) and node.func.id == "GroupVersionResource")
            or (isinstance(node.func, ast.Attribute) and node.func.attr == "GroupVersionResource")
        )
    ]


def test_a_resource_is_declared_in_the_catalogues_modules_only() -> None:
    found = {
        f"{path.relative_to(ROOT)}:{line}"
        for package in SOURCE_PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if path not in DECLARED_IN
        for line in _declarations(path)
    }
    assert found == set()
    assert all(_declarations(path) for path in DECLARED_IN)  # the scan sees declarations


class _Client:
    """Just enough of a Client for an accessor to say which resource it reads."""

    def resource(self, gvr: GroupVersionResource) -> GroupVersionResource:
        return gvr


def test_every_crd_but_nodeslo_has_a_typed_accessor() -> None:
    accessors = [crds.devices, crds.elastic_quotas, crds.pod_groups, crds.reservations, crds.pod_migration_jobs]
    typed = {accessor(_Client()).api for accessor in accessors}  # type: ignore[arg-type]  # a stand-in Client
    # NodeSLO's spec is the agent's QoS configuration: the agent reads it (kube/crds.py says why).
    assert typed == set(catalogue.CUSTOM) - {names.NODE_SLOS}
