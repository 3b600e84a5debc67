"""The StatefulSet controller and the garbage collector (kubecontrollers.statefulset, .garbagecollector)."""

from typing import Any

from kubecontrollers.garbagecollector import Owners, collect_dependent, collect_owner
from kubecontrollers.kinds import PODS, REPLICA_SETS
from kubecontrollers.plan import Create, Delete, Patch
from kubecontrollers.statefulset import sync_statefulset
from tests.unit.kubecontrollers.objects import TEMPLATE, meta, pod, replicaset

S = ("StatefulSet", "db", "uid-db")


def statefulset(replicas: int, policy: str = "OrderedReady") -> dict[str, Any]:
    return {
        "metadata": meta("db", "uid-db"),
        "spec": {"replicas": replicas, "podManagementPolicy": policy, "template": TEMPLATE},
        "status": {},
    }


def created(actions: list[Any]) -> list[str]:
    return [a.name for a in actions if isinstance(a, Create)]


def test_ordered_ready_creates_one_ordinal_after_the_other() -> None:
    assert created(sync_statefulset(statefulset(3), []).actions) == ["db-0"]
    assert created(sync_statefulset(statefulset(3), [pod("db-0", owned_by=S, ready=False)]).actions) == []
    assert created(sync_statefulset(statefulset(3), [pod("db-0", owned_by=S)]).actions) == ["db-1"]
    assert created(sync_statefulset(statefulset(3, "Parallel"), []).actions) == ["db-0", "db-1", "db-2"]
    body = next(a for a in sync_statefulset(statefulset(1), []).actions if isinstance(a, Create)).body
    assert body["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] == "db-0"


def test_scale_down_removes_the_highest_ordinal_first() -> None:
    pods = [pod(f"db-{i}", owned_by=S) for i in range(3)]
    plan = sync_statefulset(statefulset(1), pods)
    assert [a.name for a in plan.actions if isinstance(a, Delete)] == ["db-2"]


def owners(*objects: dict[str, Any]) -> Owners:
    """A cache of ReplicaSets, as the collector looks owners up."""
    cached = {("ReplicaSet", f"ns/{o['metadata']['name']}"): o for o in objects}
    return lambda kind, key: cached.get((kind, key))


def test_background_deletes_dependents_of_a_gone_owner_after_checking_the_server() -> None:
    orphaned = pod("p", owned_by=("ReplicaSet", "gone", "uid-gone"))
    plan = collect_dependent(PODS, orphaned, owners())
    delete = plan.actions[0]
    assert isinstance(delete, Delete) and delete.name == "p"
    assert delete.unless_owners == ((REPLICA_SETS, "gone", "uid-gone"),)
    alive = replicaset("web", 1)
    assert collect_dependent(PODS, pod("q", owned_by=("ReplicaSet", "web", "uid-web")), owners(alive)).actions == []


def test_foreground_deletes_dependents_then_lifts_the_finalizer() -> None:
    rs = replicaset("web", 1, deletionTimestamp="2024-01-01T00:00:01Z", finalizers=["foregroundDeletion"])
    dependent = (PODS, pod("q", owned_by=("ReplicaSet", "web", "uid-web")))
    plan = collect_owner("ReplicaSet", rs, [dependent], owners(rs))
    assert [(type(a).__name__, a.name) for a in plan.actions] == [("Delete", "q")]
    lift = collect_owner("ReplicaSet", rs, [], owners(rs)).actions[0]
    assert isinstance(lift, Patch) and lift.patch["metadata"]["finalizers"] == []


def test_orphan_removes_the_owner_reference_then_the_finalizer() -> None:
    rs = replicaset("web", 1, deletionTimestamp="2024-01-01T00:00:01Z", finalizers=["orphan"])
    dependent = pod("q", owned_by=("ReplicaSet", "web", "uid-web"))
    patch = collect_dependent(PODS, dependent, owners(rs)).actions[0]
    assert isinstance(patch, Patch) and patch.name == "q" and patch.patch["metadata"]["ownerReferences"] is None
    assert not collect_owner("ReplicaSet", replicaset("web", 1), [(PODS, dependent)], owners(rs)).actions
