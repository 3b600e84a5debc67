"""The quota reconciler on a recording API, its events and a fake clock: what the reconciler and
circuit-breaker tests drive, with two teams' quotas and GPU pods to charge to them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry

from apis.crds.elasticquota import ElasticQuota
from apis.extension import names
from apis.k8s.core import Pod
from controller.quotas.metrics import QuotaMetrics
from controller.quotas.reconciler import (
    QuotaReconciler,
)
from controller.quotas.settings import QuotaSettings
from controller.runtime import Malformed, Result
from kube.cache import Store
from kube.errors import TooManyRequests
from kube.events import ObjectReference
from kube.quotas import QuotaManager
from tests.support.builders import make_pod, quota_cr
from tests.support.clocks import FakeClock

GPU = names.GPU_CORE


@dataclass
class RecordingAPI:
    """Answers patches and evictions like the API server, keeping what was sent."""

    patches: list[tuple[str, str, Any]] = field(default_factory=list)
    evictions: list[str] = field(default_factory=list)
    rv: int = 100
    refuse: set[str] = field(default_factory=set)

    def patch(self, name: str, patch: Any, *, namespace: str = "", subresource: str = "") -> dict[str, Any]:
        self.patches.append((f"{namespace}/{name}", subresource, patch))
        self.rv += 1
        return {"metadata": {"name": name, "resourceVersion": str(self.rv)}}

    def post(self, name: str, subresource: str, body: dict[str, Any], *, namespace: str = "") -> dict[str, Any]:
        assert subresource == "eviction" and body["kind"] == "Eviction"
        assert body["deleteOptions"]["preconditions"]["uid"]
        if name in self.refuse:
            raise TooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", status=429)
        self.evictions.append(f"{namespace}/{name}")
        return {"kind": "Status", "status": "Success"}


@dataclass
class Events:
    seen: list[tuple[str, str, str, str]] = field(default_factory=list)

    def normal(self, ref: ObjectReference, reason: str, message: str) -> None:
        self.seen.append(("Normal", f"{ref.namespace}/{ref.name}", reason, message))

    def warning(self, ref: ObjectReference, reason: str, message: str) -> None:
        self.seen.append(("Warning", f"{ref.namespace}/{ref.name}", reason, message))

    def reasons(self) -> list[str]:
        return [r for _, _, r, _ in self.seen]


class Harness:
    def __init__(self, clock: FakeClock, settings: QuotaSettings | None = None) -> None:
        self.quotas: Store[ElasticQuota | Malformed] = Store()
        self.pods: Store[Pod] = Store()
        self.manager = QuotaManager()
        self.manager.set_cluster_total({GPU: 800})
        self.api = RecordingAPI()
        self.events = Events()
        self.registry = CollectorRegistry()
        self.clock = clock
        self.reconciler = QuotaReconciler(
            self.quotas,
            self.pods,
            self.manager,
            api=self.api,
            evictor=self.api,
            recorder=self.events,
            metrics=QuotaMetrics(self.registry),
            settings=settings or QuotaSettings(reclaim_grace=60, eviction_qps=1, eviction_burst=2),
            clock=clock,
            now=lambda: "2026-01-01T00:00:00Z",
        )
        #: The keys the watches would have queued.
        self.queued: list[str] = []

    # Each change reaches the manager, then the reconciler's `observe`, as the watches deliver it.
    def put_quota(self, quota: ElasticQuota, rv: str = "1") -> None:
        quota = dataclasses.replace(quota, meta=dataclasses.replace(quota.meta, resource_version=rv))
        self.quotas.upsert(quota.meta.key, rv, quota)
        self.manager.set_quota(quota)
        self.queued += self.reconciler.observe()

    def put_pod(self, pod: Pod) -> None:
        self.pods.upsert(pod.key, "1", pod)
        self.manager.update_pod(pod)
        self.queued += self.reconciler.observe()

    def remove_pod(self, key: str) -> None:
        pod = self.pods.delete(key)
        assert pod is not None
        self.manager.remove_pod(pod)
        self.queued += self.reconciler.observe()

    def apply_writes(self, key: str) -> None:
        """What the informer would deliver after our patches: the quota as written."""
        quota = self.quotas.get(key)
        assert isinstance(quota, ElasticQuota)
        annotations = dict(quota.meta.annotations)
        used, conditions = quota.used, quota.conditions
        for target, sub, patch in self.api.patches:
            if target != key:
                continue
            if sub == "status":
                raw = {"metadata": {"name": "x"}, "spec": {}, "status": patch["status"]}
                if "used" in patch["status"]:
                    raw["status"]["used"] = {k: v for k, v in patch["status"]["used"].items() if v is not None}
                parsed = ElasticQuota.from_dict(raw)
                used = parsed.used if "used" in patch["status"] else used
                conditions = parsed.conditions
            else:
                annotations.update(patch["metadata"]["annotations"])
        meta = dataclasses.replace(quota.meta, annotations=annotations, resource_version=str(self.api.rv))
        quota = dataclasses.replace(quota, meta=meta, used=used, conditions=conditions)
        self.quotas.upsert(key, meta.resource_version, quota)

    def reconcile(self, key: str) -> Result:
        return self.reconciler.reconcile(key)

    def sample(self, name: str, labels: dict[str, str]) -> float | None:
        return self.registry.get_sample_value(name, labels)


def teams(h: Harness) -> None:
    for team in ("team-a", "team-b"):
        h.put_quota(quota_cr(team, min={GPU: 400}, max={GPU: 800}, namespace=team))


def gpu_pod(name: str, namespace: str, *, node: str = "n1", priority: int = 0, minute: int = 0, **kw: Any) -> Pod:
    pod = make_pod(name, namespace=namespace, node=node, gpu_core=100, **kw)
    meta = dataclasses.replace(pod.meta, creation_timestamp=f"2026-01-01T00:{minute:02d}:00Z")
    return dataclasses.replace(pod, meta=meta, priority=priority)
