"""Reclaim's circuit breaker: pure steps, and in the reconciler holding back a mass eviction,
then resuming — by itself once the figures are stable, or when an operator says so."""

from __future__ import annotations

import dataclasses

from apis.crds.elasticquota import ElasticQuota
from apis.extension import names
from controller.quotas.breaker import (
    REASON_MASS_OVERUSE,
    REASON_OPERATOR,
    REASON_ROOT_COLLAPSED,
    REASON_STABLE,
    Breaker,
    BreakerSettings,
    Exposure,
    Figures,
)
from controller.quotas.reconciler import REASON_RECLAIM_PAUSED, REASON_RECLAIM_RESUMED
from controller.quotas.settings import QuotaSettings
from tests.support.builders import make_pod
from tests.support.clocks import FakeClock
from tests.unit.controller.quotas.harness import GPU, Harness, gpu_pod, teams


def breaker(clock: FakeClock, *, stable: float = 60.0) -> Breaker:
    return Breaker(BreakerSettings(stable=stable), clock=clock, now=lambda: "2026-01-01T00:00:00Z")


def test_a_collapsing_root_total_trips_and_closes_only_once_it_is_back(clock: FakeClock) -> None:
    b = breaker(clock)
    assert b.step(Figures(root={GPU: 1600})) is None  # the first figures: the reference
    assert b.step(Figures(root={GPU: 1500})) is None  # one GPU less: a step like any other
    trip = b.step(Figures(root={GPU: 0}, excess={GPU: 600}))
    assert trip is not None and trip.reason == REASON_ROOT_COLLAPSED
    assert trip.message.startswith("the root quota's total of koordinator.sh/gpu-core fell from 1500 to 0")
    assert not b.allows()
    clock.advance(3600)
    assert not b.allows()  # stable, but still collapsed
    b.step(Figures(root={GPU: 1400}, excess={}))  # back (a rise is no disturbance)
    assert b.allows() and b.closed_reason == REASON_STABLE and not b.is_open
    b.step(Figures(root={GPU: 100}))
    b.step(Figures(root={GPU: 1400}))
    assert not b.allows()  # back at once: the stable period counts from the last large step
    clock.advance(61)
    assert b.allows()


def test_a_resource_no_quota_limits_any_more_is_no_collapse(clock: FakeClock) -> None:
    """The last quota limiting cpu is deleted: cpu leaves the figures; a new quota brings it back
    (found by tests/conformance/koordinator: the capacity-scheduling manual's two quick starts)."""
    b = breaker(clock)
    b.step(Figures(root={"cpu": 256_000, "memory": 2**40}))
    assert b.step(Figures(root={})) is None
    assert b.step(Figures(root={"cpu": 256_000})) is None
    assert not b.is_open


def test_a_mass_overuse_trips_and_closes_after_the_stable_period(clock: FakeClock) -> None:
    b = breaker(clock, stable=30)
    b.step(Figures(root={GPU: 1000}))
    assert b.step(Figures(root={GPU: 1000}, excess={GPU: 200})) is None  # a lender arrives: 20 %
    trip = b.step(Figures(root={GPU: 1000}, excess={GPU: 600}))
    assert trip is not None and trip.reason == REASON_MASS_OVERUSE
    assert "one step put 400 of koordinator.sh/gpu-core in use above the quotas' runtimes" in trip.message
    clock.advance(20)
    b.step(Figures(root={GPU: 1000}, excess={GPU: 600}))  # a small step: the period goes on
    clock.advance(11)
    assert b.allows() and b.trips == 1


def test_an_operator_resumes_at_once_and_a_restored_collapse_waits_for_one(clock: FakeClock) -> None:
    b = breaker(clock)
    b.step(Figures(root={GPU: 800}))
    b.step(Figures(root={GPU: 100}))
    assert b.resume() and b.closed_reason == REASON_OPERATOR and b.allows()
    assert not b.resume()  # not open
    restored = breaker(clock)
    restored.restore(REASON_ROOT_COLLAPSED, "why", "2026-01-01T00:00:00Z")
    clock.advance(10_000)
    assert not restored.allows()  # the root's total before the restart is not known
    other = breaker(clock)
    other.restore(REASON_MASS_OVERUSE, "why", "")
    clock.advance(61)
    assert other.allows()


def test_disabled_never_trips(clock: FakeClock) -> None:
    b = Breaker(BreakerSettings(enabled=False), clock=clock, now=lambda: "")
    b.step(Figures(root={GPU: 800}))
    assert b.step(Figures(root={GPU: 0})) is None and b.allows()


def test_exposure_sums_what_changed() -> None:
    e = Exposure()
    e.set("a", {GPU: 100})
    e.set("b", {GPU: 50, "cpu": 1})
    e.set("a", {GPU: 30})
    e.set("b", None)
    assert e.total == {GPU: 30} and e.over() == ["a"]


