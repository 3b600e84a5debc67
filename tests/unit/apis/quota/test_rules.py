"""The tree's rules: each broken rule gives a precise message naming quota, resource and values."""

from __future__ import annotations

from apis.quota.rules import pod_on_parent, validate_tree, validate_update
from apis.quota.tree import QuotaSpec


def specs(*items: QuotaSpec) -> dict[str, QuotaSpec]:
    return {s.name: s for s in items}


PARENT = QuotaSpec("org", is_parent=True, min={"cpu": 10_000}, max={"cpu": 20_000})


def test_valid_tree_has_no_problems() -> None:
    child = QuotaSpec("a", parent="org", min={"cpu": 10_000}, max={"cpu": 20_000})
    assert validate_tree(specs(PARENT, child)) == {}


def test_min_above_max() -> None:
    bad = QuotaSpec("a", min={"cpu": 3000}, max={"cpu": 2000})
    assert validate_tree(specs(bad)) == {"a": ["quota a: min[cpu] 3 exceeds max[cpu] 2"]}


def test_children_min_sum_exceeds_parent_min() -> None:
    a = QuotaSpec("a", parent="org", min={"cpu": 6000}, max={"cpu": 20_000})
    b = QuotaSpec("b", parent="org", min={"cpu": 5000}, max={"cpu": 20_000})
    assert validate_tree(specs(PARENT, a, b)) == {
        "org": ["quota org: children's min[cpu] sum to 11, more than its min[cpu] 10 (children: a, b)"]
    }
    assert validate_update(None, b, specs(PARENT, a)) == [
        "quota org: children's min[cpu] sum to 11, more than its min[cpu] 10 (children: a, b)"
    ]


def test_parent_missing_or_not_a_parent() -> None:
    leaf = QuotaSpec("leaf")
    orphan = QuotaSpec("x", parent="nope")
    under_leaf = QuotaSpec("y", parent="leaf")
    assert validate_tree(specs(leaf, orphan, under_leaf)) == {
        "x": ["quota x: parent quota nope does not exist"],
        "y": ['quota y: parent quota leaf is not a parent (is-parent is not "true")'],
    }


def test_cycles_are_refused() -> None:
    a = QuotaSpec("a", parent="b", is_parent=True)
    b = QuotaSpec("b", parent="a", is_parent=True)
    assert validate_tree(specs(a, b))["a"] == ["quota a: parent chain forms a cycle (a -> b -> a)"]
    assert validate_tree(specs(QuotaSpec("s", parent="s", is_parent=True)))["s"] == [
        "quota s: a quota cannot be its own parent"
    ]


def test_is_parent_cannot_flip_with_children() -> None:
    child = QuotaSpec("a", parent="org")
    flipped = QuotaSpec("org", is_parent=False, min=PARENT.min, max=PARENT.max)
    assert validate_update(PARENT, flipped, specs(PARENT, child)) == [
        "quota org: is-parent cannot change from true to false while it has children (a)"
    ]
    assert validate_update(PARENT, flipped, specs(PARENT)) == []


def test_pods_may_not_use_a_parent() -> None:
    assert pod_on_parent(PARENT) == "quota org is a parent quota (is-parent: true): pods must use one of its children"
    assert pod_on_parent(QuotaSpec("a")) is None
