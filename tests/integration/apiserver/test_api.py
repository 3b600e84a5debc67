"""The embedded API server driven by the official `kubernetes` client over real HTTP."""

import json

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from tests.support.cluster import unique

pytestmark = pytest.mark.integration


def pod(name: str, labels: dict[str, str] | None = None, node: str | None = None) -> k8s.V1Pod:
    return k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name=name, labels=labels),
        spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="main", image="busybox:1.36")], node_name=node),
    )


def status_of(e: ApiException) -> dict[str, object]:
    body: dict[str, object] = json.loads(e.body)
    assert body["kind"] == "Status" and body["code"] == e.status
    return body


def test_pod_crud(api_client: k8s.ApiClient, namespace: str) -> None:
    core = k8s.CoreV1Api(api_client)
    created = core.create_namespaced_pod(namespace, pod("web", {"app": "web"}))
    assert created.metadata.uid and created.metadata.creation_timestamp is not None
    assert created.status.phase == "Pending" and created.spec.scheduler_name == "default-scheduler"
    got = core.read_namespaced_pod("web", namespace)
    assert got.metadata.resource_version == created.metadata.resource_version
    got.metadata.labels["tier"] = "front"
    updated = core.replace_namespaced_pod("web", namespace, got)
    assert int(updated.metadata.resource_version) > int(created.metadata.resource_version)
    patched = core.patch_namespaced_pod("web", namespace, {"metadata": {"annotations": {"a": "b"}}})
    assert patched.metadata.annotations == {"a": "b"} and patched.metadata.labels == {"app": "web", "tier": "front"}
    core.delete_namespaced_pod("web", namespace)
    with pytest.raises(ApiException) as e:
        core.read_namespaced_pod("web", namespace)
    assert e.value.status == 404 and status_of(e.value)["reason"] == "NotFound"


def test_stale_update_is_409(api_client: k8s.ApiClient, namespace: str) -> None:
    core = k8s.CoreV1Api(api_client)
    first = core.create_namespaced_config_map(
        namespace, k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="c"), data={"k": "1"})
    )
    core.patch_namespaced_config_map("c", namespace, {"data": {"k": "2"}})
    first.data = {"k": "3"}
    with pytest.raises(ApiException) as e:
        core.replace_namespaced_config_map("c", namespace, first)
    assert e.value.status == 409 and status_of(e.value)["reason"] == "Conflict"
    assert core.read_namespaced_config_map("c", namespace).data == {"k": "2"}


def test_generate_name_and_already_exists(api_client: k8s.ApiClient, namespace: str) -> None:
    core = k8s.CoreV1Api(api_client)
    made = core.create_namespaced_pod(
        namespace, k8s.V1Pod(metadata=k8s.V1ObjectMeta(generate_name="gen-"), spec=pod("x").spec)
    )
    assert made.metadata.name.startswith("gen-")
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod(namespace, pod(made.metadata.name))
    assert e.value.status == 409 and status_of(e.value)["reason"] == "AlreadyExists"


def test_label_and_field_selectors(api_client: k8s.ApiClient, namespace: str) -> None:
    core = k8s.CoreV1Api(api_client)
    for name, labels, node in [
        ("a", {"app": "web", "tier": "front"}, "n1"),
        ("b", {"app": "db"}, "n2"),
        ("c", {"app": "web"}, None),
    ]:
        core.create_namespaced_pod(namespace, pod(name, labels, node))

    def names(**kwargs: str) -> list[str]:
        return [p.metadata.name for p in core.list_namespaced_pod(namespace, **kwargs).items]

    assert names(label_selector="app=web") == ["a", "c"]
    assert names(label_selector="app!=web") == ["b"]
    assert names(label_selector="app in (db, cache)") == ["b"]
    assert names(label_selector="app notin (db)") == ["a", "c"]
    assert names(label_selector="tier") == ["a"]
    assert names(label_selector="!tier") == ["b", "c"]
    assert names(field_selector="spec.nodeName=n1") == ["a"]
    assert names(field_selector="spec.nodeName=") == ["c"]
    assert names(field_selector="metadata.name=b,status.phase=Pending") == ["b"]
    assert names(field_selector="spec.schedulerName=default-scheduler,metadata.namespace=" + namespace) == [
        "a",
        "b",
        "c",
    ]
    everywhere = core.list_pod_for_all_namespaces(field_selector=f"metadata.namespace={namespace}")
    assert len(everywhere.items) == 3
    for bad in ({"field_selector": "spec.bogus=x"}, {"label_selector": "app in (web"}):
        with pytest.raises(ApiException) as e:
            core.list_namespaced_pod(namespace, **bad)
        assert e.value.status == 400 and status_of(e.value)["reason"] == "BadRequest"


