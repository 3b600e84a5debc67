"""NodeAffinity: kube-scheduler's node selection rules (`nodeSelector`, required and preferred
node affinity), so Tessera places pods only where their authors allow.

Node labels rarely change while pods with the same selector keep arriving, so PreFilter computes
the set of matching nodes once per selector and reuses it until a Node object changes (the
cache's `static_generation`). The set narrows the search; Filter is then a set lookup.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

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
from scheduler.plugins.nodeaffinity import reasons
from scheduler.plugins.nodeaffinity.state import AffinityState

NAME = "NodeAffinity"
_MISMATCH = Status.unresolvable(reasons.MISMATCH, plugin=NAME)
_MEMO_LIMIT = 256


def matches(pod: PodInfo, node: NodeInfo) -> bool:
    """Does the node satisfy the pod's nodeSelector and required node affinity?"""
    if node.node is None:
        return False
    labels = node.node.labels
    if any(labels.get(k) != v for k, v in pod.pod.node_selector.items()):
        return False
    affinity = pod.pod.node_affinity
    return affinity is None or affinity.required_matches(labels, node.name)


class NodeAffinity(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin):
    name = NAME
    normalizes = True

    def __init__(self, handle: Handle) -> None:
        self._cache = handle.cache
        self._memo: dict[Hashable, tuple[int, frozenset[str]]] = {}

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        affinity = pod.pod.node_affinity
        required = affinity.required if affinity is not None else None
        if not pod.pod.node_selector and required is None:
            return None, SKIP
        key = (tuple(sorted(pod.pod.node_selector.items())), required)
        generation = self._cache.static_generation
        memo = self._memo.get(key)
        if memo is None or memo[0] != generation:
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            memo = (generation, frozenset(n.name for n in self._cache.nodes() if matches(pod, n)))
            self._memo[key] = memo
        state.write(NAME, AffinityState(memo[1]))
        # Narrowing pays for itself only when it rules out many nodes.
        selective = len(memo[1]) * 2 < len(self._cache.nodes())
        return (PreFilterResult(memo[1]) if selective else None), SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        found = state.read(NAME, AffinityState)
        fits = node.name in found.matching if found is not None else matches(pod, node)
        return SUCCESS if fits else _MISMATCH

    def memo_key(self, state: CycleState, pod: PodInfo) -> Hashable:
        return (tuple(sorted(pod.pod.node_selector.items())), pod.pod.node_affinity)

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        affinity = pod.pod.node_affinity
        return SUCCESS if affinity is not None and affinity.preferred else SKIP

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        affinity = pod.pod.node_affinity
        if affinity is None or node.node is None:
            return 0
        labels = node.node.labels
        return sum(weight for weight, term in affinity.preferred if term.matches(labels, node.name))

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        scoring.default_normalize(scores)


def new(args: Mapping[str, object] | None, handle: Handle) -> NodeAffinity:
    config.expect_no_args(NAME, args)
    return NodeAffinity(handle)
