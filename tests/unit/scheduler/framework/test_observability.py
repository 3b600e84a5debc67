"""What the framework tells the live scheduler besides its decision: extension point durations
and each plugin's score per node. Neither may change a decision."""

from __future__ import annotations

from scheduler.cache import PodInfo
from scheduler.core import with_scoring
from scheduler.framework import CycleState, Framework, SchedulerConfig
from scheduler.framework.interfaces import ExtensionPoint
from scheduler.framework.scoring import ScoringStrategyType
from scheduler.framework.status import Code
from scheduler.plugins import DEFAULT_PLUGINS, REGISTRY
from tests.support.builders import make_node, make_pod
from tests.support.scheduling import make_cache

Observation = tuple[ExtensionPoint, Code, float]


def framework(*, observed: list[Observation] | None = None, nodes: int = 3) -> Framework:
    """LeastAllocated (NodeResourcesFit and DeviceShare scoring), so that score tables have
    several columns."""
    cache = make_cache(*(make_node(f"n{i}") for i in range(nodes)))

    def observe(point: ExtensionPoint, code: Code, seconds: float) -> None:
        assert observed is not None
        observed.append((point, code, seconds))

    return Framework.build(
        with_scoring(SchedulerConfig(), ScoringStrategyType.LEAST_ALLOCATED).profiles[0],
        registry=REGISTRY,
        default_plugins=DEFAULT_PLUGINS,
        cache=cache,
        observer=observe if observed is not None else None,
    )


def test_observer_sees_each_extension_point_of_a_successful_cycle() -> None:
    observed: list[Observation] = []
    fw = framework(observed=observed)
    info, state = PodInfo.of(make_pod("p", gpu_core=50, gpu_ratio=50)), CycleState()
    result = fw.schedule(state, info)
    assert result.node is not None
    fw.handle.cache.assume(info, result.node)
    assert fw.run_reserve(state, info, result.node).is_success
    assert fw.run_permit(state, info, result.node, now=0.0).is_success
    fw.run_post_bind(state, info, result.node)
    points = [(point, code) for point, code, _ in observed]
    assert points == [
        (ExtensionPoint.PRE_FILTER, Code.SUCCESS),
        (ExtensionPoint.FILTER, Code.SUCCESS),
        (ExtensionPoint.PRE_SCORE, Code.SUCCESS),
        (ExtensionPoint.SCORE, Code.SUCCESS),
        (ExtensionPoint.RESERVE, Code.SUCCESS),
        (ExtensionPoint.PERMIT, Code.SUCCESS),
        (ExtensionPoint.POST_BIND, Code.SUCCESS),
    ]
    assert all(seconds >= 0 for _, _, seconds in observed)


def test_observer_sees_rejections() -> None:
    observed: list[Observation] = []
    fw = framework(observed=observed)
    fw.schedule(CycleState(), PodInfo.of(make_pod("huge", nvidia_gpu=9)))
    fw.schedule(CycleState(), PodInfo.of(make_pod("bad", gpu_core=150)))
    points = [(point, code) for point, code, _ in observed]
    assert points == [
        (ExtensionPoint.PRE_FILTER, Code.SUCCESS),
        (ExtensionPoint.FILTER, Code.UNSCHEDULABLE),
        (ExtensionPoint.POST_FILTER, Code.UNSCHEDULABLE),  # Coscheduling's, for gang members
        (ExtensionPoint.PRE_FILTER, Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
    ]


def test_score_table_columns_add_up_to_the_totals_and_the_pick_is_the_best() -> None:
    fw = framework(nodes=4)
    cache = fw.handle.cache
    busy = make_pod("busy", node="n1", cpu=64_000)
    cache.add_pod(busy)
    pod = PodInfo.of(make_pod("p", cpu=1000, gpu_core=50, gpu_ratio=50))
    result = fw.schedule(CycleState(), pod, record_scores=True)
    table = result.scores
    assert table is not None and result.node is not None
    assert set(table.nodes) == {"n0", "n1", "n2", "n3"}
    assert {"NodeResourcesFit", "DeviceShare"} <= set(table.plugins)
    for row, total in zip(table.scores, table.totals, strict=True):
        assert sum(row) == total
    best = max(table.totals)
    assert table.totals[table.nodes.index(result.node)] == best
    assert table.totals[table.nodes.index("n1")] < best  # the busy node scores lower on CPU


def test_recording_scores_changes_no_decision() -> None:
    plain, recorded = framework(nodes=5), framework(nodes=5)
    for i in range(12):
        pod = make_pod(f"p{i}", gpu_core=25 * (1 + i % 4), gpu_ratio=25 * (1 + i % 4))
        placed = []
        for fw, record in ((plain, False), (recorded, True)):
            info, state = PodInfo.of(pod), CycleState()
            result = fw.schedule(state, info, record_scores=record)
            assert result.node is not None and (result.scores is not None) == record
            fw.handle.cache.assume(info, result.node)
            assert fw.run_reserve(state, info, result.node).is_success
            placed.append(result.node)
        assert placed[0] == placed[1]


def test_a_single_feasible_node_is_listed_without_scores() -> None:
    fw = framework(nodes=1)
    result = fw.schedule(CycleState(), PodInfo.of(make_pod("p", cpu=100)), record_scores=True)
    assert result.scores is not None and result.scores.nodes == ("n0",) and result.scores.plugins == ()
