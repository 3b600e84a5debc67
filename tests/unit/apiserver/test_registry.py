"""The registry's write semantics, in memory: metadata, concurrency, status, finalizers, cascades."""

import asyncio
import json
from typing import Any

import pytest

from apiserver.errors import StatusError
from apiserver.registry import JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, Registry
from apiserver.selectors import ObjectFilter, parse_field_selector, parse_label_selector
from tests.unit.apiserver.objects import make_crd, make_pod, make_registry, rt


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def with_namespaces(registry: Registry) -> None:
    await registry.ensure_namespaces()


def setup(registry: Registry) -> None:
    run(with_namespaces(registry))


def test_create_sets_server_metadata_and_pod_defaults(registry: Registry) -> None:
    setup(registry)
    pods = rt(registry, "pods")
    entry = run(registry.create(pods, "default", make_pod(resources={})))
    meta = entry.obj["metadata"]
    assert meta["namespace"] == "default" and meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert meta["generation"] == 1 and meta["resourceVersion"] == str(entry.rv) == str(registry.rv)
    assert entry.obj["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    assert entry.obj["spec"]["schedulerName"] == "default-scheduler"
    assert json.loads(entry.body) == entry.obj


def test_generate_name_and_already_exists(registry: Registry) -> None:
    setup(registry)
    pods = rt(registry, "pods")
    pod = make_pod("")
    pod["metadata"] = {"generateName": "web-"}
    entry = run(registry.create(pods, "default", pod))
    assert entry.obj["metadata"]["name"].startswith("web-") and len(entry.obj["metadata"]["name"]) == 9
    run(registry.create(pods, "default", make_pod("a")))
    with pytest.raises(StatusError) as e:
        run(registry.create(pods, "default", make_pod("a")))
    assert (e.value.code, e.value.reason) == (409, "AlreadyExists")


@pytest.mark.parametrize(
    ("namespace", "body", "code"),
    [
        ("missing", make_pod(), 404),
        ("default", {**make_pod(), "kind": "Node"}, 400),
        ("default", {**make_pod(), "apiVersion": "v2"}, 400),
        ("default", {"metadata": {"name": "x", "namespace": "other"}, "spec": {}}, 400),
        ("default", {"metadata": {}, "spec": {}}, 422),
        ("default", {"metadata": {"name": "UPPER"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}, 422),
        ("default", {"metadata": {"name": "p"}, "spec": {"containers": []}}, 422),
        ("default", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}, 422),
        ("default", {**make_pod(), "metadata": {"name": "p", "labels": {"a": 1}}}, 400),  # kube's decoder refuses it
        ("default", {**make_pod(), "metadata": "nope"}, 400),
        ("default", [1, 2], 400),
        ("default", make_pod(containers=[{"name": "c", "image": "i", "resources": {"limits": {"cpu": "x"}}}]), 400),
    ],
    ids=[
        "missing-namespace",
        "wrong-kind",
        "wrong-version",
        "namespace-mismatch",
        "no-name",
        "bad-name",
        "no-containers",
        "no-image",
        "label-not-string",
        "metadata-not-object",
        "not-an-object",
        "bad-quantity",
    ],
)
def test_create_rejects_bad_objects(registry: Registry, namespace: str, body: Any, code: int) -> None:
    setup(registry)
    with pytest.raises(StatusError) as e:
        run(registry.create(rt(registry, "pods"), namespace, body))
    assert e.value.code == code
    assert e.value.to_status()["kind"] == "Status"


def test_stale_update_conflicts_and_noop_keeps_resource_version(registry: Registry) -> None:
    setup(registry)
    nodes = rt(registry, "nodes")
    first = run(registry.create(nodes, "", {"metadata": {"name": "n1"}, "spec": {}}))
    second = run(registry.update(nodes, "", "n1", {**first.fresh(), "spec": {"unschedulable": True}}))
    assert second.rv > first.rv and second.obj["metadata"]["generation"] == 2
    with pytest.raises(StatusError) as e:
        run(registry.update(nodes, "", "n1", {**first.fresh(), "spec": {}}))
    assert e.value.code == 409 and "has been modified" in e.value.message
    same = run(registry.update(nodes, "", "n1", second.fresh()))
    assert same.rv == second.rv


def test_status_is_a_subresource(registry: Registry) -> None:
    setup(registry)
    nodes = rt(registry, "nodes")
    run(registry.create(nodes, "", {"metadata": {"name": "n1"}, "spec": {}, "status": {"phase": "x"}}))
    node = registry.get(nodes, "", "n1").fresh()
    node["status"] = {"capacity": {"cpu": "4"}}
    node["metadata"]["labels"] = {"l": "1"}
    updated = run(registry.update(nodes, "", "n1", node, subresource="status"))
    assert updated.obj["status"] == {"capacity": {"cpu": "4"}}
    assert "labels" not in updated.obj["metadata"], "a status update ignores metadata"
    node = updated.fresh()
    node["status"] = {"capacity": {"cpu": "99"}}
    node["metadata"]["labels"] = {"l": "2"}
    main = run(registry.update(nodes, "", "n1", node))
    assert main.obj["status"] == {"capacity": {"cpu": "4"}}, "a main update ignores status"
    assert main.obj["metadata"]["labels"] == {"l": "2"}
    assert main.obj["metadata"]["generation"] == 1, "metadata changes do not bump generation"


def test_pod_spec_is_immutable_but_binding_sets_the_node(registry: Registry) -> None:
    from apiserver.pods import binder

    setup(registry)
    pods = rt(registry, "pods")
    run(registry.create(pods, "default", make_pod()))
    moved = registry.get(pods, "default", "p").fresh()
    moved["spec"]["nodeName"] = "n1"
    with pytest.raises(StatusError) as e:
        run(registry.update(pods, "default", "p", moved))
    assert e.value.code == 422 and "may not change fields" in e.value.message
    image = run(
        registry.patch(
            pods, "default", "p", MERGE_PATCH, {"spec": {"containers": [{"name": "main", "image": "img:2"}]}}
        )
    )
    assert image.obj["spec"]["containers"][0]["image"] == "img:2"
    bound = run(registry.mutate(pods, "default", "p", binder({"target": {"name": "n1"}}, "p")))
    assert bound.obj["spec"]["nodeName"] == "n1"
    assert {"type": "PodScheduled", "status": "True"}.items() <= bound.obj["status"]["conditions"][0].items()
    with pytest.raises(StatusError) as e:
        run(registry.mutate(pods, "default", "p", binder({"target": {"name": "n2"}}, "p")))
    assert e.value.code == 409 and "already assigned" in e.value.message


def test_patch_types(registry: Registry) -> None:
    setup(registry)
    pods = rt(registry, "pods")
    run(registry.create(pods, "default", make_pod(labels={"a": "1"})))
    out = run(
        registry.patch(pods, "default", "p", JSON_PATCH, [{"op": "add", "path": "/metadata/labels/b", "value": "2"}])
    )
    assert out.obj["metadata"]["labels"] == {"a": "1", "b": "2"}
    out = run(registry.patch(pods, "default", "p", STRATEGIC_MERGE_PATCH, {"metadata": {"labels": {"a": None}}}))
    assert out.obj["metadata"]["labels"] == {"b": "2"}
    with pytest.raises(StatusError) as e:
        run(registry.patch(pods, "default", "p", JSON_PATCH, [{"op": "test", "path": "/metadata/name", "value": "q"}]))
    assert e.value.code == 422
    with pytest.raises(StatusError) as e:
        run(registry.patch(pods, "default", "p", MERGE_PATCH, {"metadata": {"resourceVersion": "1"}}))
    assert e.value.code == 409
    with pytest.raises(StatusError) as e:
        run(registry.patch(pods, "default", "missing", MERGE_PATCH, {}))
    assert e.value.code == 404


def test_finalizers_delay_deletion_until_removed(registry: Registry) -> None:
    setup(registry)
    maps = rt(registry, "configmaps")
    run(registry.create(maps, "default", {"metadata": {"name": "c", "finalizers": ["x/y"]}}))
    entry, removed = run(registry.delete(maps, "default", "c"))
    assert not removed and entry.obj["metadata"]["deletionTimestamp"]
    with pytest.raises(StatusError) as e:
        run(registry.patch(maps, "default", "c", MERGE_PATCH, {"metadata": {"finalizers": ["x/y", "new/one"]}}))
    assert e.value.code == 422
    run(registry.patch(maps, "default", "c", MERGE_PATCH, {"metadata": {"finalizers": None}}))
    with pytest.raises(StatusError):
        registry.get(maps, "default", "c")


def test_delete_preconditions(registry: Registry) -> None:
    setup(registry)
    maps = rt(registry, "configmaps")
    entry = run(registry.create(maps, "default", {"metadata": {"name": "c"}}))
    for pre in ({"uid": "other"}, {"resourceVersion": "1"}):
        with pytest.raises(StatusError) as e:
            run(registry.delete(maps, "default", "c", preconditions=pre))
        assert e.value.code == 409
    _, removed = run(registry.delete(maps, "default", "c", preconditions={"uid": entry.obj["metadata"]["uid"]}))
    assert removed


def test_namespace_deletion_cascades_and_waits_for_finalizers(registry: Registry) -> None:
    setup(registry)
    namespaces, maps = rt(registry, "namespaces"), rt(registry, "configmaps")
    run(registry.create(namespaces, "", {"metadata": {"name": "team"}}))
    run(registry.create(maps, "team", {"metadata": {"name": "plain"}}))
    run(registry.create(maps, "team", {"metadata": {"name": "held", "finalizers": ["x/y"]}}))
    run(registry.delete(namespaces, "", "team"))
    assert registry.get(namespaces, "", "team").obj["status"]["phase"] == "Terminating"
    assert [e.obj["metadata"]["name"] for e in registry.list_objects(maps, ObjectFilter("team")).entries] == ["held"]
    with pytest.raises(StatusError) as e:
        run(registry.create(maps, "team", {"metadata": {"name": "late"}}))
    assert e.value.code == 403
    run(registry.patch(maps, "team", "held", MERGE_PATCH, {"metadata": {"finalizers": []}}))
    with pytest.raises(StatusError):
        registry.get(namespaces, "", "team")


def test_crd_registers_its_resource_and_deletion_removes_objects(registry: Registry) -> None:
    setup(registry)
    crds = rt(registry, "customresourcedefinitions", "apiextensions.k8s.io")
    entry = run(registry.create(crds, "", make_crd()))
    assert {c["type"] for c in entry.obj["status"]["conditions"]} == {"NamesAccepted", "Established"}
    widgets = rt(registry, "widgets", "example.com")
    assert widgets.namespaced and widgets.has_status and not widgets.strategic_merge
    run(registry.create(widgets, "default", {"metadata": {"name": "w"}, "spec": {"size": 1}}))
    with pytest.raises(StatusError) as e:
        run(registry.patch(widgets, "default", "w", STRATEGIC_MERGE_PATCH, {"spec": {}}))
    assert e.value.code == 415
    run(registry.delete(crds, "", "widgets.example.com"))
    assert registry.catalog.lookup("example.com", "v1", "widgets") is None
    assert registry.list_objects(widgets, ObjectFilter()).entries == []


@pytest.mark.parametrize(
    "change",
    [
        lambda c: c["metadata"].update(name="other.example.com"),
        lambda c: c["spec"]["versions"].append({"name": "v2", "storage": True}),
        lambda c: c["spec"].update(group="nodots"),
        lambda c: c["spec"]["names"].update(plural="Bad_Plural"),
        lambda c: c["spec"].update(scope="Everywhere"),
        lambda c: c["spec"].update(group="", names={"plural": "pods", "kind": "Pod"}),
    ],
    ids=["name-mismatch", "two-storage-versions", "group-without-dot", "bad-plural", "bad-scope", "shadows-builtin"],
)
def test_crd_validation(registry: Registry, change: Any) -> None:
    setup(registry)
    crd = make_crd("others")
    change(crd)
    with pytest.raises(StatusError) as e:
        run(registry.create(rt(registry, "customresourcedefinitions", "apiextensions.k8s.io"), "", crd))
    assert e.value.code == 422


def test_crd_scope_is_immutable(registry: Registry) -> None:
    setup(registry)
    crds = rt(registry, "customresourcedefinitions", "apiextensions.k8s.io")
    run(registry.create(crds, "", make_crd("things")))
    crd = registry.get(crds, "", "things.example.com").fresh()
    crd["spec"]["scope"] = "Cluster"
    with pytest.raises(StatusError) as e:
        run(registry.update(crds, "", "things.example.com", crd))
    assert e.value.code == 422 and "immutable" in e.value.message


def test_list_paging_selectors_and_namespaces(registry: Registry) -> None:
    setup(registry)
    pods, namespaces = rt(registry, "pods"), rt(registry, "namespaces")
    run(registry.create(namespaces, "", {"metadata": {"name": "other"}}))
    for i in range(7):
        run(registry.create(pods, "default", make_pod(f"p{i}", labels={"i": str(i), "even": str(i % 2 == 0).lower()})))
    run(registry.create(pods, "other", make_pod("q")))
    names, token = [], ""
    while True:
        page = registry.list_objects(pods, ObjectFilter("default"), limit=3, continue_token=token)
        names += [e.obj["metadata"]["name"] for e in page.entries]
        token = page.continue_token
        if not token:
            break
        assert page.remaining is not None
    assert names == [f"p{i}" for i in range(7)]
    everywhere = registry.list_objects(pods, ObjectFilter())
    assert len(everywhere.entries) == 8 and everywhere.rv == registry.rv
    flt = ObjectFilter(
        "default", parse_label_selector("even=true,i notin (0)"), parse_field_selector("status.phase=Pending", pods)
    )
    assert [e.obj["metadata"]["name"] for e in registry.list_objects(pods, flt).entries] == ["p2", "p4", "p6"]
    with pytest.raises(StatusError):
        registry.list_objects(pods, ObjectFilter(), continue_token="garbage!")


def test_objects_over_the_size_limit_are_refused() -> None:
    registry = make_registry()
    setup(registry)
    maps = rt(registry, "configmaps")
    before = registry.rv
    with pytest.raises(StatusError) as e:
        run(registry.create(maps, "default", {"metadata": {"name": "big"}, "data": {"x": "y" * (1600 * 1024)}}))
    assert e.value.code == 413
    assert registry.rv == before, "a refused write does not consume a resourceVersion"


def test_dry_run_changes_nothing(registry: Registry) -> None:
    setup(registry)
    maps = rt(registry, "configmaps")
    before = registry.rv
    entry = run(registry.create(maps, "default", {"metadata": {"name": "c"}}, dry_run=True))
    assert entry.obj["metadata"]["uid"] and registry.rv == before
    with pytest.raises(StatusError):
        registry.get(maps, "default", "c")


def test_watch_events_are_published_in_order_with_previous_state(registry: Registry) -> None:
    setup(registry)
    maps = rt(registry, "configmaps")
    start = registry.rv
    run(registry.create(maps, "default", {"metadata": {"name": "c"}, "data": {"a": "1"}}))
    run(registry.patch(maps, "default", "c", MERGE_PATCH, {"data": {"a": "2"}}))
    run(registry.delete(maps, "default", "c"))
    events = registry.hub.log(maps.storage_id).since(start)
    assert [e.type for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert [e.rv for e in events] == sorted(e.rv for e in events)
    assert events[1].prev is not None and events[1].prev["data"] == {"a": "1"}
    assert json.loads(events[2].line())["object"]["metadata"]["resourceVersion"] == str(events[2].rv)
