"""The ReplicaSet controller's decisions (kubecontrollers.replicaset)."""

import random

from kubecontrollers.plan import Create, Delete, Patch
from kubecontrollers.replicaset import sync_replicaset
from tests.unit.kubecontrollers.objects import pod, replicaset

RS = ("ReplicaSet", "web", "uid-web")


def test_creates_the_missing_pods_from_the_template_with_a_controller_reference() -> None:
    plan = sync_replicaset(replicaset("web", 3), [pod("a", owned_by=RS)], now=0, rng=random.Random(1))
    created = [a for a in plan.actions if isinstance(a, Create)]
    assert len(created) == 2
    body = created[0].body
    assert body["metadata"]["name"].startswith("web-") and body["metadata"]["labels"] == {"app": "web"}
    told = created[0].note
    assert told is not None and (told.reason, told.message) == ("SuccessfulCreate", f"Created pod: {created[0].name}")
    assert (told.about.kind, told.about.name, told.about.uid) == ("ReplicaSet", "web", "uid-web")
    ref = body["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["uid"], ref["controller"], ref["blockOwnerDeletion"]) == (
        "ReplicaSet",
        "uid-web",
        True,
        True,
    )


def test_finished_and_deleting_pods_are_replaced() -> None:
    evicted = pod("b", owned_by=RS)
    evicted["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:01Z"
    pods = [pod("a", owned_by=RS), evicted, pod("c", owned_by=RS, phase="Failed")]
    plan = sync_replicaset(replicaset("web", 3), pods, now=0)
    assert sum(isinstance(a, Create) for a in plan.actions) == 2


def test_scale_down_removes_unready_pods_first() -> None:
    pods = [pod("a", owned_by=RS), pod("b", owned_by=RS, ready=False), pod("c", owned_by=RS)]
    plan = sync_replicaset(replicaset("web", 2), pods, now=0)
    assert [a.name for a in plan.actions if isinstance(a, Delete)] == ["b"]


def test_adopts_a_matching_orphan_and_leaves_other_pods_alone() -> None:
    pods = [pod("orphan"), pod("other", app="db"), pod("theirs", owned_by=("ReplicaSet", "x", "uid-x"))]
    plan = sync_replicaset(replicaset("web", 1), pods, now=0)
    patches = [a for a in plan.actions if isinstance(a, Patch) and not a.subresource]
    assert [p.name for p in patches] == ["orphan"]
    assert patches[0].patch["metadata"]["ownerReferences"][0]["uid"] == "uid-web"
    assert not any(isinstance(a, Create) for a in plan.actions)


def test_status_counts_ready_and_available_and_is_written_only_on_change() -> None:
    pods = [pod("a", owned_by=RS), pod("b", owned_by=RS, ready=False)]
    plan = sync_replicaset(replicaset("web", 2), pods, now=1e10)
    status = next(a for a in plan.actions if isinstance(a, Patch) and a.subresource == "status").patch["status"]
    assert (status["replicas"], status["readyReplicas"], status["availableReplicas"]) == (2, 1, 1)
    settled = replicaset("web", 2)
    settled["status"] = {k: v for k, v in status.items() if v is not None}
    assert sync_replicaset(settled, pods, now=1e10).actions == []
