"""TaintToleration: kube-scheduler's taint rules, so Tessera respects what cluster admins set.

Filter rejects a node with a NoSchedule or NoExecute taint the pod does not tolerate. Score
counts PreferNoSchedule taints the pod does not tolerate, reversed at normalization (fewer is
better). When no node of the cluster has a taint of the kind either step looks at, every node
would pass or score alike, so PreFilter/PreScore skip the step (the cache counts taints).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

from apis.extension import names
from apis.k8s.core import Taint, Toleration
from scheduler.cache import NodeInfo, PodInfo
from scheduler.framework import config, scoring
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import (
    FilterPlugin,
    Handle,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
)
from scheduler.framework.status import SKIP, SUCCESS, Status
from scheduler.plugins.tainttoleration import reasons

NAME = "TaintToleration"
_HARD_EFFECTS = frozenset({names.TAINT_EFFECT_NO_SCHEDULE, names.TAINT_EFFECT_NO_EXECUTE})


def untolerated(taint: Taint, tolerations: Sequence[Toleration]) -> bool:
    return not any(t.tolerates(taint) for t in tolerations)


class TaintToleration(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin):
    name = NAME
    normalizes = True

    def __init__(self, handle: Handle) -> None:
        self._cache = handle.cache

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        hard = sum(self._cache.tainted_nodes(effect) for effect in _HARD_EFFECTS)
        return None, (SUCCESS if hard else SKIP)  # no node taints anything away: nothing to check

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if node.node is None or not node.node.taints:
            return SUCCESS
        tolerations = pod.pod.tolerations
        for taint in node.node.taints:
            if taint.effect in _HARD_EFFECTS and untolerated(taint, tolerations):
                return Status.unresolvable(
                    reasons.UNTOLERATED_TAINT.format(key=taint.key, value=taint.value), plugin=NAME
                )
        return SUCCESS

    def memo_key(self, state: CycleState, pod: PodInfo) -> Hashable:
        return pod.pod.tolerations

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        return SUCCESS if self._cache.tainted_nodes(names.TAINT_EFFECT_PREFER_NO_SCHEDULE) else SKIP

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        if node.node is None:
            return 0
        tolerations = pod.pod.tolerations
        return sum(
            1
            for taint in node.node.taints
            if taint.effect == names.TAINT_EFFECT_PREFER_NO_SCHEDULE and untolerated(taint, tolerations)
        )

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        scoring.default_normalize(scores, reverse=True)


def new(args: Mapping[str, object] | None, handle: Handle) -> TaintToleration:
    config.expect_no_args(NAME, args)
    return TaintToleration(handle)
