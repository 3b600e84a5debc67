"""The workload rules the API server and the workload controllers share (apis.k8s.workloads)."""

from typing import Any

import pytest

from apis.errors import ValidationError
from apis.k8s.workloads import (
    disruption_budget,
    label_selector_matches,
    scaled_value,
    selector_string,
)


@pytest.mark.parametrize(
    ("value", "total", "up", "expected"),
    [(3, 10, True, 3), ("25%", 10, True, 3), ("25%", 10, False, 2), ("100%", 7, False, 7), ("0%", 5, True, 0)],
)
def test_scaled_value_rounds_as_kubernetes(value: object, total: int, up: bool, expected: int) -> None:
    assert scaled_value(value, total, round_up=up) == expected


@pytest.mark.parametrize("value", ["25", "x%", -1, None, True, 1.5])
def test_scaled_value_rejects_what_is_neither_integer_nor_percentage(value: object) -> None:
    with pytest.raises(ValidationError):
        scaled_value(value, 10, round_up=True)


def test_selectors_match_and_print_as_kubernetes() -> None:
    selector = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["b", "a"]},
            {"key": "canary", "operator": "DoesNotExist"},
        ],
    }
    assert label_selector_matches(selector, {"app": "web", "tier": "a"})
    assert not label_selector_matches(selector, {"app": "web", "tier": "a", "canary": "1"})
    assert not label_selector_matches(selector, {"app": "web"})
    assert label_selector_matches({}, {"any": "thing"}) and not label_selector_matches(None, {})
    assert selector_string(selector) == "app=web,tier in (a,b),!canary"


def _pod(name: str, *, ready: bool = True, owner: str = "", deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"app": "web"}}
    if owner:
        meta["ownerReferences"] = [{"kind": "ReplicaSet", "name": owner, "uid": owner, "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return {"metadata": meta, "status": status}


def test_integer_min_available_counts_the_pods_there_are() -> None:
    pods = [_pod("a"), _pod("b"), _pod("c", ready=False), _pod("d", deleting=True)]
    budget = disruption_budget({"spec": {"minAvailable": 2}}, pods, lambda ref: None)
    assert (budget.expected_pods, budget.current_healthy, budget.desired_healthy) == (4, 2, 2)
    assert budget.disruptions_allowed == 0


def test_max_unavailable_scales_with_the_owners_replicas_counted_once() -> None:
    pods = [_pod("a", owner="rs1"), _pod("b", owner="rs1"), _pod("c", owner="rs2")]
    scales = {"rs1": ("deploy", 4), "rs2": ("deploy", 4)}  # two ReplicaSets of one Deployment of 4
    budget = disruption_budget({"spec": {"maxUnavailable": "25%"}}, pods, lambda ref: scales[ref["uid"]])
    assert (budget.expected_pods, budget.desired_healthy, budget.current_healthy) == (4, 3, 3)
    assert budget.disruptions_allowed == 0
    budget = disruption_budget({"spec": {"minAvailable": "50%"}}, pods, lambda ref: scales[ref["uid"]])
    assert (budget.desired_healthy, budget.disruptions_allowed) == (2, 1)
