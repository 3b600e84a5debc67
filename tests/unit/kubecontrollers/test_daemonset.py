"""The DaemonSet controller's decisions (kubecontrollers.daemonset)."""

from typing import Any

from kubecontrollers.daemonset import sync_daemonset, target_node
from kubecontrollers.plan import Create, Delete, Patch, safe_hash
from tests.unit.kubecontrollers.objects import meta, pod

D = ("DaemonSet", "agent", "uid-d")
TEMPLATE = {"metadata": {"labels": {"app": "agent"}}, "spec": {"containers": [{"name": "m", "image": "x"}]}}
REVISION = safe_hash(TEMPLATE)


def daemonset(template: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": meta("agent", "uid-d"),
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": template or TEMPLATE, **spec},
        "status": {},
    }


def node(
    name: str, *, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {"taints": taints or []}, "status": {}}


def daemon_pod(name: str, on: str, *, revision: str = REVISION, ready: bool = True, phase: str = "Running") -> Any:
    p = pod(name, owned_by=D, ready=ready, phase=phase, app="agent", **{"controller-revision-hash": revision})
    p["spec"]["nodeName"] = on
    return p


def creates(plan: Any) -> dict[str, dict[str, Any]]:
    """Node name -> the pod created for it."""
    return {target_node(a.body): a.body for a in plan.actions if isinstance(a, Create)}


def deletes(plan: Any) -> list[str]:
    return sorted(a.name for a in plan.actions if isinstance(a, Delete))


def status_of(plan: Any) -> dict[str, Any]:
    patch: dict[str, Any] = next(a for a in plan.actions if isinstance(a, Patch)).patch["status"]
    return patch


def test_one_pod_per_node_pinned_by_affinity_with_the_daemon_tolerations() -> None:
    plan = sync_daemonset(daemonset(), [node("n1"), node("n2"), node("n3")], [daemon_pod("a", "n2")])
    made = creates(plan)
    assert sorted(made) == ["n1", "n3"]
    body = made["n1"]
    terms = body["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
    }
    assert body["metadata"]["labels"] == {
        "app": "agent",
        "controller-revision-hash": REVISION,
        "pod-template-generation": "1",
    }
    assert body["metadata"]["name"].startswith("agent-")
    tolerated = {(t["key"], t["effect"]) for t in body["spec"]["tolerations"]}
    assert ("node.kubernetes.io/unreachable", "NoExecute") in tolerated
    assert ("node.kubernetes.io/unschedulable", "NoSchedule") in tolerated
    status = status_of(plan)
    assert (status["desiredNumberScheduled"], status["currentNumberScheduled"], status["numberReady"]) == (3, 1, 1)


def test_node_selector_affinity_and_taints_choose_the_nodes() -> None:
    template = {
        "metadata": TEMPLATE["metadata"],
        "spec": {
            **TEMPLATE["spec"],
            "nodeSelector": {"gpu": "true"},
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                        ]
                    }
                }
            },
        },
    }
    nodes = [
        node("gpu-a", labels={"gpu": "true", "zone": "a"}),
        node("gpu-b", labels={"gpu": "true", "zone": "b"}),
        node("cpu-a", labels={"zone": "a"}),
        node("tainted", labels={"gpu": "true", "zone": "a"}, taints=[{"key": "dedicated", "effect": "NoSchedule"}]),
        node(
            "cordoned",
            labels={"gpu": "true", "zone": "a"},
            taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}],
        ),
    ]
    assert sorted(creates(sync_daemonset(daemonset(template), nodes, []))) == ["cordoned", "gpu-a"]


def test_a_pod_on_a_node_it_no_longer_tolerates_goes_and_duplicates_and_failed_pods_go() -> None:
    nodes = [node("n1", taints=[{"key": "evict", "effect": "NoExecute"}]), node("n2"), node("n3")]
    pods = [
        daemon_pod("on-n1", "n1"),
        daemon_pod("first", "n2"),
        daemon_pod("second", "n2"),
        daemon_pod("broken", "n3", phase="Failed"),
    ]
    pods[2]["metadata"]["creationTimestamp"] = "2024-01-02T00:00:00Z"
    plan = sync_daemonset(daemonset(), nodes, pods)
    assert deletes(plan) == ["broken", "on-n1", "second"]
    assert sorted(creates(plan)) == ["n3"]


def test_a_node_noschedule_taint_added_later_keeps_the_running_pod_as_misscheduled() -> None:
    nodes = [node("n1", taints=[{"key": "dedicated", "effect": "NoSchedule"}])]
    plan = sync_daemonset(daemonset(), nodes, [daemon_pod("a", "n1")])
    assert deletes(plan) == [] and creates(plan) == {}
    assert status_of(plan)["numberMisscheduled"] == 1


def test_rolling_update_replaces_at_most_max_unavailable_old_pods_at_a_time() -> None:
    nodes = [node(f"n{i}") for i in range(1, 5)]
    old = [daemon_pod(f"old-{i}", f"n{i}", revision="old") for i in range(1, 5)]
    plan = sync_daemonset(daemonset(), nodes, old)
    assert deletes(plan) == ["old-1"]  # maxUnavailable 1: one node at a time
    assert status_of(plan).get("updatedNumberScheduled", 0) == 0  # omitempty, as apps/v1
    # n1's new pod exists but is not ready yet: nothing more goes.
    pods = [daemon_pod("new-1", "n1", ready=False), *old[1:]]
    assert deletes(sync_daemonset(daemonset(), nodes, pods)) == []
    # With 50 % of 4 nodes, two may be unavailable at once.
    spec = {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "50%"}}}
    assert deletes(sync_daemonset(daemonset(**spec), nodes, old)) == ["old-1", "old-2"]
    # An old pod that is not available goes regardless, and counts against the budget already.
    old[3] = daemon_pod("old-4", "n4", revision="old", ready=False)
    assert deletes(sync_daemonset(daemonset(**spec), nodes, old)) == ["old-1", "old-4"]


def test_max_surge_starts_the_new_pod_beside_the_old_one() -> None:
    spec = {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}}
    nodes = [node("n1"), node("n2")]
    old = [daemon_pod("old-1", "n1", revision="old"), daemon_pod("old-2", "n2", revision="old")]
    plan = sync_daemonset(daemonset(**spec), nodes, old)
    assert sorted(creates(plan)) == ["n1"] and deletes(plan) == []
    ready = [daemon_pod("new-1", "n1"), *old]
    assert deletes(sync_daemonset(daemonset(**spec), nodes, ready)) == ["old-1"]


def test_on_delete_replaces_nothing_by_itself() -> None:
    spec = {"updateStrategy": {"type": "OnDelete"}}
    plan = sync_daemonset(daemonset(**spec), [node("n1")], [daemon_pod("old", "n1", revision="old")])
    assert deletes(plan) == [] and creates(plan) == {}


def test_target_node_reads_the_pin_of_an_unscheduled_pod() -> None:
    body = creates(sync_daemonset(daemonset(), [node("n7")], []))["n7"]
    assert body["spec"].get("nodeName") is None and target_node(body) == "n7"
