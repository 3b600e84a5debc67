"""`Arbiter`: the two gates every migration passes, built from the rules and the settings.

`admit` runs before a job starts (Pending → Running): namespace filter, the
per-node/namespace/workload caps, the workload's availability and its budgets. A
refused job stays Pending with the rule as its reason, and is asked again on the next sync
until its ttl runs out. `may_evict` runs again right before the eviction — the Reservation may
have taken a while and the workload may have lost a pod meanwhile — and adds the rate limit,
whose token is spent only when the eviction is sent (`evicted`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from descheduler.arbitration import rules
from descheduler.arbitration.rules import InFlight, Refusal
from descheduler.arbitration.tokenbucket import TokenBucket
from descheduler.cluster import Cluster, Obj
from descheduler.settings import ArbitrationSettings

__all__ = ["Arbiter"]


class Arbiter:
    def __init__(self, settings: ArbitrationSettings, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self._bucket = TokenBucket(settings.eviction_qps, settings.eviction_burst, clock=clock)

    def admit(self, job: str, pod: Obj, cluster: Cluster, in_flight: Sequence[InFlight]) -> Refusal | None:
        s = self.settings
        meta = pod.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        workload = cluster.workload_of(pod)
        return (
            rules.check_namespace(namespace, include=s.include_namespaces, exclude=s.exclude_namespaces)
            or rules.check_caps(
                job,
                namespace=namespace,
                node=str((pod.get("spec") or {}).get("nodeName") or ""),
                workload=workload,
                in_flight=in_flight,
                max_per_node=s.max_per_node,
                max_per_namespace=s.max_per_namespace,
                max_per_workload=s.max_per_workload,
            )
            or rules.check_workload_availability(pod, workload, cluster, in_flight, job=job)
            or rules.check_pdb(pod, cluster)
        )

    def may_evict(self, job: str, pod: Obj, cluster: Cluster, in_flight: Sequence[InFlight]) -> Refusal | None:
        workload = cluster.workload_of(pod)
        refusal = rules.check_workload_availability(pod, workload, cluster, in_flight, job=job) or rules.check_pdb(
            pod, cluster
        )
        if refusal is not None:
            return refusal
        wait = self._bucket.wait_seconds()
        if wait > 0:
            return Refusal(
                "rate",
                f"eviction rate limit ({self.settings.eviction_qps:g}/s, burst {self.settings.eviction_burst}): "
                f"next eviction in {wait:.1f}s",
            )
        return None

    def evicted(self) -> None:
        """An eviction was sent: spend its token."""
        self._bucket.take()
