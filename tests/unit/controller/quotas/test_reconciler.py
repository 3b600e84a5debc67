"""The quota reconciler over real caches and a real QuotaManager, with recording writers and a
fake clock: what it writes (once), what it says about invalid quotas, whom it evicts and when."""

from __future__ import annotations

import json

import pytest

from apis.errors import ValidationError
from apis.extension import names
from controller.quotas.reconciler import (
    REASON_INVALID_QUOTA,
    REASON_POD_RECLAIMED,
    REASON_RECLAIMED,
)
from controller.quotas.settings import QuotaSettings
from controller.runtime import Malformed, PermanentError, Result
from kube.events import ObjectReference
from tests.support.builders import quota_cr
from tests.support.clocks import FakeClock
from tests.unit.controller.quotas.harness import GPU, Harness, gpu_pod, teams


def test_writes_status_and_annotations_once(clock: FakeClock) -> None:
    h = Harness(clock)
    teams(h)
    h.put_pod(gpu_pod("a1", "team-a"))
    assert h.reconcile("team-a/team-a") == Result()
    [(_, sub1, annotations), (_, sub2, status)] = h.api.patches
    assert (sub1, sub2) == ("", "status")
    assert json.loads(annotations["metadata"]["annotations"][names.ANNOTATION_QUOTA_RUNTIME]) == {GPU: "100"}
    assert status["status"]["used"] == {GPU: "100"}
    assert status["status"]["conditions"][0]["status"] == "True"
    assert h.reconcile("team-a/team-a") == Result()  # the cache is behind our write: wait for it
    h.apply_writes("team-a/team-a")
    assert h.reconcile("team-a/team-a") == Result()
    assert len(h.api.patches) == 2  # nothing changed: nothing written
    labels = {"quota": "team-a", "namespace": "team-a", "resource": GPU}
    assert h.sample("tessera_controller_quota_used", labels) == 100
    assert h.sample("tessera_controller_quota_max", labels) == 800
    assert h.sample("tessera_controller_quota_writes_total", {"part": "status"}) == 1
    h.quotas.delete("team-a/team-a")
    assert h.reconcile("team-a/team-a") == Result()
    assert h.sample("tessera_controller_quota_used", labels) is None


def test_invalid_quota_gets_a_condition_and_one_event(clock: FakeClock) -> None:
    h = Harness(clock)
    h.put_quota(quota_cr("orphan", labels={names.LABEL_QUOTA_PARENT: "nowhere"}, max={GPU: 100}, namespace="x"))
    h.reconcile("x/orphan")
    [(_, _, status)] = [p for p in h.api.patches if p[1] == "status"]
    condition = status["status"]["conditions"][0]
    assert (condition["status"], condition["reason"]) == ("False", "InvalidQuota")
    assert "parent quota nowhere does not exist" in condition["message"]
    h.apply_writes("x/orphan")
    h.reconcile("x/orphan")
    assert h.events.reasons() == [REASON_INVALID_QUOTA]


def test_malformed_quota_gets_a_condition_and_a_permanent_error(clock: FakeClock) -> None:
    h = Harness(clock)
    ref = ObjectReference("ElasticQuota", "bad", "x", "uid-1", names.ELASTIC_QUOTAS.api_version, "7")
    h.quotas.upsert("x/bad", "7", Malformed(ref, ValidationError("spec.min[cpu]", "min 4000 exceeds max 1000")))
    with pytest.raises(PermanentError) as raised:
        h.reconcile("x/bad")
    assert raised.value.reason == REASON_INVALID_QUOTA
    [(target, sub, patch)] = h.api.patches
    assert (target, sub) == ("x/bad", "status")
    assert patch["status"]["conditions"][0]["reason"] == "MalformedQuota"
    with pytest.raises(PermanentError):
        h.reconcile("x/bad")
    assert len(h.api.patches) == 1


def borrowing(h: Harness) -> None:
    """team-b borrows: 6 GPUs on an 8-GPU cluster while team-a is idle; then a asks for 4."""
    teams(h)
    for i in range(6):
        h.put_pod(gpu_pod(f"b{i}", "team-b", priority=10 if i == 0 else 0, minute=i))
    h.put_pod(gpu_pod("keep", "team-b", labels={names.LABEL_QUOTA_PREEMPTIBLE: "false"}, minute=9))
    for i in range(4):
        h.put_pod(gpu_pod(f"a{i}", "team-a", node=""))  # pending: team-a wants its min back


