"""The safety rules, each a pure function of the cluster view: None when the migration may go on,
else a `Refusal` naming the rule (the `rule` label of `tessera_descheduler_refusals_total`).

Rules, in the order they are asked:

- `namespace`: the pod's namespace is excluded, or not among the included ones.
- `controller`: nothing would recreate the pod (no controller reference); this one fails the job
  (ForbiddenMigratePod, `migration.steps`) instead of holding it, as no wait can fix it.
- `node` / `namespace-cap` / `workload`: too many migrations already running from the pod's node,
  in its namespace, or of its workload (caps; 0 = none).
- `workload-unavailable`: evicting the pod would leave its Deployment or StatefulSet with more
  pods unavailable than its `maxUnavailable` (pods not Ready, missing, or about to be evicted by
  another running migration all count).
- `pdb`: a PodDisruptionBudget selecting the pod allows no disruption now (the Eviction API
  enforces the same, this only avoids asking in vain).
- `rate`: the eviction token bucket is empty (asked last, only when everything else allows).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from apis.errors import ValidationError
from apis.k8s.workloads import is_pod_active, is_pod_ready, label_selector_matches, scaled_value
from descheduler.cluster import Cluster, Obj, WorkloadRef

__all__ = [
    "RULES",
    "InFlight",
    "Refusal",
    "check_caps",
    "check_namespace",
    "check_pdb",
    "check_workload_availability",
    "max_unavailable",
]

#: Every rule name, so each refusal counter exists (at 0) from the start.
RULES: Final = (
    "namespace",
    "controller",
    "node",
    "namespace-cap",
    "workload",
    "workload-unavailable",
    "pdb",
    "rate",
)


@dataclass(frozen=True, slots=True)
class Refusal:
    rule: str
    message: str

    @property
    def reason(self) -> str:
        """The job's `status.reason` while held: `Refused` plus the rule (`RefusedWorkloadUnavailable`)."""
        return "Refused" + "".join(part.capitalize() for part in self.rule.split("-"))


@dataclass(frozen=True, slots=True)
class InFlight:
    """A migration that has started and not finished: what the caps count."""

    job: str
    namespace: str
    #: The node its pod runs on; "" once the pod is gone (it no longer weighs on the node).
    node: str
    workload: WorkloadRef | None
    #: The pod it will evict, while it has not been evicted yet ("" after).
    pending_eviction: str


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def check_namespace(namespace: str, *, include: Iterable[str], exclude: Iterable[str]) -> Refusal | None:
    included = tuple(include)
    if namespace in tuple(exclude):
        return Refusal("namespace", f"namespace {namespace} is excluded from descheduling")
    if included and namespace not in included:
        return Refusal("namespace", f"namespace {namespace} is not among the included ({', '.join(included)})")
    return None


def check_caps(
    job: str,
    *,
    namespace: str,
    node: str,
    workload: WorkloadRef | None,
    in_flight: Iterable[InFlight],
    max_per_node: int,
    max_per_namespace: int,
    max_per_workload: int,
) -> Refusal | None:
    others = [m for m in in_flight if m.job != job]
    if max_per_node and node:
        on_node = sum(1 for m in others if m.node == node)
        if on_node >= max_per_node:
            return Refusal("node", f"{on_node} migrations already running from node {node} (max {max_per_node})")
    if max_per_namespace:
        in_namespace = sum(1 for m in others if m.namespace == namespace)
        if in_namespace >= max_per_namespace:
            return Refusal(
                "namespace-cap",
                f"{in_namespace} migrations already running in namespace {namespace} (max {max_per_namespace})",
            )
    if max_per_workload and workload is not None:
        of_workload = sum(1 for m in others if m.workload == workload)
        if of_workload >= max_per_workload:
            return Refusal(
                "workload", f"{of_workload} migrations of {workload.key} already running (max {max_per_workload})"
            )
    return None


def max_unavailable(workload: WorkloadRef, obj: Obj) -> tuple[int, int] | None:
    """(replicas, maxUnavailable) of a Deployment or StatefulSet as Kubernetes computes them, or
    None for kinds without the notion. Raises ValidationError for a malformed value."""
    spec = obj.get("spec") or {}
    replicas = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
    if workload.kind == "Deployment":
        strategy = spec.get("strategy") or {}
        if strategy.get("type") == "Recreate":
            return replicas, replicas
        value = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", "25%")
    elif workload.kind == "StatefulSet":
        value = ((spec.get("updateStrategy") or {}).get("rollingUpdate") or {}).get("maxUnavailable", 1)
    else:
        return None
    return replicas, scaled_value(value, replicas, round_up=False)


def check_workload_availability(
    pod: Obj, workload: WorkloadRef | None, cluster: Cluster, in_flight: Iterable[InFlight], *, job: str
) -> Refusal | None:
    """Evicting `pod` must not leave its workload with more unavailable than maxUnavailable."""
    if workload is None:
        return None
    obj = cluster.workload_object(workload)
    if obj is None:
        return None  # a ReplicaSet or Job of its own: only the caps apply
    try:
        limits = max_unavailable(workload, obj)
    except ValidationError as e:
        return Refusal("workload-unavailable", f"{workload.key}: maxUnavailable {e.reason}")
    if limits is None:
        return None
    replicas, allowed = limits
    about_to_go = {m.pending_eviction for m in in_flight if m.job != job and m.pending_eviction}
    pods = [p for p in cluster.pods_of(workload) if is_pod_active(p)]
    ready = sum(1 for p in pods if is_pod_ready(p) and _key(p) not in about_to_go)
    unavailable = max(0, replicas - ready)
    after = unavailable + (1 if is_pod_ready(pod) and _key(pod) not in about_to_go else 0)
    if after > allowed:
        return Refusal(
            "workload-unavailable",
            f"{workload.key} has {unavailable} of {replicas} pods unavailable; evicting {_key(pod)} would make "
            f"{after}, more than its maxUnavailable {allowed}",
        )
    return None


def check_pdb(pod: Obj, cluster: Cluster) -> Refusal | None:
    """A budget that selects the pod and, as its status says, allows no disruption now."""
    namespace = str(_meta(pod).get("namespace") or "default")
    labels = _meta(pod).get("labels") or {}
    for pdb in cluster.pdbs.by_index("namespace", namespace):
        if not label_selector_matches((pdb.get("spec") or {}).get("selector"), labels):
            continue
        status = pdb.get("status") or {}
        allowed = int(status.get("disruptionsAllowed") or 0)
        if allowed <= 0:
            name = _meta(pdb).get("name")
            return Refusal("pdb", f"PodDisruptionBudget {namespace}/{name} allows no disruption now")
    return None


def _key(pod: Obj) -> str:
    return f"{_meta(pod).get('namespace') or 'default'}/{_meta(pod).get('name')}"
