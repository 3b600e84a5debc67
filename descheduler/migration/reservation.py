"""The Reservation a ReservationFirst migration creates for its pod's replacement (pure).

Named after the job (`pmj-<job>`), so a descheduler killed between creating it and recording
that in the job's status finds and adopts it instead of creating a second one. Its owner is the
pod's controller reference plus namespace — the replacement the controller creates matches it —
and its template is the pod as it runs: labels, the annotations that ask for devices, and the
spec minus `nodeName` (the Reservation is placed anew). The scheduling results of the old pod
(device and reservation allocations) are not copied: they describe the old placement. Its ttl is
the job's remaining time plus a margin, so a Reservation never outlives its job by long.
"""

from __future__ import annotations

from typing import Any, Final

from apis.crds import reservation as rsv
from apis.crds.podmigrationjob import PodMigrationJob
from apis.extension import names
from apis.k8s.duration import format_duration
from apis.k8s.workloads import controller_of
from descheduler.cluster import Obj

__all__ = ["build", "name_for"]

#: Annotations that record where and on what the old pod was placed: never copied.
_PLACEMENT_ANNOTATIONS: Final = frozenset({names.ANNOTATION_DEVICE_ALLOCATED, names.ANNOTATION_RESERVATION_ALLOCATED})
_MAX_NAME: Final = 253


def name_for(job: str) -> str:
    return f"pmj-{job}"[:_MAX_NAME]


def name_for_job(job: PodMigrationJob) -> str:
    """The job's Reservation: the one its `reservationRef` names, else the one it creates."""
    return job.reservation_ref.name if job.reservation_ref is not None else name_for(job.name)


def made_by_job(job: PodMigrationJob) -> bool:
    """Whether the job's Reservation is one the descheduler creates (and so rolls back): no
    `spec.reservationOptions.reservationRef`, or the ref the descheduler wrote back after creating
    it, as Koordinator's controller does. A ref to another name is the user's Reservation."""
    return job.reservation_ref is None or job.reservation_ref.name == name_for(job.name)


def build(job: Obj, pod: Obj, *, ttl_seconds: float, target_node: str = "") -> dict[str, Any]:
    """The Reservation for `job` (a PodMigrationJob, raw) moving `pod` (raw); the pod must have a
    controller (the caller refuses those without). `target_node`: the node it must be placed on
    (a planner's choice), added to the template's required node affinity; without one, the
    pod's own node is excluded there, as Koordinator's controller does (`metadata.name NotIn`):
    a migration moves the pod elsewhere."""
    job_meta, pod_meta = job.get("metadata") or {}, pod.get("metadata") or {}
    namespace = str(pod_meta.get("namespace") or "default")
    controller = controller_of(pod)
    if controller is None:
        raise ValueError(f"pod {namespace}/{pod_meta.get('name')} has no controller")
    owner = {
        "apiVersion": controller.get("apiVersion", ""),
        "kind": controller.get("kind", ""),
        "name": controller.get("name", ""),
        "uid": controller.get("uid", ""),
        "controller": True,
        "namespace": namespace,
    }
    spec = {k: v for k, v in (pod.get("spec") or {}).items() if k != "nodeName"}
    current = str((pod.get("spec") or {}).get("nodeName") or "")
    if target_node:
        spec = _with_node_field(spec, "In", target_node)
    elif current:
        spec = _with_node_field(spec, "NotIn", current)
    annotations = {k: v for k, v in (pod_meta.get("annotations") or {}).items() if k not in _PLACEMENT_ANNOTATIONS}
    template = {
        "metadata": {"namespace": namespace, "labels": dict(pod_meta.get("labels") or {}), "annotations": annotations},
        "spec": spec,
    }
    job_name = str(job_meta.get("name"))
    return {
        "apiVersion": rsv.GROUP_VERSION,
        "kind": rsv.KIND,
        "metadata": {
            "name": name_for(job_name),
            "labels": {names.LABEL_MIGRATION_JOB: job_name},
            "annotations": {names.ANNOTATION_MIGRATION_POD: f"{namespace}/{pod_meta.get('name')}"},
            "ownerReferences": [
                {
                    "apiVersion": names.POD_MIGRATION_JOBS.api_version,
                    "kind": names.POD_MIGRATION_JOBS.kind,
                    "name": job_name,
                    "uid": job_meta.get("uid", ""),
                    "controller": True,
                    "blockOwnerDeletion": False,
                }
            ],
        },
        "spec": {
            "template": template,
            "owners": [{"controller": owner}],
            "ttl": format_duration(max(1.0, ttl_seconds)),
            "allocateOnce": True,
        },
    }


def _with_node_field(spec: Obj, operator: str, node: str) -> dict[str, Any]:
    """`spec` with a required node affinity `metadata.name OPERATOR [node]`, ANDed into each of
    the pod's own required terms (terms are ORed, the fields inside one term ANDed)."""
    field = {"key": "metadata.name", "operator": operator, "values": [node]}
    affinity = dict(spec.get("affinity") or {})
    node_affinity = dict(affinity.get("nodeAffinity") or {})
    required = dict(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = [dict(t) for t in required.get("nodeSelectorTerms") or ()] or [{}]
    for term in terms:
        term["matchFields"] = [*(term.get("matchFields") or ()), field]
    required["nodeSelectorTerms"] = terms
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
    affinity["nodeAffinity"] = node_affinity
    return {**spec, "affinity": affinity}
