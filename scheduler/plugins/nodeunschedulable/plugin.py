"""NodeUnschedulable: respect `spec.unschedulable` (kubectl cordon), as kube-scheduler does.

A pod that tolerates the `node.kubernetes.io/unschedulable:NoSchedule` taint may still go there
(DaemonSet pods do).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from apis.extension import names
from apis.k8s.core import Taint
from scheduler.cache import NodeInfo, PodInfo
from scheduler.framework import config
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterPlugin, Handle, PreFilterPlugin, PreFilterResult
from scheduler.framework.status import SKIP, SUCCESS, Status
from scheduler.plugins.nodeunschedulable import reasons

NAME = "NodeUnschedulable"
_CORDON = Taint(names.TAINT_NODE_UNSCHEDULABLE, effect=names.TAINT_EFFECT_NO_SCHEDULE)
_REJECT = Status.unresolvable(reasons.UNSCHEDULABLE, plugin=NAME)


class NodeUnschedulable(PreFilterPlugin, FilterPlugin):
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self._cache = handle.cache

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        return None, (SUCCESS if self._cache.cordoned_nodes else SKIP)  # nothing cordoned: nothing to check

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if node.node is None or not node.node.unschedulable:
            return SUCCESS
        if any(t.tolerates(_CORDON) for t in pod.pod.tolerations):
            return SUCCESS
        return _REJECT

    def memo_key(self, state: CycleState, pod: PodInfo) -> Hashable:
        return pod.pod.tolerations


def new(args: Mapping[str, object] | None, handle: Handle) -> NodeUnschedulable:
    config.expect_no_args(NAME, args)
    return NodeUnschedulable(handle)
