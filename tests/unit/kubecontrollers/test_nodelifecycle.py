"""The node lifecycle controller's pure decisions: heartbeats, marking, taints, zones, eviction."""

from __future__ import annotations

import datetime
from typing import Any

from apis.k8s.core import Taint, Toleration
from kube.resources import NODES
from kubecontrollers.kinds import PODS
from kubecontrollers.nodelifecycle import Probe, ZoneState, eviction_time, observe, sync_nodes, zone_state
from kubecontrollers.plan import Delete, Patch, Plan
from tests.support.builders import make_node, make_pod
from tests.support.scheduling import make_scheduler

GRACE = 40.0
UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY = "node.kubernetes.io/not-ready"


def stamp(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node(name: str, ready: str = "True", taints: list[dict[str, Any]] | None = None, beat: str = "b") -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": ready, "lastHeartbeatTime": beat}]
    spec = {"taints": taints} if taints is not None else {}
    return {"metadata": {"name": name, "resourceVersion": "7"}, "spec": spec, "status": {"conditions": conditions}}


def pod(name: str, *, ready: str = "True", tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {"nodeName": "n1", "tolerations": tolerations or []},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": ready}]},
    }


def toleration(key: str, seconds: float | None) -> dict[str, Any]:
    t: dict[str, Any] = {"key": key, "operator": "Exists", "effect": "NoExecute"}
    if seconds is not None:
        t["tolerationSeconds"] = seconds
    return t


def sync(nodes: list[dict[str, Any]], pods: dict[str, list[dict[str, Any]]], *, seen_at: float, now: float) -> Plan:
    probes = {str(n["metadata"]["name"]): Probe(("r", "b"), seen_at) for n in nodes}
    return sync_nodes(nodes, pods, probes, now=now, reachable_since=0.0, grace_s=GRACE, wall=1000.0)


def patches(plan: Plan, resource: Any = NODES, subresource: str = "") -> list[Patch]:
    return [a for a in plan.actions if isinstance(a, Patch) and a.resource == resource and a.subresource == subresource]


# --- heartbeats --------------------------------------------------------------------------------------


def test_a_changed_lease_or_ready_heartbeat_is_fresh_and_an_unchanged_one_keeps_its_time() -> None:
    n = node("n1", beat="b1")
    lease = {"spec": {"renewTime": "r1"}}
    first = observe({}, [n], {"n1": lease}, now=5.0)
    assert first == {"n1": Probe(("r1", "b1"), 5.0)}
    assert observe(first, [n], {"n1": lease}, now=9.0)["n1"].seen_at == 5.0
    assert observe(first, [n], {"n1": {"spec": {"renewTime": "r2"}}}, now=9.0)["n1"].seen_at == 9.0
    assert observe(first, [node("n1", beat="b2")], {"n1": lease}, now=9.0)["n1"].seen_at == 9.0


def test_a_healthy_node_is_left_alone_and_looked_at_again_when_its_grace_runs_out() -> None:
    plan = sync([node("n1"), node("n2"), node("n3")], {"n1": [pod("p")]}, seen_at=100.0, now=110.0)
    assert plan.actions == []
    assert plan.requeue_after is not None and 30.0 <= plan.requeue_after <= 30.1


# --- marking and taints ------------------------------------------------------------------------------


def test_a_silent_node_is_marked_unknown_tainted_unreachable_and_its_pods_not_ready() -> None:
    nodes = [node("n1"), node("n2"), node("n3")]
    plan = sync_nodes(
        nodes,
        {"n1": [pod("p", tolerations=[toleration(UNREACHABLE, 300)])]},
        {"n1": Probe(("r", "b"), 0.0), "n2": Probe(("r", "b"), GRACE), "n3": Probe(("r", "b"), GRACE)},
        now=GRACE + 1,
        reachable_since=0.0,
        grace_s=GRACE,
        wall=1000.0,
    )
    writes = [(a.name, a.subresource) for a in plan.actions if isinstance(a, Patch) and a.resource == NODES]
    assert writes == [("n1", ""), ("n1", "status")]  # the taints first: the status write changes the rv
    [status] = patches(plan, subresource="status")
    assert status.name == "n1" and status.note is not None and status.note.reason == "NodeNotReady"
    ready = status.patch["status"]["conditions"][0]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "Unknown", "NodeStatusUnknown")
    [taints] = patches(plan)
    assert taints.patch["metadata"]["resourceVersion"] == "7"
    got = {(t["key"], t["effect"]) for t in taints.patch["spec"]["taints"]}
    assert got == {(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")}
    assert all("timeAdded" in t for t in taints.patch["spec"]["taints"] if t["effect"] == "NoExecute")
    [not_ready] = patches(plan, PODS, "status")
    assert not_ready.patch["status"]["conditions"][0] == {
        "type": "Ready",
        "status": "False",
        "lastTransitionTime": not_ready.patch["status"]["conditions"][0]["lastTransitionTime"],
    }
    assert not any(isinstance(a, Delete) for a in plan.actions)  # tolerated for 300 s


def test_ready_false_taints_not_ready_and_ready_true_clears_only_the_lifecycle_taints() -> None:
    other = {"key": "gpu", "value": "x", "effect": "NoSchedule"}
    plan = sync([node("n1", ready="False"), node("n2"), node("n3")], {}, seen_at=100.0, now=110.0)
    [taints] = patches(plan)
    assert {t["key"] for t in taints.patch["spec"]["taints"]} == {NOT_READY}
    old = [other, {"key": UNREACHABLE, "effect": "NoSchedule"}, {"key": UNREACHABLE, "effect": "NoExecute"}]
    plan = sync([node("n1", taints=old), node("n2"), node("n3")], {}, seen_at=100.0, now=110.0)
    [cleared] = patches(plan)
    assert cleared.patch["spec"]["taints"] == [other]
    plan = sync([node("n1", taints=[{"key": UNREACHABLE, "effect": "NoSchedule"}])], {}, seen_at=100.0, now=110.0)
    assert patches(plan)[0].patch["spec"]["taints"] is None  # none left: the field goes


def test_a_tainted_node_that_stays_unknown_is_written_nothing_more() -> None:
    since = stamp(900.0)
    taints = [
        {"key": UNREACHABLE, "effect": "NoSchedule"},
        {"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": since},
    ]
    nodes = [node("n1", ready="Unknown", taints=taints), node("n2"), node("n3")]
    probes = {"n1": Probe(("r", "b"), 0.0), "n2": Probe(("r", "b"), 100.0), "n3": Probe(("r", "b"), 100.0)}
    plan = sync_nodes(nodes, {}, probes, now=110.0, reachable_since=0.0, grace_s=GRACE, wall=1000.0)
    assert plan.actions == []


def test_time_the_api_server_was_unreachable_does_not_count() -> None:
    probes = {"n1": Probe(("r", "b"), 0.0)}
    plan = sync_nodes([node("n1")], {}, probes, now=GRACE + 5, reachable_since=10.0, grace_s=GRACE, wall=1000.0)
    assert plan.actions == []


# --- zones -------------------------------------------------------------------------------------------


def test_zone_states_as_upstream() -> None:
    assert zone_state(["True", "Unknown"]) is ZoneState.NORMAL
    assert zone_state(["Unknown", "Unknown"]) is ZoneState.FULL_DISRUPTION
    assert zone_state(["True", "Unknown", "Unknown"]) is ZoneState.NORMAL  # at most 2 unhealthy
    assert zone_state(["True", "False", "Unknown", "Unknown"]) is ZoneState.PARTIAL_DISRUPTION
    assert zone_state(["True", None, "Unknown", "Unknown", "True", "True"]) is ZoneState.NORMAL


def test_in_a_full_disruption_nodes_get_noschedule_but_no_noexecute_and_nothing_is_evicted() -> None:
    plan = sync([node("n1"), node("n2")], {"n1": [pod("p")]}, seen_at=0.0, now=GRACE + 1)
    for write in patches(plan):
        assert {t["effect"] for t in write.patch["spec"]["taints"]} == {"NoSchedule"}
    assert not any(isinstance(a, Delete) for a in plan.actions)


def test_nodes_of_another_zone_are_judged_apart() -> None:
    lost = node("n1")
    lost["metadata"]["labels"] = {"topology.kubernetes.io/zone": "b"}
    probes = {"n1": Probe(("r", "b"), 0.0), "n2": Probe(("r", "b"), GRACE)}
    plan = sync_nodes([lost, node("n2")], {}, probes, now=GRACE + 1, reachable_since=0.0, grace_s=GRACE, wall=1.0)
    [taints] = patches(plan)
    assert {t["effect"] for t in taints.patch["spec"]["taints"]} == {"NoSchedule"}  # zone b: all of it lost


# --- eviction ----------------------------------------------------------------------------------------


def test_eviction_time_follows_the_tolerations() -> None:
    taint = {"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": stamp(900.0)}
    assert eviction_time(pod("p"), [taint], now=1000.0) == 1000.0  # not tolerated: at once
    assert eviction_time(pod("p", tolerations=[toleration(UNREACHABLE, 300)]), [taint], now=1000.0) == 1200.0
    assert eviction_time(pod("p", tolerations=[toleration(UNREACHABLE, None)]), [taint], now=1000.0) is None
    both = [toleration(UNREACHABLE, 300), {"operator": "Exists", "tolerationSeconds": 30}]
    assert eviction_time(pod("p", tolerations=both), [taint], now=1000.0) == 930.0  # the smallest used
    assert eviction_time(pod("p", tolerations=[toleration(UNREACHABLE, 0)]), [taint], now=1000.0) == 1000.0
    assert eviction_time(pod("p"), [], now=1000.0) is None


def test_pods_are_evicted_once_their_toleration_ran_out_and_looked_at_again_before() -> None:
    taints = [
        {"key": UNREACHABLE, "effect": "NoSchedule"},
        {"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": stamp(900.0)},
    ]
    nodes = [node("n1", ready="Unknown", taints=taints), node("n2"), node("n3")]
    done = {"metadata": {"name": "done", "namespace": "ns", "uid": "u"}, "status": {"phase": "Succeeded"}}
    going = pod("going")
    going["metadata"]["deletionTimestamp"] = stamp(950.0)
    on_n1 = [
        pod("late", ready="False", tolerations=[toleration(UNREACHABLE, 50)]),
        pod("later", ready="False", tolerations=[toleration(UNREACHABLE, 300)]),
        done,
        going,
    ]
    probes = {"n1": Probe(("r", "b"), 0.0), "n2": Probe(("r", "b"), 100.0), "n3": Probe(("r", "b"), 100.0)}
    plan = sync_nodes(nodes, {"n1": on_n1}, probes, now=110.0, reachable_since=0.0, grace_s=GRACE, wall=1000.0)
    deletes = [a for a in plan.actions if isinstance(a, Delete)]
    assert [(d.name, d.uid) for d in deletes] == [("late", "uid-late")]
    assert deletes[0].note is not None and deletes[0].note.reason == "TaintManagerEviction"
    assert plan.requeue_after is not None and plan.requeue_after <= 30.01  # n2's grace; "later" at 1200


# --- what the scheduler makes of it --------------------------------------------------------------------


def test_the_scheduler_places_nothing_on_a_node_with_the_taints_written_for_a_lost_node() -> None:
    """TaintToleration with the taints as this controller writes them: a pod that tolerates the
    NoExecute taint for a while (the soak's, the API server's 300 s) still may not go there."""
    plan = sync_nodes(
        [node("lost"), node("ok"), node("n3")],
        {},
        {"lost": Probe(("r", "b"), 0.0), "ok": Probe(("r", "b"), GRACE), "n3": Probe(("r", "b"), GRACE)},
        now=GRACE + 1,
        reachable_since=0.0,
        grace_s=GRACE,
        wall=1000.0,
    )
    [write] = patches(plan)
    taints = [Taint.from_dict(t, "spec.taints") for t in write.patch["spec"]["taints"]]
    scheduler = make_scheduler(make_node("lost", taints=taints))
    tolerant = make_pod("p", tolerations=[Toleration(UNREACHABLE, "Exists", "", "NoExecute")])
    outcome = scheduler.schedule_one(tolerant)
    assert outcome.node is None and "untolerated taint" in outcome.status.message
    healthy, device = make_node("ok")
    scheduler.cache.add_node(healthy)
    scheduler.cache.add_device(device)
    assert scheduler.schedule_one(tolerant).node == "ok"
