"""Properties of gang scheduling over random clusters, gangs and arrival orders:

- no Strict gang is ever partly placed: after what-if, each has 0 or at least min members bound,
  and every member of an unsatisfied one has no node and a reason naming the gang;
- Unreserve of a rejected gang (it did not fit, or it timed out) restores the exact cache state;
- two Strict gangs competing for one node never both stay unplaced when either alone would fit.
"""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from apis.k8s.core import Pod
from scheduler import whatif
from scheduler.core import Scheduler
from tests.support.builders import make_node, make_pod
from tests.support.scheduling import make_scheduler, state_of

from .gangs import FOREVER, member, schedule_all

GPU_COUNTS = [1, 2, 4, 8]


@st.composite
def cluster(draw: st.DrawFn) -> list[int]:
    return draw(st.lists(st.sampled_from(GPU_COUNTS), min_size=1, max_size=3))


@st.composite
def gang(draw: st.DrawFn, name: str) -> list[Pod]:
    """A Strict gang of min members, each asking for 1, 2 or 4 whole GPUs; sometimes one
    member fewer than min is created."""
    minimum = draw(st.integers(1, 4))
    gpus = draw(st.sampled_from([1, 2, 4]))
    created = minimum - draw(st.sampled_from([0, 0, 0, 1]))
    return [member(f"{name}-{i}", name, min_available=minimum, gpus=gpus) for i in range(created)]


def build(gpus: list[int]) -> Scheduler:
    return make_scheduler(*(make_node(f"n{i}", gpus=g, nics_per_switch=0) for i, g in enumerate(gpus)))


@settings(max_examples=60, deadline=None)
@given(
    gpus=cluster(),
    gangs=st.lists(st.sampled_from("abcd"), min_size=1, max_size=4, unique=True).flatmap(
        lambda names: st.tuples(*(gang(n) for n in names))
    ),
    singles=st.lists(st.sampled_from([1, 2]), max_size=3),
    order=st.randoms(use_true_random=False),
)
def test_no_strict_gang_is_ever_partly_placed(
    gpus: list[int], gangs: tuple[list[Pod], ...], singles: list[int], order: object
) -> None:
    pods = [pod for members in gangs for pod in members]
    pods += [make_pod(f"solo-{i}", koord_gpu=100 * g) for i, g in enumerate(singles)]
    order.shuffle(pods)  # type: ignore[attr-defined]
    report = whatif.report(whatif.Snapshot(pods=tuple(pods)), build(gpus))
    by_pod = {r.pod: r for r in report.results}
    for result in report.gangs:
        assert result.placed == 0 or result.placed >= result.min, result
        assert result.satisfied == (result.placed >= result.min)
        if not result.satisfied:
            assert result.reason
            members = [r for key, r in by_pod.items() if key.startswith(f"default/{result.name[8:]}-")]
            assert all(r.node is None and f"gang {result.name}" in r.message for r in members), members


@settings(max_examples=60, deadline=None)
@given(
    gpus=cluster(),
    placed=st.lists(st.sampled_from([1, 2]), max_size=3),
    minimum=st.integers(2, 4),
    per_member=st.sampled_from([1, 2, 4]),
    by_timeout=st.booleans(),
)
def test_unreserve_of_a_rejected_gang_restores_the_exact_cache_state(
    gpus: list[int], placed: list[int], minimum: int, per_member: int, by_timeout: bool
) -> None:
    scheduler = build(gpus)
    schedule_all(scheduler, [make_pod(f"solo-{i}", koord_gpu=100 * g) for i, g in enumerate(placed)])
    before = state_of(scheduler.cache)
    members = [member(f"w-{i}", min_available=minimum, gpus=per_member) for i in range(minimum)]
    if by_timeout:
        # The last member exists but is never scheduled: the others wait until their time is up.
        scheduler.observe_pod(members[-1])
        members = members[:-1]
    else:
        assume(per_member * minimum > sum(gpus))  # cannot fit: one member fails
    out = schedule_all(scheduler, members, now=FOREVER)
    assert not any(o.scheduled for o in out.values())
    assert scheduler.cycle.waiting == 0
    assert state_of(scheduler.cache) == before


@settings(max_examples=80, deadline=None)
@given(
    gpus=st.sampled_from([2, 4, 8]),
    a=st.tuples(st.integers(1, 4), st.sampled_from([1, 2, 4])),
    b=st.tuples(st.integers(1, 4), st.sampled_from([1, 2, 4])),
    arrival=st.lists(st.booleans(), min_size=8, max_size=8),
)
def test_two_competing_gangs_never_both_stay_unplaced_when_either_alone_fits(
    gpus: int, a: tuple[int, int], b: tuple[int, int], arrival: list[bool]
) -> None:
    (count_a, size_a), (count_b, size_b) = a, b
    assume(count_a * size_a <= gpus or count_b * size_b <= gpus)
    assume(count_a * size_a + count_b * size_b > gpus)
    gang_a = [member(f"a-{i}", "a", min_available=count_a, gpus=size_a) for i in range(count_a)]
    gang_b = [member(f"b-{i}", "b", min_available=count_b, gpus=size_b) for i in range(count_b)]
    pods = []
    for take_a in arrival:  # interleave the two gangs' arrivals
        source = gang_a if (take_a and gang_a) or not gang_b else gang_b
        if source:
            pods.append(source.pop(0))
    pods += gang_a + gang_b
    report = whatif.report(whatif.Snapshot(pods=tuple(pods)), build([gpus]))
    assert any(g.satisfied for g in report.gangs), report.gangs
