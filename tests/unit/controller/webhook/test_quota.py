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
    assert decision.message == "quota org: is-parent cannot change from true to false while it has children (team-a)"


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
