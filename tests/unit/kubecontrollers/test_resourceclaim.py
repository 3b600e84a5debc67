"""The resourceclaim controller's decisions: claims made from pods' templates (once, found again
after a crash, replaced when not the pod's), consumers released and claims deallocated, generated
claims of pods that will not run deleted, and the garbage collector deleting a gone pod's claims."""

from __future__ import annotations

import random
from typing import Any

from apis.dra.names import DELETE_PROTECTION_FINALIZER, POD_CLAIM_NAME_ANNOTATION
from kube.resources import STRATEGIC_MERGE_PATCH
from kubecontrollers import resourceclaim
from kubecontrollers.garbagecollector import collect_dependent
from kubecontrollers.kinds import PODS, RESOURCE_CLAIMS
from kubecontrollers.plan import Create, Delete, Obj, Patch
from tests.unit.kubecontrollers.objects import meta

ALLOCATION = {"devices": {"results": [{"request": "gpu", "driver": "gpu.tessera.dev", "pool": "n1", "device": "g0"}]}}


def template(name: str = "one-gpu") -> dict[str, Any]:
    return {
        "metadata": meta(name, f"uid-{name}"),
        "spec": {
            "metadata": {"labels": {"team": "ml"}, "annotations": {"note": "x"}},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.tessera.dev"}}]}},
        },
    }


def pod(
    name: str = "trainer", *, node: str = "", phase: str = "Pending", statuses: Any = None, **extra: Any
) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if statuses is not None:
        status["resourceClaimStatuses"] = statuses
    spec: dict[str, Any] = {
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
    }
    if node:
        spec["nodeName"] = node
    return {"metadata": meta(name, f"uid-{name}", **extra), "spec": spec, "status": status}


def claim(
    name: str,
    *,
    owner: str | None = "trainer",
    pod_claim: str = "gpu",
    reserved: tuple[str, ...] = (),
    allocated: bool = False,
    finalizers: tuple[str, ...] = (),
    **extra: Any,
) -> dict[str, Any]:
    m = meta(name, f"uid-{name}", annotations={POD_CLAIM_NAME_ANNOTATION: pod_claim}, **extra)
    if owner is not None:
        m["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": owner, "uid": f"uid-{owner}", "controller": True}
        ]
    if finalizers:
        m["finalizers"] = list(finalizers)
    status: dict[str, Any] = {}
    if allocated:
        status["allocation"] = ALLOCATION
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "name": p, "uid": f"uid-{p}"} for p in reserved]
    return {"metadata": m, "spec": template()["spec"]["spec"], "status": status}


def pods(*known: Obj) -> resourceclaim.Pods:
    by_name = {p["metadata"]["name"]: p for p in known}
    return lambda name, uid: by_name.get(name)


# --- a pod's claims ------------------------------------------------------------------------------


def test_a_template_reference_gets_a_claim_owned_by_the_pod_and_recorded_in_its_status() -> None:
    plan = resourceclaim.sync_pod(pod(), {}, {"one-gpu": template()}, rng=random.Random(1))
    create, record = plan.actions
    assert isinstance(create, Create) and create.resource == RESOURCE_CLAIMS
    body = create.body
    assert (
        body["metadata"]["name"].startswith("trainer-gpu-") and len(body["metadata"]["name"]) == len("trainer-gpu-") + 5
    )
    assert body["metadata"]["annotations"] == {"note": "x", POD_CLAIM_NAME_ANNOTATION: "gpu"}
    assert body["metadata"]["labels"] == {"team": "ml"}
    assert body["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "trainer",
            "uid": "uid-trainer",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert body["spec"] == template()["spec"]["spec"]
    assert isinstance(record, Patch) and record.resource == PODS and record.subresource == "status"
    assert record.patch == {
        "metadata": {"resourceVersion": "1"},
        "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": body["metadata"]["name"]}]},
    }


