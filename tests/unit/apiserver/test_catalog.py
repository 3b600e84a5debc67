"""The catalog of served types, discovery documents and the OpenAPI kubectl reads."""

import json

from apiserver.catalog import Catalog, sort_versions, types_from_crd
from apiserver.discovery import Discovery
from tests.unit.apiserver.objects import make_crd


def test_version_priority_is_kubernetes_order() -> None:
    assert sort_versions(["v1alpha1", "v2", "v1beta2", "v1", "v1beta1", "foo", "v10"]) == (
        "v10",
        "v2",
        "v1",
        "v1beta2",
        "v1beta1",
        "v1alpha1",
        "foo",
    )


def test_crd_registration_is_served_and_discoverable() -> None:
    catalog = Catalog()
    crd = make_crd("widgets", scope="Cluster")
    crd["spec"]["versions"].append({"name": "v1beta1", "served": True, "storage": False})
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = [
        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"}
    ]
    catalog.register_crd("widgets.example.com", types_from_crd(crd))
    v1 = catalog.lookup("example.com", "v1", "widgets")
    assert v1 is not None and not v1.namespaced and v1.columns[0].name == "Size"
    assert catalog.lookup("example.com", "v1beta1", "widgets") is not None
    discovery = Discovery(catalog, "127.0.0.1:1")
    groups = json.loads(discovery.group_list())["groups"]
    widget_group = next(g for g in groups if g["name"] == "example.com")
    assert widget_group["preferredVersion"]["version"] == "v1"
    resources = json.loads(discovery.resource_list("example.com", "v1") or b"{}")["resources"]
    assert {r["name"] for r in resources} == {"widgets", "widgets/status"}
    catalog.unregister_crd("widgets.example.com")
    assert catalog.lookup("example.com", "v1", "widgets") is None
    assert discovery.resource_list("example.com", "v1") is None


def test_core_discovery_lists_pod_subresources() -> None:
    resources = json.loads(Discovery(Catalog(), "x").resource_list("", "v1") or b"{}")["resources"]
    by_name = {r["name"]: r for r in resources}
    assert by_name["pods"]["shortNames"] == ["po"] and "watch" in by_name["pods"]["verbs"]
    assert by_name["pods/eviction"]["group"] == "policy" and by_name["pods/binding"]["verbs"] == ["create"]
    assert by_name["bindings"]["verbs"] == ["create"]
    assert by_name["pods/log"]["verbs"] == ["get"] and by_name["pods/exec"]["kind"] == "PodExecOptions"
    assert by_name["pods/portforward"]["verbs"] == ["create", "get"]


def test_openapi_v3_declares_field_validation_per_kind() -> None:
    discovery = Discovery(Catalog(), "x")
    root = json.loads(discovery.openapi_v3_root())["paths"]
    assert "api/v1" in root and root["api/v1"]["serverRelativeURL"].startswith("/openapi/v3/api/v1?hash=")
    doc = json.loads(discovery.openapi_v3("api/v1") or b"{}")
    patch = doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert "fieldValidation" in {p["name"] for p in patch["parameters"]}
    assert discovery.openapi_v3("apis/nope/v1") is None
