from typing import Any

import pytest

from apis.errors import ValidationError
from apis.k8s import labels as labelsel
from apis.k8s.core import Node, NodeAffinity, NodeSelectorTerm, Pod, Taint, Toleration


def container(
    name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None, restart: str = ""
) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "resources": {"requests": requests or {}, "limits": limits or {}}}
    if restart:
        c["restartPolicy"] = restart
    return c


def make_pod(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None, **spec: Any) -> Pod:
    return Pod.from_dict(
        {"metadata": {"name": "p"}, "spec": {"containers": containers, "initContainers": init or [], **spec}}
    )


def test_requests_sum_containers_and_add_overhead() -> None:
    pod = make_pod(
        [container("a", {"cpu": "1"}), container("b", {"cpu": "500m", "memory": "1Gi"})], overhead={"cpu": "100m"}
    )
    assert pod.requests() == {"cpu": 1600, "memory": 2**30}
    assert pod.namespace == "default" and pod.key == "default/p"


def test_requests_default_to_limits() -> None:
    pod = make_pod([container("a", limits={"nvidia.com/gpu": "2", "cpu": "1"}, requests={"cpu": "500m"})])
    assert pod.requests() == {"nvidia.com/gpu": 2, "cpu": 500}


def test_init_containers_take_the_max() -> None:
    pod = make_pod([container("a", {"cpu": "1"})], init=[container("i1", {"cpu": "3"}), container("i2", {"cpu": "2"})])
    assert pod.requests() == {"cpu": 3000}


def test_sidecars_add_to_app_and_to_later_init_containers() -> None:
    pod = make_pod(
        [container("app", {"cpu": "1"})],
        init=[container("sidecar", {"cpu": "1"}, restart="Always"), container("setup", {"cpu": "2500m"})],
    )
    # app phase: 1 + 1 sidecar = 2; init peak: setup 2.5 + sidecar 1 = 3.5
    assert pod.requests() == {"cpu": 3500}


@pytest.mark.parametrize(
    ("conditions", "message"),
    [
        ([], ""),
        ([{"type": "PodScheduled", "status": "True"}], ""),
        ([{"type": "Ready", "status": "False", "message": "not ready"}], ""),
        ([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/2 nodes"}], "0/2 nodes"),
    ],
    ids=["none", "scheduled", "other-condition", "unschedulable"],
)
def test_pending_message_is_why_the_scheduler_has_not_placed_it(conditions: list[dict[str, str]], message: str) -> None:
    pod = Pod.from_dict({"metadata": {"name": "p"}, "spec": {"containers": []}, "status": {"conditions": conditions}})
    assert pod.pending_message == message


def test_pod_fields() -> None:
    pod = Pod.from_dict(
        {
            "metadata": {
                "name": "p",
                "namespace": "ml",
                "labels": {"a": "b"},
                "deletionTimestamp": "2024-01-01T00:00:00Z",
            },
            "spec": {
                "schedulerName": "tessera-scheduler",
                "nodeName": "n1",
                "priority": 7,
                "containers": [],
                "tolerations": [{"key": "gpu", "operator": "Exists"}],
                "nodeSelector": {"zone": "a"},
            },
            "status": {
                "phase": "Succeeded",
                "containerStatuses": [{"name": "c", "containerID": "containerd://abc"}],
                "nominatedNodeName": "n2",
            },
        }
    )
    assert (pod.scheduler_name, pod.node_name, pod.priority) == ("tessera-scheduler", "n1", 7)
    assert pod.nominated_node_name == "n2"
    assert pod.is_terminal and pod.is_deleting
    assert pod.container_ids == {"c": "containerd://abc"}


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        (Toleration(key="gpu", operator="Exists"), Taint("gpu", "x", "NoSchedule"), True),
        (Toleration(key="gpu", value="x", effect="NoSchedule"), Taint("gpu", "x", "NoSchedule"), True),
        (Toleration(key="gpu", value="y"), Taint("gpu", "x", "NoSchedule"), False),
        (Toleration(key="gpu", operator="Exists", effect="NoExecute"), Taint("gpu", "", "NoSchedule"), False),
        (Toleration(operator="Exists"), Taint("anything", "v", "NoExecute"), True),
        (Toleration(), Taint("anything", "", "NoSchedule"), False),
    ],
)
def test_tolerations(toleration: Toleration, taint: Taint, tolerated: bool) -> None:
    assert toleration.tolerates(taint) is tolerated


def test_node_affinity_terms_are_ored_and_expressions_anded() -> None:
    aff = NodeAffinity.from_dict(
        {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "gpu-model", "operator": "In", "values": ["A100", "H100"]},
                            {"key": "gpus", "operator": "Gt", "values": ["4"]},
                        ]
                    },
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["special"]}]},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}
            ],
        },
        "affinity",
    )
    assert aff.required_matches({"gpu-model": "A100", "gpus": "8"}, "n1")
    assert not aff.required_matches({"gpu-model": "A100", "gpus": "2"}, "n1")
    assert aff.required_matches({}, "special")
    assert aff.preferred[0][0] == 10
    assert NodeAffinity().required_matches({}, "any")


def test_node_affinity_rejects_unknown_fields_and_weights() -> None:
    with pytest.raises(ValidationError, match="metadata.name"):
        NodeAffinity.from_dict(
            {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchFields": [{"key": "spec.x", "operator": "In", "values": ["a"]}]}]
                }
            },
            "a",
        )
    with pytest.raises(ValidationError, match="weight"):
        NodeAffinity.from_dict(
            {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": {}}]}, "a"
        )


def test_node() -> None:
    node = Node.from_dict(
        {
            "metadata": {"name": "n1", "labels": {"x": "y"}},
            "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}], "unschedulable": True},
            "status": {
                "capacity": {"cpu": "8", "pods": "110"},
                "allocatable": {"cpu": "7500m", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "False"}],
            },
        }
    )
    assert node.allocatable == {"cpu": 7500, "pods": 110}
    assert node.capacity["cpu"] == 8000
    assert node.unschedulable and not node.ready
    assert str(node.taints[0]) == "k:NoSchedule"
    bare = Node.from_dict({"metadata": {"name": "n2"}, "status": {"capacity": {"cpu": "1"}}})
    assert bare.ready and bare.allocatable == {"cpu": 1000}


def test_bad_pods_name_the_field() -> None:
    with pytest.raises(ValidationError, match=r"pod default/p: spec.containers\[0\].resources.limits\[cpu\]"):
        make_pod([container("a", limits={"cpu": "one"})])
    with pytest.raises(ValidationError, match="spec.tolerations"):
        make_pod([], tolerations=[{"operator": "Maybe"}])


def test_node_affinity_excluding_a_node_keeps_every_other_requirement() -> None:
    assert not NodeAffinity.excluding(None, "a").required_matches({}, "a")
    assert NodeAffinity.excluding(None, "a").required_matches({}, "b")
    gpu = NodeSelectorTerm((labelsel.Requirement("gpu", labelsel.Operator.IN, ("A100",)),))
    empty = NodeSelectorTerm()
    narrowed = NodeAffinity.excluding(NodeAffinity((gpu, empty), ((5, gpu),)), "a")
    assert narrowed.required_matches({"gpu": "A100"}, "b")
    assert not narrowed.required_matches({"gpu": "A100"}, "a")
    assert not narrowed.required_matches({"gpu": "T4"}, "b")
    assert narrowed.preferred == ((5, gpu),)
    assert narrowed.required is not None and narrowed.required[1] == empty  # still matches nothing
