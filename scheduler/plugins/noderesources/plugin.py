"""NodeResourcesFit: the pod's CPU, memory, pod slot and extended resources (including
`kubernetes.io/batch-*`) must fit what the node has left; scoring spreads or packs them.

What a secondary scheduler must respect to be correct next to the default scheduler: the same
sums (`NodeInfo.requested`, kept incrementally by the cache), the same reasons
(`Insufficient cpu`, `Too many pods`) and the same score arithmetic (kube's non-zero defaults
for pods without CPU/memory requests). A request larger than the node's whole allocatable is
UnschedulableAndUnresolvable: no preemption can make it fit. Device resources are left to
DeviceShare (see `args.DEFAULT_IGNORED`). A node that does not publish a `pods` allocatable
is treated as having no pod limit (hand-written snapshots often omit it). An extended resource a
DeviceClass serves is not checked on a node that serves it through DRA (no allocatable of it:
`scheduler.framework.extended`), as kube's plugin leaves it to DynamicResources there.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from apis.extension import names
from scheduler.cache import NodeInfo, PodInfo
from scheduler.cache.nodeinfo import non_zero_requests
from scheduler.framework import extended
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterPlugin, Handle, PreFilterPlugin, PreFilterResult, ScorePlugin
from scheduler.framework.status import SUCCESS, Code, Shortfall, Status
from scheduler.plugins.noderesources import reasons
from scheduler.plugins.noderesources.args import NodeResourcesFitArgs
from scheduler.plugins.noderesources.state import FitState

NAME = "NodeResourcesFit"
_TOO_MANY_PODS = Status.unschedulable(reasons.TOO_MANY_PODS, plugin=NAME)


class NodeResourcesFit(PreFilterPlugin, FilterPlugin, ScorePlugin):
    name = NAME

    def __init__(self, args: NodeResourcesFitArgs, classes: extended.ExtendedClasses | None = None) -> None:
        self.args = args
        self._score_names = args.scoring.names
        self._classes = classes if classes is not None else extended.ExtendedClasses()

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        requests = pod.requests
        checks = tuple(
            (name, amount)
            for name, amount in sorted(requests.items())
            if amount > 0 and name != names.PODS and not self.args.ignores(name)
        )
        cpu, memory = non_zero_requests(requests)
        score_request = tuple(
            cpu if n == names.CPU else memory if n == names.MEMORY else requests.get(n, 0) for n in self._score_names
        )
        mapped = self._classes.mapped(pod)
        dra = tuple(sorted((n, c) for n, c in mapped.items() if any(n == name for name, _ in checks)))
        state.write(NAME, FitState(checks, score_request, dra))
        return None, SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        fit = state.read(NAME, FitState)
        if fit is None:  # PreFilter did not run (a caller bug); compute as if it had
            self.pre_filter(state, pod)
            fit = state.read(NAME, FitState)
            assert fit is not None
        allocatable = node.allocatable
        max_pods = allocatable.get(names.PODS)
        if max_pods is not None and len(node.pods) >= max_pods:
            return _TOO_MANY_PODS
        requested = node.requested
        missing = None
        by_dra = extended.dra_served(dict(fit.dra), node) if fit.dra else {}
        for name, amount in fit.checks:
            if name in by_dra:
                continue
            free = allocatable.get(name, 0) - requested.get(name, 0)
            if amount > free:
                if missing is None:
                    missing = []
                missing.append(Shortfall("node", name, max(free, 0), amount))
        if missing is None:
            return SUCCESS
        beyond_node = any(s.needed > allocatable.get(s.resource, 0) for s in missing)
        return Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE if beyond_node else Code.UNSCHEDULABLE,
            tuple(reasons.INSUFFICIENT.format(resource=s.resource) for s in missing),
            NAME,
            tuple(missing),
        )

    def memo_key(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        fit = state.read(NAME, FitState)
        return (fit.checks, fit.score_request, fit.dra) if fit is not None else None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        fit = state.read(NAME, FitState)
        if fit is None:
            return 0
        allocatable = node.allocatable
        requested = []
        for name, amount in zip(self._score_names, fit.score_request, strict=True):
            if name == names.CPU:
                requested.append(node.non_zero_requested[0] + amount)
            elif name == names.MEMORY:
                requested.append(node.non_zero_requested[1] + amount)
            else:
                requested.append(node.requested.get(name, 0) + amount)
        return self.args.scoring.score(requested, [allocatable.get(n, 0) for n in self._score_names])


def new(args: Mapping[str, object] | None, handle: Handle) -> NodeResourcesFit:
    """Raises ConfigError for bad arguments."""
    classes = handle.scheduler_object(extended.KEY, extended.ExtendedClasses, extended.ExtendedClasses)
    return NodeResourcesFit(NodeResourcesFitArgs.from_dict(args), classes)
