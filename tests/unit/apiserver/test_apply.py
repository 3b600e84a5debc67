"""Server-side apply's parts: field sets, kube's fieldsV1, merging and conflicts (no HTTP)."""

import asyncio
from typing import Any

import pytest

from apiserver.apply import tracking
from apiserver.apply.fields import ListKinds, decode, encode, leaves
from apiserver.apply.merge import merge, path_string, remove
from apiserver.apply.server import server_side_apply
from apiserver.errors import StatusError
from apiserver.registry import MERGE_PATCH, Registry
from tests.unit.apiserver.objects import rt

POD_LISTS = ListKinds.for_type("Pod", None)


def pod(image: str = "a:1", **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"app": "x"}, "finalizers": ["f1"]},
        "spec": {"containers": [{"name": "main", "image": image}], **extra},
    }


def test_field_sets_name_list_items_by_key_and_set_members() -> None:
    paths = leaves(pod(), POD_LISTS)
    assert paths == {
        ("f:metadata", "f:labels", "f:app"),
        ("f:metadata", "f:finalizers", 'v:"f1"'),
        ("f:spec", "f:containers", 'k:{"name":"main"}', "."),
        ("f:spec", "f:containers", 'k:{"name":"main"}', "f:name"),
        ("f:spec", "f:containers", 'k:{"name":"main"}', "f:image"),
    }
    assert decode(encode(paths)) == paths
    assert encode({("f:spec", "f:x")}) == {"f:spec": {"f:x": {}}}
    assert path_string(("f:spec", "f:containers", 'k:{"name":"main"}', "f:image")) == (
        '.spec.containers[name="main"].image'
    )


def test_merge_keeps_other_items_and_replaces_atomic_values() -> None:
    live = pod(tolerations=[{"key": "a"}])
    live["spec"]["containers"].append({"name": "side", "image": "s:1"})
    applied = pod("a:2", tolerations=[{"key": "b"}])
    merged = merge(live, applied, POD_LISTS)
    assert [(c["name"], c["image"]) for c in merged["spec"]["containers"]] == [("main", "a:2"), ("side", "s:1")]
    assert merged["spec"]["tolerations"] == [{"key": "b"}], "an atomic list is replaced"
    remove(merged, ("f:spec", "f:containers", 'k:{"name":"side"}', "."))
    remove(merged, ("f:metadata", "f:finalizers", 'v:"f1"'))
    assert [c["name"] for c in merged["spec"]["containers"]] == ["main"] and merged["metadata"]["finalizers"] == []


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def cm(value: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": value, **data}}


def test_apply_creates_merges_conflicts_and_forces(registry: Registry) -> None:
    run(registry.ensure_namespaces())
    kind = rt(registry, "configmaps")

    def apply(obj: dict[str, Any], manager: str, *, force: bool = False) -> dict[str, Any]:
        entry, _ = run(server_side_apply(registry, kind, "default", "c", obj, manager=manager, force=force))
        return dict(entry.obj)

    created = apply(cm("1", y="1"), "a")
    assert [m["manager"] for m in created["metadata"]["managedFields"]] == ["a"]
    assert apply(cm("1", z="1"), "b")["data"] == {"x": "1", "y": "1", "z": "1"}, "the same value is shared"
    with pytest.raises(StatusError) as e:
        apply(cm("2"), "b")
    assert e.value.code == 409
    assert e.value.message == 'Apply failed with 1 conflict: conflict with "a" using v1: .data.x'
    assert [(c.field, c.reason) for c in e.value.causes] == [(".data.x", "FieldManagerConflict")]
    forced = apply(cm("2"), "b", force=True)
    assert forced["data"] == {"x": "2", "y": "1"}, "b no longer applies z: removed; y stays a's"
    owners = {m["manager"]: decode(m["fieldsV1"]) for m in forced["metadata"]["managedFields"]}
    assert owners == {"a": {("f:data", "f:y")}, "b": {("f:data", "f:x")}}


def test_apply_needs_a_field_manager(registry: Registry) -> None:
    run(registry.ensure_namespaces())
    with pytest.raises(StatusError) as e:
        run(server_side_apply(registry, rt(registry, "configmaps"), "default", "c", cm("1"), manager="", force=False))
    assert e.value.code == 400 and "fieldManager is required" in e.value.message


def test_an_update_takes_fields_over_and_a_later_apply_conflicts_with_it(registry: Registry) -> None:
    run(registry.ensure_namespaces())
    kind = rt(registry, "configmaps")
    run(server_side_apply(registry, kind, "default", "c", cm("1"), manager="a", force=False))
    with tracking.updates_by("kubectl-edit"):
        edited = run(registry.patch(kind, "default", "c", MERGE_PATCH, {"data": {"x": "9"}}))
    owners = {m["manager"]: (m["operation"], decode(m["fieldsV1"])) for m in edited.obj["metadata"]["managedFields"]}
    assert owners["kubectl-edit"] == ("Update", {("f:data", "f:x")})
    assert "a" not in owners, "a manager left with no fields is dropped"
    with pytest.raises(StatusError) as e:
        run(server_side_apply(registry, kind, "default", "c", cm("1"), manager="a", force=False))
    assert e.value.message == 'Apply failed with 1 conflict: conflict with "kubectl-edit" using v1: .data.x'


def test_objects_nobody_applied_carry_no_managed_fields(registry: Registry) -> None:
    run(registry.ensure_namespaces())
    kind = rt(registry, "configmaps")
    run(registry.create(kind, "default", cm("1")))
    with tracking.updates_by("kubectl-edit"):
        edited = run(registry.patch(kind, "default", "c", MERGE_PATCH, {"data": {"x": "9"}}))
    assert "managedFields" not in edited.obj["metadata"]
