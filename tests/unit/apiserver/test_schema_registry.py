"""Custom resources through the registry: a CRD's schema prunes, defaults and validates writes."""

import asyncio
from typing import Any

import pytest

from apiserver.errors import StatusError
from apiserver.registry import MERGE_PATCH, Registry
from tests.unit.apiserver.objects import make_crd, rt

SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["size"],
            "properties": {"size": {"type": "integer", "minimum": 1}, "colour": {"type": "string", "default": "red"}},
        },
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
    },
}


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.fixture
def widgets(registry: Registry) -> Registry:
    run(registry.ensure_namespaces())
    crd = make_crd()
    crd["spec"]["versions"][0]["schema"] = {"openAPIV3Schema": SCHEMA}
    run(registry.create(rt(registry, "customresourcedefinitions", "apiextensions.k8s.io"), "", crd))
    return registry


def test_create_prunes_and_defaults(widgets: Registry) -> None:
    kind = rt(widgets, "widgets", "example.com")
    entry = run(widgets.create(kind, "default", {"metadata": {"name": "w"}, "spec": {"size": 2, "typo": 1}}))
    assert entry.obj["spec"] == {"size": 2, "colour": "red"}


def test_an_invalid_object_is_refused_with_every_field_named(widgets: Registry) -> None:
    kind = rt(widgets, "widgets", "example.com")
    with pytest.raises(StatusError) as e:
        run(widgets.create(kind, "default", {"metadata": {"name": "w"}, "spec": {"colour": 3}}))
    assert e.value.code == 422
    assert {(c.field, c.reason) for c in e.value.causes} == {
        ("spec.size", "FieldValueRequired"),
        ("spec.colour", "FieldValueTypeInvalid"),
    }


def test_updates_patches_and_status_are_validated(widgets: Registry) -> None:
    kind = rt(widgets, "widgets", "example.com")
    run(widgets.create(kind, "default", {"metadata": {"name": "w"}, "spec": {"size": 2}}))
    with pytest.raises(StatusError) as e:
        run(widgets.patch(kind, "default", "w", MERGE_PATCH, {"spec": {"size": 0}}))
    assert e.value.code == 422 and e.value.causes[0].field == "spec.size"
    with pytest.raises(StatusError) as e:
        run(widgets.patch(kind, "default", "w", MERGE_PATCH, {"status": {"ready": "yes"}}, subresource="status"))
    assert e.value.causes[0].field == "status.ready"
    entry = run(
        widgets.patch(kind, "default", "w", MERGE_PATCH, {"status": {"ready": True, "x": 1}}, subresource="status")
    )
    assert entry.obj["status"] == {"ready": True}


def test_a_crd_needs_a_structural_schema(registry: Registry) -> None:
    run(registry.ensure_namespaces())
    crds = rt(registry, "customresourcedefinitions", "apiextensions.k8s.io")
    missing = make_crd("things")
    del missing["spec"]["versions"][0]["schema"]
    untyped = make_crd("gadgets")
    untyped["spec"]["versions"][0]["schema"] = {"openAPIV3Schema": {"type": "object", "properties": {"a": {}}}}
    for crd, field in [
        (missing, "spec.versions[0].schema.openAPIV3Schema"),
        (untyped, "spec.versions[0].schema.openAPIV3Schema.properties[a].type"),
    ]:
        with pytest.raises(StatusError) as e:
            run(registry.create(crds, "", crd))
        assert e.value.code == 422 and [c.field for c in e.value.causes] == [field]