def test_a_claim_made_before_a_crash_is_found_again_not_made_twice() -> None:
    made = claim("trainer-gpu-abcde")
    plan = resourceclaim.sync_pod(pod(), {"trainer-gpu-abcde": made}, {"one-gpu": template()})
    (record,) = plan.actions
    assert isinstance(record, Patch)
    assert record.patch["status"] == {
        "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "trainer-gpu-abcde"}]
    }


def test_nothing_to_do_once_the_claim_is_recorded() -> None:
    recorded = pod(statuses=[{"name": "gpu", "resourceClaimName": "trainer-gpu-abcde"}])
    assert resourceclaim.sync_pod(recorded, {"trainer-gpu-abcde": claim("trainer-gpu-abcde")}, {}).actions == []


def test_a_recorded_claim_that_is_not_the_pods_is_replaced() -> None:
    recorded = pod(statuses=[{"name": "gpu", "resourceClaimName": "trainer-gpu-abcde"}])
    foreign = claim("trainer-gpu-abcde", owner="someone-else")
    create, record = resourceclaim.sync_pod(recorded, {"trainer-gpu-abcde": foreign}, {"one-gpu": template()}).actions
    assert isinstance(create, Create) and create.name != "trainer-gpu-abcde"
    assert isinstance(record, Patch)
    assert record.patch["status"]["resourceClaimStatuses"] == [{"name": "gpu", "resourceClaimName": create.name}]


def test_a_missing_template_is_a_warning_on_the_pod_and_a_later_look() -> None:
    plan = resourceclaim.sync_pod(pod(), {}, {})
    assert plan.actions == []
    (told,) = plan.notes
    assert (told.type, told.reason, told.about.name) == ("Warning", "FailedResourceClaimCreation", "trainer")
    assert 'resource claim template "one-gpu"' in told.message
    assert plan.requeue_after == resourceclaim.TEMPLATE_RETRY_S


def test_pods_being_deleted_or_done_get_no_claim() -> None:
    for gone in (pod(deletionTimestamp="2024-01-01T00:00:00Z"), pod(phase="Succeeded"), pod(phase="Failed")):
        assert resourceclaim.sync_pod(gone, {}, {"one-gpu": template()}).actions == []


def test_a_bound_pod_is_added_to_its_allocated_claims_consumers() -> None:
    bound = pod(node="n1", statuses=[{"name": "gpu", "resourceClaimName": "c"}])
    (reserve,) = resourceclaim.sync_pod(bound, {"c": claim("c", allocated=True)}, {}).actions
    assert isinstance(reserve, Patch) and reserve.subresource == "status"
    assert reserve.patch["status"]["reservedFor"] == [{"resource": "pods", "name": "trainer", "uid": "uid-trainer"}]
    already = claim("c", allocated=True, reserved=("trainer",))
    assert resourceclaim.sync_pod(bound, {"c": already}, {}).actions == []
    assert resourceclaim.sync_pod(bound, {"c": claim("c")}, {}).actions == [], "an unallocated claim is the scheduler's"


