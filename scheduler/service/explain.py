"""Why a pod fits where it fits, and not elsewhere: every Filter on every node, against the cache now.

A scheduling cycle stops at the first Filter that rejects a node, and at enough feasible nodes;
an explanation runs them all, so a user sees every reason a node says no ("TaintToleration:
untolerated taint" *and* "DeviceShare: Insufficient gpu devices") and, for the nodes that miss by
resources alone, exactly what is missing. A node holding Reservations for other owners says so
("reserved by reservation X (...) for its owners"); for an owner, its Reservation's resources
count as free, as in the cycle. The one-line summary is the same the cycle would
write into the pod's condition (first rejection per node), so the two never disagree.

Pure: reads the cache and runs the profile's PreFilter and Filter plugins; the caller holds the
cache lock. `scheduler.service.inspector` adds what the queue knows about the pod.
"""

from __future__ import annotations

from dataclasses import dataclass

from apis.k8s import resources
from apis.k8s.core import Pod
from scheduler.cache import ClusterCache, PodInfo
from scheduler.framework import CycleState, Diagnosis, Framework, Shortfall, Status
from scheduler.framework.shared import NOMINATED_RESERVATIONS
from scheduler.framework.status import Code
from scheduler.plugins import reservation

__all__ = ["Evaluation", "NodeVerdict", "evaluate"]


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    """Every rejection of the pod by one node (in the order the profile runs its filters)."""

    node: str
    rejections: tuple[Status, ...]


@dataclass(frozen=True, slots=True)
class Evaluation:
    total_nodes: int
    #: kube-scheduler's one line: "0/12 nodes are available: …", or how many nodes fit.
    message: str
    #: Set when PreFilter rejected the pod (an invalid request, a malformed hint): no node was asked.
    rejected: Status | None = None
    #: Nodes that reject the pod, by name.
    verdicts: tuple[NodeVerdict, ...] = ()
    #: Nodes the pod fits on now, by name.
    fits: tuple[str, ...] = ()
    #: Nodes that miss by resources alone, closest first, with what they lack.
    nearest: tuple[tuple[str, tuple[Shortfall, ...]], ...] = ()


def evaluate(framework: Framework, cache: ClusterCache, pod: Pod, *, nearest: int = 3) -> Evaluation:
    """Run PreFilter, then every Filter on every node, for a pod that is not in the cache."""
    nodes = cache.nodes()
    total = len(nodes)
    info = PodInfo.of(pod)
    state = CycleState(dry_run=True)
    _, status = framework.run_pre_filter(state, info)
    if not status.is_success:
        return Evaluation(total, Diagnosis(pre_filter_status=status).summary(total), rejected=status)
    verdicts = []
    fits = []
    first = Diagnosis()
    merged = Diagnosis()
    for node in nodes:
        rejections = tuple(framework.diagnose_node(state, info, framework.node_view(state, node)))
        if not rejections:
            fits.append(node.name)
            continue
        reserved = _reserved_for_others(cache, state, node.name)
        verdicts.append(NodeVerdict(node.name, rejections + reserved))
        first.node_statuses[node.name] = rejections[0]
        merged.node_statuses[node.name] = _merge(rejections)
    if fits:
        message = f"{len(fits)}/{total} nodes fit the pod now"
    elif total:
        message = first.summary(total)
    else:
        message = "no nodes available to schedule pods"
    return Evaluation(total, message, None, tuple(verdicts), tuple(fits), tuple(merged.nearest(nearest)))


def _reserved_for_others(cache: ClusterCache, state: CycleState, node: str) -> tuple[Status, ...]:
    """Why resources the node seems to have are not the pod's: Reservations held there for
    other owners (their requests named), appended to a node that rejects the pod."""
    mine = (state.get(NOMINATED_RESERVATIONS) or {}).get(node)
    out = []
    for held in cache.reservations_on(node):
        if mine is not None and held.uid == mine.uid:
            continue
        what = ", ".join(f"{k}={v}" for k, v in resources.format_list(held.pod.requests).items())
        reason = f"reserved by reservation {held.name} ({what}) for its owners"
        if held.reservation.pre_allocated:
            over = ", ".join(f"{r.namespace}/{r.name}" for r in held.reservation.pre_allocated)
            reason += f", pre-allocated from running pod(s) {over} (counted once: theirs is its own)"
        out.append(Status(Code.UNSCHEDULABLE, (reason,), reservation.NAME))
    return tuple(out)


def _merge(rejections: tuple[Status, ...]) -> Status:
    """One status per node for `Diagnosis.nearest`: a near miss only if every rejection is a
    shortfall of resources (a taint or an affinity cannot be made up by freeing devices)."""
    head = rejections[0]
    only_resources = all(r.shortfalls for r in rejections)
    shortfalls = tuple(s for r in rejections for s in r.shortfalls) if only_resources else ()
    return Status(head.code, tuple(x for r in rejections for x in r.reasons), head.plugin, shortfalls)
