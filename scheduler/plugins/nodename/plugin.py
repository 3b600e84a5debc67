"""NodeName: honour `spec.nodeName`, as kube-scheduler does, so a secondary scheduler never places
a pod elsewhere than where its author pinned it."""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from scheduler.cache import NodeInfo, PodInfo
from scheduler.framework import config
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterPlugin, Handle, PreFilterPlugin, PreFilterResult
from scheduler.framework.status import SKIP, SUCCESS, Status
from scheduler.plugins.nodename import reasons

NAME = "NodeName"
_MISMATCH = Status.unresolvable(reasons.MISMATCH, plugin=NAME)


class NodeName(PreFilterPlugin, FilterPlugin):
    name = NAME

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        if not pod.pod.node_name:
            return None, SKIP
        return PreFilterResult(frozenset({pod.pod.node_name})), SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return SUCCESS if node.name == pod.pod.node_name else _MISMATCH

    def memo_key(self, state: CycleState, pod: PodInfo) -> Hashable:
        return pod.pod.node_name


def new(args: Mapping[str, object] | None, handle: Handle) -> NodeName:
    config.expect_no_args(NAME, args)
    return NodeName()
