"""The safety rules and the gates that ask them (descheduler.arbitration), over a filled cluster view."""

from __future__ import annotations

from typing import Any

from descheduler.arbitration import Arbiter, InFlight
from descheduler.arbitration.rules import check_namespace
from descheduler.arbitration.tokenbucket import TokenBucket
from descheduler.cluster import Cluster, WorkloadRef
from descheduler.settings import ArbitrationSettings

DEPLOY = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d1", "controller": True}
RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": "rs1", "controller": True}
WEB = WorkloadRef("Deployment", "ns", "web", "d1", "apps/v1")


def put(store: Any, obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    store.upsert(f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"], "1", obj)
    return obj


def pod(name: str, *, ready: bool = True, node: str = "n1", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "ownerReferences": [RS], "labels": labels or {"app": "web"}},
        "spec": {"nodeName": node},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def cluster(replicas: int = 3, max_unavailable: object = 1, *, ready: int = 3) -> Cluster:
    c = Cluster()
    put(c.replica_sets, {"metadata": {"name": "web-abc", "namespace": "ns", "ownerReferences": [DEPLOY]}})
    strategy = {"rollingUpdate": {"maxUnavailable": max_unavailable}}
    put(
        c.deployments,
        {"metadata": {"name": "web", "namespace": "ns"}, "spec": {"replicas": replicas, "strategy": strategy}},
    )
    for i in range(replicas):
        put(c.pods, pod(f"web-{i}", ready=i < ready))
    return c


def arbiter(**settings: Any) -> Arbiter:
    clock = [0.0]
    a = Arbiter(ArbitrationSettings(**{"exclude_namespaces": (), **settings}), clock=lambda: clock[0])
    a.clock = clock  # type: ignore[attr-defined]  # the test advances it
    return a


def test_a_replicasets_pod_answers_for_its_deployment() -> None:
    c = cluster()
    assert c.workload_of(pod("web-0")) == WEB
    assert len(c.pods_of(WEB)) == 3


def test_max_unavailable_one_allows_one_eviction_at_a_time() -> None:
    c, a = cluster(), arbiter(max_per_workload=0)
    assert a.admit("j0", pod("web-0"), c, []) is None
    first = InFlight("j0", "ns", "n1", WEB, "ns/web-0")
    refusal = a.admit("j1", pod("web-1"), c, [first])
    assert refusal is not None and refusal.rule == "workload-unavailable"
    assert "more than its maxUnavailable 1" in refusal.message
    assert refusal.reason == "RefusedWorkloadUnavailable"


def test_a_pod_not_ready_counts_as_unavailable() -> None:
    c = cluster(ready=2)
    refusal = arbiter(max_per_workload=0).admit("j", pod("web-0"), c, [])
    assert refusal is not None and refusal.rule == "workload-unavailable"
    # The unready pod itself may go: evicting it makes nothing worse.
    assert arbiter(max_per_workload=0).admit("j", pod("web-2", ready=False), c, []) is None


def test_default_max_unavailable_rounds_down_as_kubernetes_does() -> None:
    c = cluster(replicas=3, max_unavailable="25%")
    refusal = arbiter(max_per_workload=0).admit("j", pod("web-0"), c, [])
    assert refusal is not None and "maxUnavailable 0" in refusal.message


def test_caps_per_node_namespace_and_workload() -> None:
    c = cluster(replicas=10, max_unavailable=10)
    other = InFlight("j0", "ns", "n1", WEB, "")
    assert arbiter(max_per_node=1, max_per_workload=0).admit("j", pod("web-1"), c, [other]).rule == "node"  # type: ignore[union-attr]
    assert arbiter(max_per_namespace=1, max_per_workload=0).admit("j", pod("web-1"), c, [other]).rule == "namespace-cap"  # type: ignore[union-attr]
    assert arbiter(max_per_workload=1).admit("j", pod("web-1"), c, [other]).rule == "workload"  # type: ignore[union-attr]
    assert arbiter(max_per_workload=1).admit("j0", pod("web-1"), c, [other]) is None  # itself does not count


def test_a_budget_without_room_refuses() -> None:
    c = cluster(replicas=10, max_unavailable=10)
    pdb = {
        "metadata": {"name": "web", "namespace": "ns"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": 0},
    }
    put(c.pdbs, pdb)
    refusal = arbiter().admit("j", pod("web-1"), c, [])
    assert refusal is not None and refusal.rule == "pdb"
    pdb["status"]["disruptionsAllowed"] = 1
    put(c.pdbs, pdb)
    assert arbiter().admit("j", pod("web-1"), c, []) is None


def test_namespace_include_and_exclude() -> None:
    assert check_namespace("a", include=(), exclude=("a",)) is not None
    assert check_namespace("b", include=("a",), exclude=()) is not None
    assert check_namespace("a", include=("a",), exclude=()) is None


def test_the_rate_limit_is_a_token_bucket_spent_only_by_evictions() -> None:
    c = cluster(replicas=10, max_unavailable=10)
    a = arbiter(eviction_qps=0.5, eviction_burst=2)
    for _ in range(2):
        assert a.may_evict("j", pod("web-1"), c, []) is None
        a.evicted()
    refusal = a.may_evict("j", pod("web-1"), c, [])
    assert refusal is not None and refusal.rule == "rate" and "next eviction in 2.0s" in refusal.message
    assert a.may_evict("j", pod("web-1"), c, []) is not None  # asking spends nothing
    a.clock[0] = 2.0  # type: ignore[attr-defined]
    assert a.may_evict("j", pod("web-1"), c, []) is None


def test_token_bucket_refills_up_to_its_burst() -> None:
    now = [0.0]
    bucket = TokenBucket(1.0, 2, clock=lambda: now[0])
    bucket.take()
    bucket.take()
    assert bucket.wait_seconds() == 1.0
    now[0] = 100.0
    bucket.take()
    bucket.take()
    assert bucket.wait_seconds() > 0


def test_a_held_eviction_still_counts_as_about_to_go() -> None:
    """A running job whose eviction a rule holds back (Eviction False) will still evict its pod."""
    c = cluster(max_unavailable=1)
    held = InFlight("j0", "ns", "n1", WEB, "ns/web-0")
    refusal = arbiter(max_per_workload=0).may_evict("j1", pod("web-1"), c, [held])
    assert refusal is not None and refusal.rule == "workload-unavailable"


def test_a_statefulsets_max_unavailable_defaults_to_one() -> None:
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "s1", "controller": True}
    c = Cluster()
    put(c.stateful_sets, {"metadata": {"name": "db", "namespace": "ns"}, "spec": {"replicas": 3}})
    for i in range(3):
        p = pod(f"db-{i}")
        p["metadata"]["ownerReferences"] = [sts]
        put(c.pods, p)
    first, second = c.pods.get("ns/db-0"), c.pods.get("ns/db-1")
    assert first is not None and second is not None
    a = arbiter(max_per_workload=0)
    assert a.admit("j0", first, c, []) is None
    workload = c.workload_of(first)
    refusal = a.admit("j1", second, c, [InFlight("j0", "ns", "n1", workload, "ns/db-0")])
    assert refusal is not None and "StatefulSet ns/db" in refusal.message