def test_paging_with_limit_and_continue(api_client: k8s.ApiClient, namespace: str) -> None:
    core = k8s.CoreV1Api(api_client)
    for i in range(7):
        core.create_namespaced_config_map(namespace, k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name=f"c{i}")))
    seen, token, versions = [], None, set()
    while True:
        page = core.list_namespaced_config_map(namespace, limit=3, _continue=token)
        seen += [c.metadata.name for c in page.items]
        versions.add(page.metadata.resource_version)
        token = page.metadata._continue
        if not token:
            break
        assert page.metadata.remaining_item_count is not None
    assert seen == [f"c{i}" for i in range(7)] and len(versions) == 1


def test_status_subresource_isolation(api_client: k8s.ApiClient, namespace: str) -> None:
    custom = k8s.CustomObjectsApi(api_client)
    group, version, plural = "scheduling.koordinator.sh", "v1alpha1", "podmigrationjobs"  # has /status
    job = {
        "apiVersion": f"{group}/{version}",
        "kind": "PodMigrationJob",
        "metadata": {"name": f"status-{namespace}"},
        "spec": {"podRef": {"namespace": namespace, "name": "p"}, "ttl": "1m"},
        "status": {"phase": "Failed"},
    }
    name = job["metadata"]["name"]
    created = custom.create_cluster_custom_object(group, version, plural, job)
    assert created["metadata"]["generation"] == 1
    created["status"] = {"phase": "Running"}
    created["spec"] = {**created["spec"], "ttl": "2m"}
    after_status = custom.replace_cluster_custom_object_status(group, version, plural, name, created)
    assert after_status["status"] == {"phase": "Running"} and after_status["spec"]["ttl"] == "1m"
    assert after_status["metadata"]["generation"] == 1
    after_spec = custom.patch_cluster_custom_object(
        group, version, plural, name, {"spec": {"ttl": "3m"}, "status": {"phase": "Failed"}}
    )
    assert after_spec["spec"]["ttl"] == "3m" and after_spec["status"] == {"phase": "Running"}
    assert after_spec["metadata"]["generation"] == 2
    custom.delete_cluster_custom_object(group, version, plural, name)
    # Without a status subresource (ElasticQuota, as Koordinator's CRD has it) status is the
    # object's: a write of the object keeps it, and counts as a change of the object.
    quota = {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota", "metadata": {"name": "q"}}
    custom.create_namespaced_custom_object("scheduling.sigs.k8s.io", "v1alpha1", namespace, "elasticquotas", quota)
    patched = custom.patch_namespaced_custom_object(
        "scheduling.sigs.k8s.io", "v1alpha1", namespace, "elasticquotas", "q", {"status": {"used": {"cpu": "7"}}}
    )
    assert patched["status"] == {"used": {"cpu": "7"}} and patched["metadata"]["generation"] == 2
    core = k8s.CoreV1Api(api_client)
    core.create_namespaced_pod(namespace, pod("p"))
    status = core.patch_namespaced_pod_status(
        "p", namespace, {"status": {"phase": "Running"}, "spec": {"nodeName": "sneaky"}}
    )
    assert status.status.phase == "Running" and status.spec.node_name is None


def test_binding_sets_the_node_once(api_client: k8s.ApiClient, namespace: str) -> None:
    core = k8s.CoreV1Api(api_client)
    core.create_namespaced_pod(namespace, pod("p"))
    binding = k8s.V1Binding(metadata=k8s.V1ObjectMeta(name="p"), target=k8s.V1ObjectReference(kind="Node", name="n1"))
    core.create_namespaced_pod_binding("p", namespace, binding, _preload_content=False)
    bound = core.read_namespaced_pod("p", namespace)
    assert bound.spec.node_name == "n1"
    assert [(c.type, c.status) for c in bound.status.conditions] == [("PodScheduled", "True")]
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod_binding("p", namespace, binding, _preload_content=False)
    assert e.value.status == 409 and "already assigned" in status_of(e.value)["message"]  # type: ignore[operator]
    core.create_namespaced_pod(namespace, pod("q"))
    other = k8s.V1Binding(metadata=k8s.V1ObjectMeta(name="q"), target=k8s.V1ObjectReference(kind="Node", name="n2"))
    core.create_namespaced_binding(namespace, other, _preload_content=False)
    assert core.read_namespaced_pod("q", namespace).spec.node_name == "n2"


def test_eviction_deletes_the_pod(api_client: k8s.ApiClient, namespace: str) -> None:
    core = k8s.CoreV1Api(api_client)
    core.create_namespaced_pod(namespace, pod("p"))
    eviction = k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name="p", namespace=namespace))
    core.create_namespaced_pod_eviction("p", namespace, eviction)
    with pytest.raises(ApiException) as e:
        core.read_namespaced_pod("p", namespace)
    assert e.value.status == 404