def test_long_names_are_cut_in_proportion_as_kube_cuts_them() -> None:
    name = resourceclaim.generated_name("p" * 60, "c" * 30, random.Random(0))
    assert len(name) <= 63
    pod_part, claim_part = name[:-5].split("-")
    assert (len(pod_part), len(claim_part)) == (60 * 57 // 92, 30 * 57 // 92)


# --- a claim's consumers -------------------------------------------------------------------------


def test_a_gone_consumer_is_released_and_the_claim_deallocated_and_unprotected() -> None:
    held = claim("c", allocated=True, reserved=("trainer",), finalizers=(DELETE_PROTECTION_FINALIZER, "other"))
    status, unprotect = resourceclaim.sync_claim(held, pods()).actions
    assert isinstance(status, Patch) and status.subresource == "status"
    assert status.patch == {"metadata": {"resourceVersion": "1"}, "status": {"reservedFor": None, "allocation": None}}
    assert isinstance(unprotect, Patch) and unprotect.patch_type == STRATEGIC_MERGE_PATCH
    assert unprotect.patch == {"metadata": {"$deleteFromPrimitiveList/finalizers": [DELETE_PROTECTION_FINALIZER]}}


def test_consumers_still_running_are_kept_and_the_allocation_stays() -> None:
    shared = claim("c", owner=None, allocated=True, reserved=("a", "b"))
    running_a = pod("a", node="n1", phase="Running")
    (status,) = resourceclaim.sync_claim(shared, pods(running_a)).actions
    assert isinstance(status, Patch)
    assert status.patch["status"] == {"reservedFor": [{"resource": "pods", "name": "a", "uid": "uid-a"}]}
    both = pods(running_a, pod("b", node="n1", phase="Running"))
    assert resourceclaim.sync_claim(shared, both).actions == []


def test_a_done_or_replaced_consumer_is_released() -> None:
    held = claim("c", owner=None, allocated=True, reserved=("trainer",))
    for stale in (pod(node="n1", phase="Succeeded"), {**pod(node="n1"), "metadata": meta("trainer", "uid-new")}):
        (status,) = resourceclaim.sync_claim(held, pods(stale)).actions
        assert isinstance(status, Patch) and status.patch["status"]["allocation"] is None


def test_a_claim_being_deleted_is_deallocated_and_let_go() -> None:
    deleting = claim(
        "c",
        owner=None,
        allocated=True,
        finalizers=(DELETE_PROTECTION_FINALIZER,),
        deletionTimestamp="2024-01-01T00:00:00Z",
    )
    status, unprotect = resourceclaim.sync_claim(deleting, pods()).actions
    assert isinstance(status, Patch) and status.patch["status"] == {"allocation": None}
    assert isinstance(unprotect, Patch) and unprotect.patch_type == STRATEGIC_MERGE_PATCH


def test_the_finalizer_of_a_claim_not_being_deallocated_is_left_alone() -> None:
    # The scheduler puts the finalizer on just before the allocation: lifting it in between
    # would leave an allocated claim unprotected.
    about_to_be_allocated = claim("c", finalizers=(DELETE_PROTECTION_FINALIZER,))
    assert resourceclaim.sync_claim(about_to_be_allocated, pods(pod())).actions == []


def test_a_generated_claim_of_a_pod_that_will_not_run_is_deleted() -> None:
    done = pod(node="n1", phase="Succeeded")
    (delete,) = resourceclaim.sync_claim(claim("c"), pods(done)).actions
    assert isinstance(delete, Delete) and (delete.name, delete.uid) == ("c", "uid-c")
    assert resourceclaim.sync_claim(claim("c"), pods(pod(node="n1", phase="Running"))).actions == []
    assert resourceclaim.sync_claim(claim("c"), pods()).actions == [], "a gone pod's claims are the collector's"


def test_the_garbage_collector_deletes_the_claims_of_a_gone_pod_after_asking_the_server() -> None:
    (delete,) = collect_dependent(RESOURCE_CLAIMS, claim("c"), lambda kind, key: None).actions
    assert isinstance(delete, Delete) and delete.resource == RESOURCE_CLAIMS
    assert delete.unless_owners == ((PODS, "trainer", "uid-trainer"),)
    alive = pod()
    assert collect_dependent(RESOURCE_CLAIMS, claim("c"), lambda kind, key: alive).actions == []


def test_claim_names_are_those_the_pod_uses() -> None:
    named = pod(statuses=[{"name": "gpu", "resourceClaimName": "g"}])
    named["spec"]["resourceClaims"].append({"name": "nic", "resourceClaimName": "shared-nic"})
    assert resourceclaim.claim_names(named) == ["g", "shared-nic"]
    assert resourceclaim.claim_names(pod()) == []
