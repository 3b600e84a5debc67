"""The node lifecycle controller's I/O: reads every node Lease from the API server itself, keeps
the probes between passes, and hands one pass to `nodelifecycle.sync_nodes`.

The Leases are listed on each pass rather than cached by an informer so that a pass also tells
whether the API server can be read now: a failed list marks it unreachable, and the first list
that works again restarts every node's grace (`reachable_since`), as an informer's stale cache
could not tell.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence

from apis.extension import names
from kube import errors
from kube.client import Client
from kube.resources import LEASES
from kubecontrollers.nodelifecycle import Probe, observe, sync_nodes
from kubecontrollers.plan import Obj, Plan

__all__ = ["NodeMonitor"]

log = logging.getLogger(__name__)


class NodeMonitor:
    """One per process; `sync` is called by the engine's single worker (not thread-safe)."""

    def __init__(
        self,
        client: Client,
        *,
        grace_s: float,
        period_s: float,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._leases = client.resource(LEASES)
        self._grace = grace_s
        self._period = period_s
        self._clock = clock
        self._wall = wall
        self._probes: dict[str, Probe] = {}
        self._reachable_since = clock()
        self._unreachable = False

    def sync(self, nodes: Sequence[Obj], pods_by_node: Mapping[str, Sequence[Obj]]) -> Plan:
        """One pass over `nodes` (cached) and their pods; looks again within the monitor period."""
        try:
            leases = self._leases.list(namespace=names.NAMESPACE_NODE_LEASE).items
        except errors.APIError as e:
            if not self._unreachable:
                log.warning("Cannot list node Leases; no node is judged meanwhile", extra={"error": str(e)})
            self._unreachable = True
            return Plan(requeue_after=self._period)
        now = self._clock()
        if self._unreachable:
            log.info("Node Leases readable again; every node gets a whole grace", extra={"grace_s": self._grace})
            self._unreachable = False
            self._reachable_since = now
        by_node = {str((lease.get("metadata") or {}).get("name", "")): lease for lease in leases}
        self._probes = observe(self._probes, nodes, by_node, now)
        plan = sync_nodes(
            nodes,
            pods_by_node,
            self._probes,
            now=now,
            reachable_since=self._reachable_since,
            grace_s=self._grace,
            wall=self._wall(),
        )
        plan.later(self._period)
        plan.track = False  # each pass recomputes everything; its writes are idempotent
        return plan