def test_reclaim_waits_for_the_grace_period_then_evicts_no_more_than_needed(clock: FakeClock) -> None:
    h = Harness(clock)
    borrowing(h)
    assert h.manager.runtime("team-b") == {GPU: 400} and h.manager.used("team-b") == {GPU: 700}
    result = h.reconcile("team-b/team-b")
    assert result.requeue_after == 60 and not h.api.evictions
    clock.advance(61)
    result = h.reconcile("team-b/team-b")
    # Burst 2: the two newest priority-0 preemptible pods go now, the third after a token.
    assert h.api.evictions == ["team-b/b5", "team-b/b4"]
    assert result.requeue_after == pytest.approx(1.0)
    assert h.reconcile("team-b/team-b").requeue_after == pytest.approx(1.0)  # evicted pods count as gone
    clock.advance(1)
    h.reconcile("team-b/team-b")
    assert h.api.evictions == ["team-b/b5", "team-b/b4", "team-b/b3"]  # 700 - 300 = 400: done
    clock.advance(10)
    for key in h.api.evictions:
        h.remove_pod(key)
    assert h.reconcile("team-b/team-b") == Result()
    assert h.api.evictions == ["team-b/b5", "team-b/b4", "team-b/b3"]
    quota_events = [m for _, obj, r, m in h.events.seen if r == REASON_RECLAIMED]
    assert len(quota_events) == 3
    assert quota_events[0].startswith("evicted pod team-b/b5 (priority 0, {koordinator.sh/gpu-core: 100}): ")
    assert "quota team-b/team-b used {koordinator.sh/gpu-core: 700} above its runtime" in quota_events[0]
    assert sum(1 for _, obj, r, _ in h.events.seen if r == REASON_POD_RECLAIMED and obj == "team-b/b5") == 1
    labels = {"quota": "team-b", "namespace": "team-b"}
    assert h.sample("tessera_controller_quota_reclaim_evictions_total", labels) == 3


def test_a_dip_below_runtime_restarts_the_grace_period(clock: FakeClock) -> None:
    h = Harness(clock)
    borrowing(h)
    h.reconcile("team-b/team-b")
    clock.advance(50)
    for i in range(4):
        h.remove_pod(f"team-a/a{i}")  # team-a leaves again: team-b is within its runtime
    assert h.reconcile("team-b/team-b") == Result()
    for i in range(4):
        h.put_pod(gpu_pod(f"a{i}", "team-a", node=""))
    clock.advance(20)
    assert h.reconcile("team-b/team-b").requeue_after == 60
    assert not h.api.evictions


def test_non_preemptible_pods_are_never_evicted(clock: FakeClock) -> None:
    h = Harness(clock, QuotaSettings(reclaim_grace=0, eviction_burst=100))
    teams(h)
    for i in range(6):
        h.put_pod(gpu_pod(f"k{i}", "team-b", labels={names.LABEL_QUOTA_PREEMPTIBLE: "false"}))
    h.put_pod(gpu_pod("p", "team-b"))
    for i in range(4):
        h.put_pod(gpu_pod(f"a{i}", "team-a", node=""))
    assert h.reconcile("team-b/team-b").requeue_after == 5.0
    assert h.api.evictions == ["team-b/p"]
    assert h.reconcile("team-b/team-b").requeue_after == 5.0  # still over: only non-preemptible left
    assert h.api.evictions == ["team-b/p"]


def test_a_disruption_budget_refusal_is_retried_later(clock: FakeClock) -> None:
    h = Harness(clock, QuotaSettings(reclaim_grace=0))
    borrowing(h)
    h.api.refuse.add("b5")
    assert h.reconcile("team-b/team-b").requeue_after == 5.0
    assert h.api.evictions == []
    h.api.refuse.clear()
    h.reconcile("team-b/team-b")
    assert h.api.evictions[0] == "team-b/b5"


def test_no_reclaim_when_disabled(clock: FakeClock) -> None:
    h = Harness(clock, QuotaSettings(reclaim_grace=0, reclaim=False))
    borrowing(h)
    assert h.reconcile("team-b/team-b") == Result()
    assert not h.api.evictions


def test_a_pod_event_queues_only_the_quotas_whose_figures_it_moved(clock: FakeClock) -> None:
    h = Harness(clock)
    h.manager.set_cluster_total({GPU: 1600})
    h.put_quota(quota_cr("org", labels={names.LABEL_QUOTA_IS_PARENT: "true"}, min={GPU: 800}, max={GPU: 800}))
    for team in ("team-a", "team-b"):
        labels = {names.LABEL_QUOTA_PARENT: "org"}
        h.put_quota(quota_cr(team, labels=labels, min={GPU: 400}, max={GPU: 800}, namespace=team))
    h.put_quota(quota_cr("solo", min={GPU: 100}, max={GPU: 800}, namespace="solo"))
    assert sorted(set(h.queued)) == ["default/org", "solo/solo", "team-a/team-a", "team-b/team-b"]  # new: each
    h.queued.clear()
    h.put_pod(gpu_pod("a1", "team-a"))
    assert sorted(h.queued) == ["default/org", "team-a/team-a"]  # its used and request, and org's
    # team-b asks for more than org has idle: team-a keeps what it asks (within its min), solo
    # is elsewhere: neither moves.
    h.queued.clear()
    for i in range(9):
        h.put_pod(gpu_pod(f"b{i}", "team-b", node=""))
    assert sorted(set(h.queued)) == ["default/org", "team-b/team-b"]
    assert h.manager.runtime("team-b") == {GPU: 700}
    # team-a asks for more than its min: the two share org by weight, both runtimes move.
    h.queued.clear()
    for i in range(2, 8):
        h.put_pod(gpu_pod(f"a{i}", "team-a", node=""))
    assert sorted(set(h.queued)) == ["default/org", "team-a/team-a", "team-b/team-b"]
