"""Persistence: safety violations count at once, liveness ones after their grace since the later of
their first sighting and the last disturbance; one gone in a check starts over."""

from __future__ import annotations

from cli.bench.soak.invariants import Invariant, Persistence, Violation

SAFETY = Invariant("safety", lambda _: [])
LIVENESS = Invariant("liveness", lambda _: [], grace_s=30)
STUCK = Violation("liveness", ("soak/p",), "stuck")
BROKEN = Violation("safety", ("n1/gpu-0",), "broken")


def _found(*violations: Violation) -> dict[str, list[Violation]]:
    out: dict[str, list[Violation]] = {"safety": [], "liveness": []}
    for v in violations:
        out[v.invariant].append(v)
    return out


def test_safety_counts_at_once_liveness_after_its_grace() -> None:
    p = Persistence([SAFETY, LIVENESS])
    assert p.update(_found(BROKEN, STUCK), now=100, calm_since=0) == [BROKEN]
    assert p.update(_found(BROKEN, STUCK), now=129, calm_since=0) == []
    assert p.candidates == 1
    assert p.update(_found(BROKEN, STUCK), now=130, calm_since=0) == [STUCK]
    assert set(p.counted) == {BROKEN.key, STUCK.key}


def test_a_disturbance_restarts_the_grace_and_a_gap_forgets_the_candidate() -> None:
    p = Persistence([LIVENESS])
    p.update(_found(STUCK), now=100, calm_since=0)
    assert p.update(_found(STUCK), now=135, calm_since=120) == []  # killed at 120: 15 s since
    assert p.update(_found(), now=140, calm_since=120) == []
    assert p.update(_found(STUCK), now=160, calm_since=120) == []  # seen again from 160
    assert p.update(_found(STUCK), now=190, calm_since=120) == [STUCK]


def test_an_invariant_judged_during_node_losses_is_restarted_by_kills_only() -> None:
    during = Invariant("during", lambda _: [], grace_s=10, during_node_loss=True)
    seen = Violation("during", ("soak/p",), "not evicted")
    p = Persistence([during, LIVENESS])
    found = {"during": [seen], "liveness": [STUCK]}
    p.update(found, now=100, calm_since=100, kills_calm_since=50)  # a node is lost now
    assert p.update(found, now=110, calm_since=110, kills_calm_since=50) == [seen]
    assert p.update({"during": [], "liveness": [STUCK]}, now=140, calm_since=110, kills_calm_since=50) == [STUCK]
    killed = Persistence([during])
    killed.update({"during": [seen]}, now=100, calm_since=100, kills_calm_since=105)
    assert killed.update({"during": [seen]}, now=110, calm_since=110, kills_calm_since=105) == []
