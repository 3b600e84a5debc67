"""GPU defragmentation: pending pods that need whole GPUs no node has free get room made for
them by migrating a few pods, as the scheduler's planner says (`PlanMigrations`).

Every `interval` seconds, for each pod that has been unschedulable for at least `min_pending`
seconds and asks for at least `min_whole_gpus` whole GPUs, and that no unfinished job of ours
already serves (one plan per pending pod at a time: no new plan while its jobs run, nor for
`min_pending` seconds after they end, so the scheduler can place the pod first), the
strategy asks the planner — excluding pods that are already being migrated — and creates one
ReservationFirst PodMigrationJob per migration of a feasible plan. Each job carries why
(`tessera.dev/migration-reason`), whom it serves (`tessera.dev/migration-for`, the pending pod's
uid) and where the replacement goes (`tessera.dev/migration-target-node`, the planner's
`to_node`); the executor runs them under every safety rule. Events on the pending pod and on
each pod to move name what moves and why.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from apis.crds import podmigrationjob as pmj
from apis.crds.device import DeviceType
from apis.errors import InvalidRequestError, ValidationError
from apis.extension import gang, names
from apis.extension.devicerequest import pod_device_requests
from apis.k8s.core import Pod
from descheduler.arbitration.rules import check_namespace
from descheduler.cluster import Cluster, Obj
from descheduler.metrics import Metrics
from descheduler.settings import ArbitrationSettings, DefragSettings
from descheduler.strategies.planner import Plan, Planner, PlannerError
from kube.errors import AlreadyExists, APIError
from kube.events import ObjectReference
from kube.logs import V

__all__ = ["Defragmentation", "whole_gpus"]

log = logging.getLogger(__name__)

NAME = "defrag"
_TERMINAL = {p.value for p in pmj.MigrationPhase if p.terminal}


def whole_gpus(pod: Pod) -> int:
    """How many whole GPUs `pod` asks for (0 for shares or none; malformed requests: 0)."""
    try:
        request = pod_device_requests(pod).get(DeviceType.GPU)
    except InvalidRequestError:
        return 0
    return request.count if request is not None and not request.shared else 0


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class JobWriter(Protocol):
    """Where PodMigrationJobs are created (`client.resource(POD_MIGRATION_JOBS)`)."""

    def create(self, obj: dict[str, Any]) -> object: ...


class EventSink(Protocol):
    """`kube.EventRecorder` (a list in unit tests)."""

    def normal(self, ref: ObjectReference, reason: str, message: str) -> None: ...


class Defragmentation:
    name = NAME

    def __init__(
        self,
        jobs: JobWriter,
        planner: Planner,
        settings: DefragSettings,
        *,
        metrics: Metrics,
        events: EventSink,
        arbitration: ArbitrationSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime.datetime] = _utcnow,
    ) -> None:
        """`arbitration`: the safety settings, so that plans leave out pods in namespaces they
        exclude (None: the defaults)."""
        self._arbitration = arbitration or ArbitrationSettings()
        self._jobs = jobs
        self._planner = planner
        self._settings = settings
        self._metrics = metrics
        self._events = events
        self._clock = clock
        self._now = now
        self._next = 0.0
        #: pending pod uid -> the last "no plan" message announced (no repeated Events).
        self._announced: dict[str, str] = {}
        #: The planner's last error, logged as a warning once.
        self._planner_problem = ""

    def due(self, now: float) -> bool:
        if now < self._next:
            return False
        self._next = now + self._settings.interval
        return True

    def run(self, cluster: Cluster) -> None:
        jobs = cluster.jobs.list()
        active = [j for j in jobs if (j.get("status") or {}).get("phase") not in _TERMINAL]
        # Served: a plan runs for it, or one ended less than `min_pending` ago (the scheduler has
        # had no time to place the pod into the room made for it yet).
        now = self._now()
        recent = [j for j in jobs if j not in active and _ended_within(j, now, self._settings.min_pending)]
        served = {(j["metadata"].get("labels") or {}).get(names.LABEL_MIGRATION_FOR) for j in [*active, *recent]}
        # Not to be moved: pods already migrating, and pods no job could move (nothing recreates
        # them, or the safety rules exclude their namespace) — a plan with them would only fail.
        moving = sorted({_pod_ref_key(j) for j in active} | self._unmovable(cluster))
        for pod in self.candidates(cluster):
            if pod.uid in served:
                continue
            try:
                plan = self._planner.plan(
                    pod.namespace, pod.name, max_migrations=self._settings.max_migrations, exclude=moving
                )
            except PlannerError as e:
                # Once per distinct problem (a scheduler without the planner answers UNIMPLEMENTED
                # on every interval), then quietly at V(4).
                level = logging.WARNING if e.detail != self._planner_problem else V(4)
                self._planner_problem = e.detail
                log.log(level, "Cannot plan migrations", extra={"pod": pod.key, "error": str(e)})
                return  # the planner is down: the next interval tries again
            self._planner_problem = ""
            self._act(pod, plan)

    def _unmovable(self, cluster: Cluster) -> set[str]:
        out = set()
        for raw in cluster.pods.list():
            meta = raw.get("metadata") or {}
            if not (raw.get("spec") or {}).get("nodeName"):
                continue
            namespace = str(meta.get("namespace") or "default")
            refused = check_namespace(
                namespace, include=self._arbitration.include_namespaces, exclude=self._arbitration.exclude_namespaces
            )
            if refused is not None or cluster.workload_of(raw) is None:
                out.add(f"{namespace}/{meta.get('name')}")
        return out

    def candidates(self, cluster: Cluster) -> list[Pod]:
        """Unschedulable long enough and asking for enough whole GPUs, oldest first; no gang
        member: room made for one member binds nothing while the gang as a whole does not fit
        (the planner plans for one pod), so its migrations would only disturb other pods."""
        now = self._now()
        out = []
        for raw in cluster.pods.list():
            if (raw.get("spec") or {}).get("nodeName") or (raw.get("metadata") or {}).get("deletionTimestamp"):
                continue
            since = _unschedulable_since(raw)
            if since is None or (now - since).total_seconds() < self._settings.min_pending:
                continue
            try:
                pod = Pod.from_dict(raw)
            except ValidationError:
                continue
            if whole_gpus(pod) >= self._settings.min_whole_gpus and not _in_gang(pod):
                out.append((since, pod))
        return [p for _, p in sorted(out, key=lambda t: (t[0], t[1].key))]

    def _act(self, pod: Pod, plan: Plan) -> None:
        pending_ref = ObjectReference.of(pod)
        if not plan.feasible or not plan.migrations:
            message = plan.message or "no plan"
            if self._announced.get(pod.uid) != message:
                self._announced[pod.uid] = message
                self._events.normal(pending_ref, "DefragmentationNotPossible", message)
                log.log(V(2), "No defragmentation plan", extra={"pod": pod.key, "detail": message})
            return
        self._announced.pop(pod.uid, None)
        moves = ", ".join(f"{m.pod} ({m.from_node} → {m.to_node})" for m in plan.migrations)
        reason = f"defragmentation: make room for pending pod {pod.key} ({whole_gpus(pod)} whole GPUs) on {plan.node}"
        for i, migration in enumerate(plan.migrations):
            self._create(pod, migration.pod, migration.uid, migration.to_node, reason, index=i)
            namespace, _, name = migration.pod.partition("/")
            moved = ObjectReference("Pod", name, namespace, migration.uid, "v1")
            self._events.normal(moved, "MigrationPlanned", f"to be moved to {migration.to_node}: {reason}")
        self._events.normal(pending_ref, "Defragmenting", f"moving {moves} so that it fits on {plan.node}")
        log.info("Defragmenting", extra={"pod": pod.key, "node": plan.node, "moves": moves})

    def _create(self, pending: Pod, pod: str, uid: str, to_node: str, reason: str, *, index: int) -> None:
        namespace, _, name = pod.partition("/")
        body: dict[str, Any] = {
            "apiVersion": pmj.GROUP_VERSION,
            "kind": pmj.KIND,
            "metadata": {
                "name": f"defrag-{pending.uid[:8]}-{index}-{(uid or name)[:8]}".lower(),
                "labels": {names.LABEL_MIGRATION_FOR: pending.uid},
                "annotations": {
                    names.ANNOTATION_MIGRATION_REASON: reason,
                    names.ANNOTATION_MIGRATION_POD: pod,
                    names.ANNOTATION_MIGRATION_TARGET_NODE: to_node,
                },
            },
            "spec": {
                "podRef": {"namespace": namespace, "name": name, "uid": uid},
                "mode": pmj.MigrationMode.RESERVATION_FIRST.value,
            },
        }
        try:
            self._jobs.create(body)
        except AlreadyExists:
            return
        except APIError as e:
            log.warning("Cannot create a PodMigrationJob", extra={"pod": pod, "error": str(e)})
            return
        self._metrics.jobs_created.labels(NAME).inc()


def _in_gang(pod: Pod) -> bool:
    """A member of a gang (a PodGroup label of either group, the lightweight gang label or
    Koordinator's annotation), or a pod naming two kinds of gang (refused until it is fixed)."""
    return gang.gang_name(pod) is not None or bool(gang.gang_conflict(pod))


def _unschedulable_since(raw: Obj) -> datetime.datetime | None:
    for c in (raw.get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable":
            text = str(c.get("lastTransitionTime") or "")
            try:
                return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                return None
    return None


def _ended_within(job: Obj, now: datetime.datetime, seconds: float) -> bool:
    """Whether the job's last transition (its newest condition, else its creation) is that recent."""
    stamps = [str(c.get("lastTransitionTime") or "") for c in (job.get("status") or {}).get("conditions") or ()]
    stamps.append(str((job.get("metadata") or {}).get("creationTimestamp") or ""))
    times = []
    for text in stamps:
        try:
            times.append(datetime.datetime.fromisoformat(text.replace("Z", "+00:00")))
        except ValueError:
            continue
    return bool(times) and (now - max(times)).total_seconds() < seconds


def _pod_ref_key(job: Obj) -> str:
    ref = (job.get("spec") or {}).get("podRef") or {}
    return f"{ref.get('namespace') or 'default'}/{ref.get('name')}"
