"""The quota tree: specs from CRs, pod → quota, requests up the path, runtimes down it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apis.errors import AnnotationError
from apis.extension import names
from apis.quota.tree import DEFAULT_QUOTA_NAME, ROOT_QUOTA_NAME, QuotaSpec, QuotaTree, resolve_quota
from tests.support.builders import make_pod, quota_cr


def test_spec_from_cr_defaults_weight_to_max_and_parent_to_root() -> None:
    spec = QuotaSpec.of(quota_cr("a", min={"cpu": "1"}, max={"cpu": "4"}))
    assert (spec.parent, spec.is_parent, spec.allow_lent) == (ROOT_QUOTA_NAME, False, True)
    assert spec.shared_weight == {"cpu": 4000}


def test_spec_reads_labels_and_namespaces() -> None:
    spec = QuotaSpec.of(
        quota_cr(
            "a",
            labels={names.LABEL_QUOTA_PARENT: "p", names.LABEL_QUOTA_ALLOW_LENT_RESOURCE: "false"},
            annotations={
                f"{names.QUOTA_DOMAIN}/namespaces": '["x","y"]',
                names.ANNOTATION_QUOTA_SHARED_WEIGHT: '{"cpu":"2"}',
            },
            max={"cpu": "4"},
        )
    )
    assert (spec.parent, spec.allow_lent, spec.namespaces) == ("p", False, ("x", "y"))
    assert spec.shared_weight == {"cpu": 2000}


def test_bad_namespaces_annotation_is_a_precise_error() -> None:
    with pytest.raises(AnnotationError, match="namespaces"):
        QuotaSpec.of(quota_cr("a", annotations={f"{names.QUOTA_DOMAIN}/namespaces": '{"x":1}'}))


def test_pod_quota_resolution_order() -> None:
    quotas = {q.name: q for q in (QuotaSpec("team-a"), QuotaSpec("ns1"), QuotaSpec("lister", namespaces=("ns2",)))}
    label = {names.LABEL_QUOTA_NAME: "team-a"}
    assert resolve_quota(make_pod(namespace="ns1", labels=label), quotas) == "team-a"
    assert resolve_quota(make_pod(namespace="ns1", labels={names.LABEL_QUOTA_NAME: "gone"}), quotas) == "ns1"
    assert resolve_quota(make_pod(namespace="ns2"), quotas) == "lister"
    assert resolve_quota(make_pod(namespace="other"), quotas) == DEFAULT_QUOTA_NAME


def two_teams() -> QuotaTree:
    return QuotaTree(
        [
            QuotaSpec("org", is_parent=True, min={"cpu": 80}, max={"cpu": 100}, shared_weight={"cpu": 1}),
            QuotaSpec("a", parent="org", min={"cpu": 40}, max={"cpu": 100}, shared_weight={"cpu": 1}),
            QuotaSpec("b", parent="org", min={"cpu": 40}, max={"cpu": 100}, shared_weight={"cpu": 1}),
            QuotaSpec("c", min={"cpu": 0}, max={"cpu": 50}, shared_weight={"cpu": 1}),
        ],
        total={"cpu": 100},
    )


def test_borrowing_and_giving_back() -> None:
    tree = two_teams()
    tree.set_own_request("a", {"cpu": 100})
    assert tree.runtime("a") == {"cpu": 100}  # b idle: a borrows all of org's (org takes all of root)
    tree.set_own_request("b", {"cpu": 40})
    assert (tree.runtime("a"), tree.runtime("b")) == ({"cpu": 60}, {"cpu": 40})  # b's min comes back
    tree.set_own_request("c", {"cpu": 30})
    # org keeps its min 80 and shares the other 20 with c by equal weight; inside org, b keeps
    # its 40 and a gets the rest.
    assert (tree.runtime("org"), tree.runtime("c")) == ({"cpu": 90}, {"cpu": 10})
    assert (tree.runtime("a"), tree.runtime("b")) == ({"cpu": 50}, {"cpu": 40})


def test_child_that_does_not_lend_keeps_its_min() -> None:
    tree = QuotaTree(
        [QuotaSpec("a", min={"cpu": 30}, max={"cpu": 100}, allow_lent=False), QuotaSpec("b", max={"cpu": 100})],
        total={"cpu": 100},
    )
    tree.set_own_request("b", {"cpu": 100})
    assert (tree.runtime("a"), tree.runtime("b")) == ({"cpu": 30}, {"cpu": 70})


def test_root_total_excludes_system_and_default_usage() -> None:
    tree = QuotaTree([QuotaSpec("a", max={"cpu": 100})], total={"cpu": 100})
    tree.set_own_request("a", {"cpu": 100})
    tree.set_own_request(DEFAULT_QUOTA_NAME, {"cpu": 30})
    assert tree.runtime("a") == {"cpu": 70}


def test_unlimited_resource_is_not_charged() -> None:
    tree = QuotaTree([QuotaSpec("a", max={"cpu": 10})], total={"cpu": 100, "memory": 100})
    tree.set_own_request("a", {"cpu": 5, "memory": 50})
    assert tree.runtime("a") == {"cpu": 5}


@st.composite
def trees(draw: st.DrawFn) -> tuple[list[QuotaSpec], dict[str, int], int]:
    parents = [f"p{i}" for i in range(draw(st.integers(0, 3)))]
    specs = [
        QuotaSpec(p, is_parent=True, min={"cpu": draw(st.integers(0, 50))}, max={"cpu": draw(st.integers(50, 200))})
        for p in parents
    ]
    requests = {}
    for i in range(draw(st.integers(1, 8))):
        lo = draw(st.integers(0, 50))
        name = f"q{i}"
        specs.append(
            QuotaSpec(
                name,
                parent=draw(st.sampled_from([ROOT_QUOTA_NAME, *parents])),
                min={"cpu": lo},
                max={"cpu": lo + draw(st.integers(0, 100))},
                shared_weight={"cpu": draw(st.integers(1, 10))},
                allow_lent=draw(st.booleans()),
            )
        )
        requests[name] = draw(st.integers(0, 200))
    return specs, requests, draw(st.integers(0, 400))


@given(trees())
def test_tree_properties(case: tuple[list[QuotaSpec], dict[str, int], int]) -> None:
    specs, requests, total = case
    tree = QuotaTree(specs, total={"cpu": total})
    for name, amount in requests.items():
        tree.set_own_request(name, {"cpu": amount})
    runtimes = tree.runtimes()
    for spec in specs:
        rt = runtimes[spec.name].get("cpu", 0)
        assert rt <= spec.max["cpu"]
        assert rt <= tree.passed_up(spec.name)["cpu"]
        kids = tree.children.get(spec.name, [])
        assert sum(runtimes[k]["cpu"] for k in kids) <= rt
    assert sum(runtimes[k]["cpu"] for k in tree.children.get(ROOT_QUOTA_NAME, [])) <= total
    # Incremental equals from scratch, whatever the order requests arrived in.
    fresh = QuotaTree(specs, total={"cpu": total})
    for name in sorted(requests, reverse=True):
        fresh.set_own_request(name, {"cpu": requests[name]})
    assert fresh.runtimes() == runtimes


def from_scratch(specs: list[QuotaSpec], requests: dict[str, int], total: int) -> QuotaTree:
    tree = QuotaTree(specs, total={"cpu": total})
    for name, amount in sorted(requests.items()):
        tree.set_own_request(name, {"cpu": amount})
    return tree


@given(
    trees(),
    st.lists(st.tuples(st.integers(0, 20), st.integers(0, 400), st.sampled_from(["request", "total", "read"]))),
)
def test_incremental_recompute_equals_a_full_one_through_any_event_sequence(
    case: tuple[list[QuotaSpec], dict[str, int], int], events: list[tuple[int, int, str]]
) -> None:
    """Pod events (a quota's request), node events (the total) and reads in any order: every
    runtime read equals that of a tree built from scratch, and so does a full recompute."""
    specs, requests, total = case
    tree = from_scratch(specs, requests, total)
    quotas = [spec.name for spec in specs]
    for index, amount, kind in events:
        name = quotas[index % len(quotas)]
        if kind == "request":
            requests[name] = amount
            tree.set_own_request(name, {"cpu": amount})
        elif kind == "total":
            total = amount
            tree.set_total({"cpu": total})
        else:
            assert tree.runtime(name) == from_scratch(specs, requests, total).runtime(name)
    expected = from_scratch(specs, requests, total).runtimes()
    assert tree.runtimes() == expected
    tree.refresh(everything=True)
    assert tree.runtimes() == expected
