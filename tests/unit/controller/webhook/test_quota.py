"""The ElasticQuota webhook's decisions, on AdmissionReview requests as kube-apiserver sends them."""

from __future__ import annotations

from typing import Any

import pytest

from apis.crds.elasticquota import ElasticQuota
from apis.extension import names
from apis.quota import DEFAULT_QUOTA_NAME, ROOT_QUOTA_NAME
from controller.webhook import quota
from tests.support.quotas import elastic_quota


def eq(name: str, **fields: Any) -> dict[str, Any]:
    return elastic_quota(name, **{"namespace": "ns", **fields})


def stored(*objs: dict[str, Any]) -> list[ElasticQuota]:
    return [ElasticQuota.from_dict(o) for o in objs]


def request(operation: str, obj: dict[str, Any] | None, old: dict[str, Any] | None = None) -> dict[str, Any]:
    meta = (obj or old or {})["metadata"]
    return {
        "uid": "u",
        "operation": operation,
        "name": meta["name"],
        "namespace": meta["namespace"],
        "object": obj,
        "oldObject": old,
    }


TREE = (eq("org", is_parent=True, min_gpu="4"), eq("team-a", parent="org", min_gpu="2"))


def test_a_good_quota_is_allowed() -> None:
    decision = quota.review(request("CREATE", eq("team-b", parent="org", min_gpu="2")), stored(*TREE))
    assert decision == quota.Decision(True)
    assert decision.response("u") == {"uid": "u", "allowed": True}


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            eq("team-b", parent="org", min_gpu="3"),
            "quota org: children's min[nvidia.com/gpu] sum to 5, more than its min[nvidia.com/gpu] 4 "
            "(children: team-a, team-b)",
        ),
        (eq("team-b", parent="nowhere"), "quota team-b: parent quota nowhere does not exist"),
        (eq("team-b", parent="team-a"), 'quota team-b: parent quota team-a is not a parent (is-parent is not "true")'),
        (eq("team-b", min_gpu="9"), "spec.min[nvidia.com/gpu]: min 9 exceeds max 8"),
        (eq("team-b", max_gpu="lots"), "spec.max"),
        (eq("team-a", namespace="other"), "quota team-a: a quota of this name already exists in namespace ns"),
        (eq("team-b", annotations={names.ANNOTATION_QUOTA_NAMESPACES: "not json"}), names.ANNOTATION_QUOTA_NAMESPACES),
    ],
)
def test_a_bad_quota_is_refused_naming_the_rule_and_the_quotas(obj: dict[str, Any], message: str) -> None:
    decision = quota.review(request("CREATE", obj), stored(*TREE))
    assert not decision.allowed and message in decision.message, decision.message
    status = decision.response("u")["status"]
    assert (status["code"], status["reason"]) == (403, "Forbidden")


def test_is_parent_cannot_flip_while_children_exist() -> None:
    old, new = TREE[0], eq("org", is_parent=False, min_gpu="4")
    decision = quota.review(request("UPDATE", new, old), stored(*TREE))
    assert decision.message == (
        "quota has children, isParent is forbidden to modify as false, quotaName:org "
        "(quota org: is-parent cannot change from true to false while it has children (team-a))"
    )


def test_is_parent_cannot_become_true_while_pods_use_the_quota() -> None:
    old, new = TREE[1], eq("team-a", parent="org", is_parent=True, min_gpu="2")
    used = quota.review(request("UPDATE", new, old), stored(*TREE), has_pods=lambda q: q.name == "team-a")
    assert used.message == "quota has bound pods, isParent is forbidden to modify as true, quotaName: team-a"
    assert quota.review(request("UPDATE", new, old), stored(*TREE), has_pods=lambda q: False).allowed
    # Without children, a parent may become a child again (the capacity-scheduling manual says
    # otherwise: its "IsParent is forbidden modify now" is an older Koordinator's rule).
    lone = eq("lone", is_parent=True)
    assert quota.review(request("UPDATE", eq("lone"), lone), stored(lone)).allowed


def with_resources(obj: dict[str, Any], **spec: dict[str, str]) -> dict[str, Any]:
    return {**obj, "spec": {**obj["spec"], **spec}}


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            with_resources(eq("team-b", parent="org"), max={"nvidia.com/gpu": "8", "test": "200"}),
            "failed to check sub and parent group quotaKey, err: checkSubAndParentGroupQuotaKey failed: "
            "team-b's max keys are not all included in org's",
        ),
        (
            with_resources(eq("team-b", parent="org"), min={"cpu": "1"}, max={"cpu": "2", "nvidia.com/gpu": "8"}),
            "failed to check sub and parent group quotaKey, err: checkSubAndParentGroupQuotaKey failed: "
            "team-b's max keys are not all included in org's",
        ),
        (
            with_resources(eq("team-b"), min={"cpu": "1"}),
            "resourceKey cpu of quota team-b is included in min, which is not included in max",
        ),
        (eq("team-b", parent="team-a"), "team-b has parentName team-a but the parentQuotaInfo's IsParent is false"),
        (eq("team-b", parent="nowhere"), "team-b has parentName nowhere but not find parentInfo in quotaInfoMap"),
        (
            eq("team-b", parent="org", min_gpu="3"),
            "checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: org",
        ),
    ],
    ids=["child-adds-a-max-key", "child-adds-a-min-key", "min-key-not-in-max", "parent-not-parent", "no-parent", "sum"],
)
def test_koordinators_rules_in_its_words(obj: dict[str, Any], message: str) -> None:
    decision = quota.review(request("CREATE", obj), stored(*TREE))
    assert not decision.allowed and decision.message.startswith(message), decision.message


def test_a_child_may_leave_a_parents_resource_out() -> None:
    parent = with_resources(eq("p", is_parent=True), max={"nvidia.com/gpu": "8", "cpu": "8"})
    child = eq("c", parent="p")
    assert quota.review(request("CREATE", child), stored(parent)).allowed
    # ... and a parent may not drop a resource its children have.
    narrowed = with_resources(eq("p", is_parent=True), max={"cpu": "8"}, min={})
    refused = quota.review(request("UPDATE", narrowed, parent), stored(parent, child))
    assert refused.message.startswith("failed to check sub and parent group quotaKey, err: ")
    assert "c's max keys are not all included in p's" in refused.message


def test_an_update_into_a_cycle_is_refused() -> None:
    quotas = (eq("a", is_parent=True, min_gpu="4"), eq("b", parent="a", is_parent=True))
    decision = quota.review(
        request("UPDATE", eq("a", parent="b", is_parent=True, min_gpu="4"), quotas[0]), stored(*quotas)
    )
    assert not decision.allowed and "cycle" in decision.message


def test_an_invalid_stored_version_may_be_replaced_by_a_valid_one() -> None:
    broken = eq("team-a", parent="org", annotations={names.ANNOTATION_QUOTA_NAMESPACES: "["})
    assert quota.review(request("UPDATE", TREE[1], broken), stored(TREE[0])).allowed


def test_deleting_a_parent_with_children_or_a_built_in_quota_is_refused() -> None:
    decision = quota.review(request("DELETE", None, TREE[0]), stored(*TREE))
    assert decision.message == "quota org: cannot be deleted while it has children (team-a)"
    for name in (ROOT_QUOTA_NAME, DEFAULT_QUOTA_NAME):
        assert not quota.review(request("DELETE", None, eq(name)), stored(*TREE)).allowed
    assert quota.review(request("DELETE", None, TREE[1]), stored(*TREE)).allowed
