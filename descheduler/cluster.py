"""`Cluster`: what the descheduler knows of the cluster, read from informer caches.

The arbitration rules and the migration steps read the same facts — a pod, its workload (a
ReplicaSet answers for its Deployment), the workload's pods, PodDisruptionBudgets, Reservations,
the PodMigrationJobs — and never the API directly, so each decision is a pure function of this
view and a unit test builds one by filling `kube.cache.Store`s. Objects stay raw dicts here
because a Reservation's template is the pod's spec verbatim; `apis` parses what a rule reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from apis.k8s.workloads import controller_of
from kube.cache import Store

__all__ = ["BY_NAMESPACE", "Cluster", "Obj", "WorkloadRef", "namespace_of"]

Obj = Mapping[str, Any]


def namespace_of(obj: Obj) -> list[str]:
    return [str((obj.get("metadata") or {}).get("namespace", ""))]


#: The index every namespaced store carries, so rules read one namespace, not the cluster.
BY_NAMESPACE: Final = {"namespace": namespace_of}


@dataclass(frozen=True, slots=True)
class WorkloadRef:
    """The object that recreates a pod: a Deployment for a ReplicaSet's pod, else the controller."""

    kind: str
    namespace: str
    name: str
    uid: str
    api_version: str = ""

    @property
    def key(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def _store() -> Store[Obj]:
    return Store(BY_NAMESPACE)


@dataclass(slots=True)
class Cluster:
    pods: Store[Obj] = field(default_factory=_store)
    replica_sets: Store[Obj] = field(default_factory=_store)
    deployments: Store[Obj] = field(default_factory=_store)
    stateful_sets: Store[Obj] = field(default_factory=_store)
    pdbs: Store[Obj] = field(default_factory=_store)
    #: Cluster-scoped, keyed by name.
    reservations: Store[Obj] = field(default_factory=Store)
    jobs: Store[Obj] = field(default_factory=Store)

    def pod(self, namespace: str, name: str) -> Obj | None:
        return self.pods.get(f"{namespace}/{name}")

    def workload_of(self, pod: Obj) -> WorkloadRef | None:
        """Who recreates `pod` once evicted; None when nothing does (a bare pod)."""
        ref = controller_of(pod)
        if ref is None:
            return None
        namespace = str(pod["metadata"].get("namespace") or "default")
        kind, name = str(ref.get("kind", "")), str(ref.get("name", ""))
        if kind == "ReplicaSet":
            rs = self.replica_sets.get(f"{namespace}/{name}")
            owner = controller_of(rs) if rs is not None else None
            if owner is not None and owner.get("kind") == "Deployment":
                return WorkloadRef("Deployment", namespace, str(owner.get("name")), str(owner.get("uid")), "apps/v1")
        return WorkloadRef(kind, namespace, name, str(ref.get("uid", "")), str(ref.get("apiVersion", "")))

    def workload_object(self, workload: WorkloadRef) -> Obj | None:
        store = {"Deployment": self.deployments, "StatefulSet": self.stateful_sets}.get(workload.kind)
        return store.get(f"{workload.namespace}/{workload.name}") if store is not None else None

    def pods_of(self, workload: WorkloadRef) -> list[Obj]:
        return [p for p in self.pods.by_index("namespace", workload.namespace) if self.workload_of(p) == workload]
