"""The built-in kinds' definitions (apiserver/schema/builtin.json): complete, current, and walked
by the same pruning as custom resources."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import kubernetes
import pytest

from apiserver.catalog import BUILTINS, Catalog
from apiserver.schema import builtin, openapi
from apiserver.schema.prune import prune

REPO = Path(__file__).resolve().parents[3]
JSON = REPO / "apiserver" / "schema" / "builtin.json"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_builtin_openapi", REPO / "hack" / "gen_builtin_openapi.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_checked_in_file_is_what_the_generator_writes() -> None:
    recorded = json.loads(JSON.read_text())["client"]
    if recorded != kubernetes.__version__:
        pytest.skip(f"made from client {recorded}, {kubernetes.__version__} installed: regenerate to compare")
    generator = _generator()
    assert generator.render(generator.build()) == JSON.read_text(), "run: python hack/gen_builtin_openapi.py --write"


def test_every_served_builtin_kind_has_a_definition_and_every_ref_resolves() -> None:
    schemas = builtin.load()
    roots = [schemas.root(rt.group, rt.version, rt.kind) for rt in BUILTINS]
    assert None not in roots
    closure = schemas.closure(r for r in roots if r is not None)
    assert set(closure) <= set(schemas.definitions)
    pod = schemas.definitions["io.k8s.api.core.v1.Pod"]
    assert pod["x-kubernetes-group-version-kind"] == [{"group": "", "kind": "Pod", "version": "v1"}]
    spec = schemas.definitions["io.k8s.api.core.v1.PodSpec"]
    assert spec["required"] == ["containers"]
    assert spec["properties"]["containers"]["x-kubernetes-patch-merge-key"] == "name"
    surge = schemas.definitions["io.k8s.api.apps.v1.RollingUpdateDeployment"]["properties"]["maxSurge"]
    assert surge["$ref"] == "#/components/schemas/io.k8s.apimachinery.pkg.util.intstr.IntOrString"
    assert schemas.definitions["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["format"] == "int-or-string"


def test_openapi_documents_hold_builtin_kinds_with_what_they_refer_to() -> None:
    catalog = Catalog()
    apps = openapi.v3_schemas(catalog.resources("apps", "v1"))
    assert "io.k8s.api.apps.v1.Deployment" in apps and "io.k8s.api.core.v1.PodSpec" in apps
    assert "io.k8s.api.core.v1.Node" not in apps, "a group-version's document holds its kinds' closure only"
    v2 = openapi.v2_definitions(catalog.all())
    ref = v2["io.k8s.api.core.v1.Pod"]["properties"]["spec"]["$ref"]
    assert ref == "#/definitions/io.k8s.api.core.v1.PodSpec"
    fields = v2["io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps"]["properties"]
    assert {"anyOf", "oneOf", "allOf", "not", "nullable", "$ref"} <= set(fields), "field names are not keywords"


def _pod(**extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"a": "b"}, "annotations": {"koordinator.sh/x": "{}"}},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
        **extra,
    }


def test_unknown_fields_of_a_pod_are_pruned_with_their_paths() -> None:
    schema = builtin.load().structural("", "v1", "Pod")
    assert schema is not None
    pod = _pod(status={"phase": "Pending", "bogus": 1})
    pod["metadata"]["typo"] = 1
    pod["spec"]["containerz"] = []
    pod["spec"]["containers"][0]["imagez"] = "x"
    removed = prune(schema, pod, root=False)
    assert removed == ["metadata.typo", "spec.containers[0].imagez", "spec.containerz", "status.bogus"]
    assert pod == _pod(status={"phase": "Pending"}), "maps (labels, annotations, limits) keep every key"


def test_recursive_definitions_are_walked_as_deep_as_the_object_goes() -> None:
    schema = builtin.load().structural("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
    assert schema is not None
    inner = {"type": "object", "properties": {"spec": {"type": "object", "typez": "x"}}}
    crd = {"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": inner}}]}}
    removed = prune(schema, crd, root=False)
    assert removed == ["spec.versions[0].schema.openAPIV3Schema.properties[spec].typez"]