# --- in the reconciler ----------------------------------------------------------------------------
def both_teams_busy(h: Harness) -> None:
    """team-a and team-b each use their 4 GPUs of an 8-GPU cluster: nobody over, nobody idle."""
    teams(h)
    for team in ("team-a", "team-b"):
        for i in range(4):
            h.put_pod(gpu_pod(f"{team[-1]}{i}", team, minute=i))
    for key in ("team-a/team-a", "team-b/team-b"):
        h.reconcile(key)
        h.apply_writes(key)


def conditions(h: Harness, key: str) -> dict[str, tuple[str, str]]:
    quota = h.quotas.get(key)
    assert isinstance(quota, ElasticQuota)
    return {c.type: (c.status, c.reason) for c in quota.conditions}


def test_the_breaker_holds_back_a_mass_eviction_then_resumes_by_itself(clock: FakeClock) -> None:
    h = Harness(clock, QuotaSettings(reclaim_grace=60, eviction_burst=100))
    both_teams_busy(h)
    # Something outside every quota takes the whole cluster at once (a bad charge, a bypass):
    # both teams' runtimes fall to 0 and all 8 pods are over it.
    stray = make_pod("stray", namespace="elsewhere", node="n2", extra={names.NVIDIA_GPU: 8})
    h.queued.clear()
    h.put_pod(stray)
    assert sorted(h.queued) == ["team-a/team-a", "team-b/team-b"]  # every quota: it opened
    assert h.manager.runtime("team-b") == {GPU: 0}
    for _ in range(3):
        for key in ("team-a/team-a", "team-b/team-b"):
            result = h.reconcile(key)
            assert result.requeue_after is not None  # looked at again, never evicted
            h.apply_writes(key)
        clock.advance(61)
    assert h.api.evictions == []
    assert conditions(h, "team-b/team-b")["ReclaimPaused"] == ("True", "RootTotalCollapsed")
    paused = [(kind, m) for kind, _, r, m in h.events.seen if r == REASON_RECLAIM_PAUSED]
    assert [kind for kind, _ in paused] == ["Warning", "Warning"]  # one on each quota over its runtime
    assert "the root quota's total of koordinator.sh/gpu-core fell from 800 to 0" in paused[0][1]
    assert h.sample("tessera_controller_quota_reclaim_paused", {}) == 1
    assert h.sample("tessera_controller_quota_reclaim_pauses_total", {"reason": "RootTotalCollapsed"}) == 1
    # The stray pod goes; once nothing has jumped for the stable period reclaim resumes, with
    # nobody over their runtime: nothing was lost.
    h.remove_pod(stray.key)
    h.reconcile("team-b/team-b")
    clock.advance(61)
    h.reconcile("team-b/team-b")
    h.apply_writes("team-b/team-b")
    assert conditions(h, "team-b/team-b")["ReclaimPaused"] == ("False", REASON_STABLE)
    assert any(r == REASON_RECLAIM_RESUMED for _, _, r, _ in h.events.seen) is False  # nobody over: no Event
    assert h.sample("tessera_controller_quota_reclaim_paused", {}) == 0
    clock.advance(120)
    for key in ("team-a/team-a", "team-b/team-b"):
        h.reconcile(key)
    assert h.api.evictions == []


def test_an_operator_resumes_reclaim_and_the_grace_period_starts_again(clock: FakeClock) -> None:
    h = Harness(clock, QuotaSettings(reclaim_grace=60, eviction_burst=100))
    both_teams_busy(h)
    h.put_pod(make_pod("stray", namespace="elsewhere", node="n2", extra={names.NVIDIA_GPU: 6}))
    clock.advance(600)
    assert h.reconcile("team-b/team-b").requeue_after is not None and not h.api.evictions
    # The operator decides the cluster really has 2 GPUs for the teams now.
    quota = h.quotas.get("team-b/team-b")
    assert isinstance(quota, ElasticQuota)
    annotations = {**quota.meta.annotations, names.ANNOTATION_QUOTA_RESUME_RECLAIM: "2026-01-01T00:05:00Z"}
    h.put_quota(dataclasses.replace(quota, meta=dataclasses.replace(quota.meta, annotations=annotations)), rv="500")
    h.reconcile("team-b/team-b")
    h.reconcile("team-a/team-a")
    resumed = [m for _, obj, r, m in h.events.seen if r == REASON_RECLAIM_RESUMED]
    assert len(resumed) == 2 and "an operator resumed it" in resumed[0]
    assert not h.api.evictions  # a whole grace period from the resume first
    clock.advance(61)
    h.reconcile("team-a/team-a")
    h.reconcile("team-b/team-b")
    # 8 GPUs used of the 2 left (one each): down to their runtimes, no further.
    assert sorted(h.api.evictions) == [f"team-{t}/{t}{i}" for t in "ab" for i in (1, 2, 3)]