def test_finalizers_and_namespace_deletion(api_client: k8s.ApiClient) -> None:
    core = k8s.CoreV1Api(api_client)
    ns = unique("doomed")
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=ns)))
    core.create_namespaced_config_map(
        ns, k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="held", finalizers=["example.com/x"]))
    )
    core.create_namespaced_config_map(ns, k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="free")))
    core.delete_namespace(ns)
    assert core.read_namespace(ns).status.phase == "Terminating"
    held = core.read_namespaced_config_map("held", ns)
    assert held.metadata.deletion_timestamp is not None
    assert [c.metadata.name for c in core.list_namespaced_config_map(ns).items] == ["held"]
    core.patch_namespaced_config_map("held", ns, {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as e:
        core.read_namespace(ns)
    assert e.value.status == 404


def test_crd_lifecycle(api_client: k8s.ApiClient) -> None:
    ext = k8s.ApiextensionsV1Api(api_client)
    custom = k8s.CustomObjectsApi(api_client)
    group = f"{unique('g')}.example.com"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gadgets.{group}"},
        "spec": {
            "group": group,
            "names": {"plural": "gadgets", "kind": "Gadget"},
            "scope": "Cluster",
            "versions": [
                {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {"type": "object"}}}
            ],
        },
    }
    ext.create_custom_resource_definition(crd, _preload_content=False)
    custom.create_cluster_custom_object(
        group, "v1", "gadgets", {"apiVersion": f"{group}/v1", "kind": "Gadget", "metadata": {"name": "g1"}}
    )
    assert [g["metadata"]["name"] for g in custom.list_cluster_custom_object(group, "v1", "gadgets")["items"]] == ["g1"]
    ext.delete_custom_resource_definition(f"gadgets.{group}", _preload_content=False)
    with pytest.raises(ApiException) as e:
        custom.list_cluster_custom_object(group, "v1", "gadgets")
    assert e.value.status == 404


def test_events_and_leases(api_client: k8s.ApiClient, namespace: str) -> None:
    core = k8s.CoreV1Api(api_client)
    core.create_namespaced_event(
        namespace,
        k8s.CoreV1Event(
            metadata=k8s.V1ObjectMeta(name="e1"),
            involved_object=k8s.V1ObjectReference(kind="Pod", name="p", namespace=namespace),
            reason="Tested",
            message="m",
            type="Normal",
        ),
    )
    events = core.list_namespaced_event(
        namespace, field_selector="involvedObject.kind=Pod,involvedObject.name=p,reason=Tested"
    )
    assert [e.metadata.name for e in events.items] == ["e1"]
    leases = k8s.CoordinationV1Api(api_client)
    lease = leases.create_namespaced_lease(
        namespace,
        k8s.V1Lease(
            metadata=k8s.V1ObjectMeta(name="l"), spec=k8s.V1LeaseSpec(holder_identity="me", lease_duration_seconds=10)
        ),
    )
    assert lease.spec.holder_identity == "me"


def test_dry_run_persists_nothing(api_client: k8s.ApiClient, namespace: str) -> None:
    core = k8s.CoreV1Api(api_client)
    made = core.create_namespaced_pod(namespace, pod("dry"), dry_run="All")
    assert made.metadata.uid
    assert core.list_namespaced_pod(namespace).items == []
