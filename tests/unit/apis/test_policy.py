"""PodDisruptionBudget as the scheduler reads it: selector, disruptionsAllowed, disruptedPods."""

from __future__ import annotations

import pytest

from apis.errors import ValidationError
from apis.k8s.policy import PodDisruptionBudget


def test_a_budget_reads_its_selector_and_status() -> None:
    pdb = PodDisruptionBudget.from_dict(
        {
            "metadata": {"name": "db", "namespace": "prod"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"}}},
            "status": {"disruptionsAllowed": 1, "disruptedPods": {"db-0": "2026-01-01T00:00:00Z"}},
        }
    )
    assert (pdb.key, pdb.disruptions_allowed, pdb.disrupted_pods) == ("prod/db", 1, frozenset({"db-0"}))
    assert pdb.covers("prod", {"app": "db", "tier": "x"})
    assert not pdb.covers("dev", {"app": "db"})  # a budget covers its own namespace only
    assert not pdb.covers("prod", {"app": "web"})


def test_no_or_an_empty_selector_covers_nothing_and_no_status_allows_nothing() -> None:
    bare = PodDisruptionBudget.from_dict({"metadata": {"name": "a", "namespace": "ns"}, "spec": {}})
    empty = PodDisruptionBudget.from_dict({"metadata": {"name": "b", "namespace": "ns"}, "spec": {"selector": {}}})
    assert bare.disruptions_allowed == 0
    assert not bare.covers("ns", {"app": "x"}) and not empty.covers("ns", {"app": "x"})


def test_a_malformed_budget_names_the_field() -> None:
    with pytest.raises(ValidationError, match="disruptionsAllowed"):
        PodDisruptionBudget.from_dict(
            {"metadata": {"name": "a", "namespace": "ns"}, "status": {"disruptionsAllowed": "x"}}
        )
