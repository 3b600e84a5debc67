"""`Executor`: runs every unfinished PodMigrationJob one step further per sync (the I/O half of
`migration.steps`).

One pass (`sync`) reads the jobs from the cache in creation order, plans each one's next step,
asks the arbiter where a step needs it, performs the step (create the Reservation, evict, write
status, record Events) and rolls back what failed. It runs on the descheduler's single loop
thread, so the arbiter's counts see each admission of the same pass. Everything it needs to
resume is in the API objects; the only memory it keeps is what it wrote itself and the cache may
not show yet — the newest version of the jobs it wrote (`_written`), so that it does not repeat a
step, and the Reservations it created (`_created`), until the cache has shown each once, so that
a Reservation a moment younger than the cache is not taken for a deleted one (which fails the job).
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from apis.crds import podmigrationjob as pmj
from apis.crds.podmigrationjob import MigrationMode, MigrationPhase, PodMigrationJob
from apis.crds.reservation import ObjectRef, Reservation, ReservationPhase, allocated_from_pod
from apis.errors import AnnotationError, ValidationError
from apis.extension import names
from apis.k8s.core import Pod
from apis.k8s.duration import format_duration
from descheduler.arbitration import Arbiter, InFlight, Refusal
from descheduler.cluster import Cluster, Obj
from descheduler.metrics import Metrics
from descheduler.migration import reservation as reservations
from descheduler.migration.status import JobStatus, quoted, stamp, step_events
from descheduler.migration.steps import Facts, Step, StepKind, plan
from descheduler.settings import MigrationSettings
from kube.client import Client
from kube.errors import AlreadyExists, APIError, Invalid, NotFound, TooManyRequests
from kube.events import EventRecorder, ObjectReference
from kube.eviction import evict
from kube.logs import V
from kube.resources import PODS

__all__ = ["Executor"]

log = logging.getLogger(__name__)

REASON_INVALID = "InvalidJob"
REASON_DRY_RUN = "DryRun"
#: A value read as its default (an unknown spec.mode: ReservationFirst, as Koordinator runs it).
REASON_MODE_IGNORED = "ModeIgnored"


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _parse_time(text: str) -> datetime.datetime | None:
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _rv(obj: Obj) -> int:
    text = str((obj.get("metadata") or {}).get("resourceVersion") or "0")
    return int(text) if text.isdigit() else 0


@dataclass(frozen=True, slots=True)
class _Job:
    raw: Obj
    job: PodMigrationJob

    @property
    def ref(self) -> ObjectReference:
        return ObjectReference.from_meta(pmj.KIND, pmj.GROUP_VERSION, self.job.meta)


class Executor:
    def __init__(
        self,
        client: Client,
        cluster: Cluster,
        arbiter: Arbiter,
        *,
        settings: MigrationSettings,
        metrics: Metrics,
        events: EventRecorder,
        dry_run: bool = False,
        now: Callable[[], datetime.datetime] = _utcnow,
    ) -> None:
        self._jobs = client.resource(names.POD_MIGRATION_JOBS)
        self._reservations = client.resource(names.RESERVATIONS)
        self._pods = client.resource(PODS)
        self._cluster = cluster
        self._arbiter = arbiter
        self._settings = settings
        self._metrics = metrics
        self._events = events
        self._dry_run = dry_run
        self._now = now
        #: job name -> the object our last write returned (newer than the cache for a moment).
        self._written: dict[str, Obj] = {}
        #: Reservation name -> the object its create returned, until the cache shows it.
        self._created: dict[str, Obj] = {}

    # --- one pass ----------------------------------------------------------------------------------
    def sync(self) -> None:
        raws = sorted(
            (self._current(raw) for raw in self._cluster.jobs.list()),
            key=lambda r: (str(r["metadata"].get("creationTimestamp", "")), str(r["metadata"].get("name"))),
        )
        jobs: list[_Job] = []
        for raw in raws:
            try:
                jobs.append(_Job(raw, PodMigrationJob.from_dict(raw)))
            except ValidationError as e:
                self._invalid(raw, e)
        in_flight = [m for j in jobs if (m := self._in_flight(j.job)) is not None]
        running = 0
        for j in jobs:
            if j.job.phase.terminal:
                self._clean_up(j.job)
                continue
            try:
                self._sync_one(j, in_flight)
            except APIError as e:  # the API said no or was away: the next pass tries again
                log.warning("Migration step failed; retrying", extra={"job": j.job.name, "error": str(e)})
            except Exception:  # the loop boundary for one job: a bug here must not stop the others
                log.exception("Migration step failed unexpectedly", extra={"job": j.job.name})
            running += self._written_phase(j) is MigrationPhase.RUNNING
        self._metrics.running.set(running)
        self._orphans({j.job.name for j in jobs})
        self._written = {k: v for k, v in self._written.items() if self._cluster.jobs.get(k) is not None}
        unfinished = {reservations.name_for_job(j.job) for j in jobs if not j.job.phase.terminal}
        self._created = {
            k: v for k, v in self._created.items() if k in unfinished and self._cluster.reservations.get(k) is None
        }

    def _current(self, raw: Obj) -> Obj:
        mine = self._written.get(str(raw["metadata"].get("name")))
        return mine if mine is not None and _rv(mine) > _rv(raw) else raw

    def _written_phase(self, j: _Job) -> MigrationPhase:
        raw = self._current(j.raw)
        return MigrationPhase((raw.get("status") or {}).get("phase") or "Pending")

    # --- facts -------------------------------------------------------------------------------------
    def _pod(self, job: PodMigrationJob) -> Obj | None:
        ref = job.pod_ref
        if ref.name:
            pod = self._cluster.pod(ref.namespace or "default", ref.name)
        else:
            pod = next((p for p in self._cluster.pods.list() if p["metadata"].get("uid") == ref.uid), None)
        if pod is not None and ref.uid and pod["metadata"].get("uid") != ref.uid:
            return None  # a namesake (a StatefulSet's replacement): the pod we were to move is gone
        return pod

    def _reservation(self, job: PodMigrationJob) -> Reservation | None:
        name = reservations.name_for_job(job)
        raw = self._cluster.reservations.get(name) or self._created.get(name)
        if raw is None:
            return None
        try:
            return Reservation.from_dict(raw)
        except ValidationError as e:
            log.warning("Reservation does not parse", extra={"job": job.name, "error": str(e)})
            return None

    def _replacement(self, rsv: Reservation) -> ObjectRef | None:
        if rsv.current_owners:
            return rsv.current_owners[0]
        namespace = str((rsv.template.get("metadata") or {}).get("namespace") or "default")
        for raw in self._cluster.pods.by_index("namespace", namespace):
            try:
                pod = Pod.from_dict(raw)
                allocated = allocated_from_pod(pod)
            except (ValidationError, AnnotationError):
                continue
            if allocated is not None and allocated.name == rsv.name and (not allocated.uid or allocated.uid == rsv.uid):
                return ObjectRef.to_pod(pod)
        return None

    def _deadline(self, job: PodMigrationJob) -> datetime.datetime:
        created = _parse_time(job.meta.creation_timestamp) or self._now()
        return created + datetime.timedelta(seconds=job.ttl_seconds or self._settings.default_ttl)

    def _in_flight(self, job: PodMigrationJob) -> InFlight | None:
        if job.phase is not MigrationPhase.RUNNING:
            return None
        pod = self._pod(job)
        workload = None
        node = pending = ""
        if pod is not None:
            workload = self._cluster.workload_of(pod)
            node = str((pod.get("spec") or {}).get("nodeName") or "")
            eviction = job.condition(pmj.CONDITION_EVICTION)
            evicted = eviction is not None and eviction.status == "True"
            if not evicted and not pod["metadata"].get("deletionTimestamp"):
                pending = f"{pod['metadata'].get('namespace') or 'default'}/{pod['metadata'].get('name')}"
        else:
            rsv = self._reservation(job)
            owner = rsv.owners[0].controller if rsv is not None and rsv.owners else None
            if owner is not None:
                stand_in = {"metadata": {"namespace": owner.namespace, "ownerReferences": [owner.to_dict()]}}
                workload = self._cluster.workload_of(stand_in)
        return InFlight(job.name, job.pod_ref.namespace or "default", node, workload, pending)

    # --- a step ------------------------------------------------------------------------------------
    def _sync_one(self, j: _Job, in_flight: list[InFlight]) -> None:
        job = j.job
        if self._dry_run and job.phase is not MigrationPhase.PENDING:
            return  # a dry run only evaluates what has not started
        pod = self._pod(job)
        rsv = self._reservation(job) if job.mode is MigrationMode.RESERVATION_FIRST else None
        facts = Facts(
            now=self._now(),
            deadline=self._deadline(job),
            pod=pod,
            has_controller=pod is not None and self._cluster.workload_of(pod) is not None,
            reservation=rsv,
            replacement=self._replacement(rsv) if rsv is not None else None,
        )
        step = plan(job, facts)
        log.log(V(4), "Planned migration step", extra={"job": job.name, "step": step.kind.value})
        if step.kind is StepKind.ADMIT:
            assert pod is not None  # plan admits only a pod that exists
            self._admit(j, step, pod, in_flight)
        elif step.kind is StepKind.CREATE_RESERVATION:
            assert pod is not None
            self._create_reservation(j, step, pod)
        elif step.kind is StepKind.EVICT:
            assert pod is not None
            self._evict(j, step, pod, in_flight)
        elif step.kind is StepKind.SUCCEED:
            self._write(j, step.status)
            self._metrics.migrations.labels("Succeeded").inc()
            self._events.normal(j.ref, pmj.STATUS_COMPLETE, step.status.message)
            new = step.status.pod_ref
            if new is not None:
                ref = ObjectReference("Pod", new.name, new.namespace or "default", new.uid, "v1")
                self._events.normal(ref, "MigrationSucceeded", f"PodMigrationJob {job.name}: {step.status.message}")
            log.info("Migration succeeded", extra={"job": job.name, "detail": step.status.message})
        elif step.kind is StepKind.FAIL:
            self._fail(j, step, pod)
        else:
            self._write(j, step.status)

    def _admit(self, j: _Job, step: Step, pod: Obj, in_flight: list[InFlight]) -> None:
        job = j.job
        refusal = self._arbiter.admit(job.name, pod, self._cluster, in_flight)
        if refusal is not None:
            self._refused(j, refusal, JobStatus.of(job).at(MigrationPhase.PENDING, "Refused"), pod)
            return
        node = (pod.get("spec") or {}).get("nodeName") or ""
        what = f"pod {job.pod_ref.namespace}/{job.pod_ref.name} from node {node} ({job.mode.value})"
        if self._dry_run:
            status = JobStatus.of(job).at(
                MigrationPhase.PENDING, REASON_DRY_RUN, reason=REASON_DRY_RUN, message=f"would migrate {what}"
            )
            if job.reason != REASON_DRY_RUN:
                self._metrics.dry_run.inc()
                self._events.normal(j.ref, "WouldMigrate", f"dry run: would migrate {what}")
                log.info(
                    "Dry run: would migrate",
                    extra={"job": job.name, "pod": f"{job.pod_ref.namespace}/{job.pod_ref.name}"},
                )
            self._write(j, status)
            return
        if not job.pod_ref.uid:  # pin the pod: a namesake created later is not the one to move
            spec: dict[str, Any] = {"podRef": {"uid": pod["metadata"].get("uid")}}
            if job.ttl_seconds is not None:  # as Koordinator's controller writes it back: Go's form, `5m0s`
                spec["ttl"] = format_duration(job.ttl_seconds)
            self._remember(self._jobs.patch(job.name, {"spec": spec}))
        self._write(j, step.status.at(MigrationPhase.RUNNING, "", message=f"migrating {what}"))
        self._metrics.migrations.labels("Running").inc()
        in_flight.append(
            InFlight(job.name, job.pod_ref.namespace or "default", str(node), self._cluster.workload_of(pod), _key(pod))
        )
        why = job.meta.annotations.get(names.ANNOTATION_MIGRATION_REASON, "")
        because = f"; why: {why}" if why else ""
        if job.ignored:
            self._events.warning(j.ref, REASON_MODE_IGNORED, job.ignored)
        self._events.normal(j.ref, "MigrationStarted", f"migrating {what}{because}")
        self._events.normal(
            _pod_ref(pod), "Migrating", f"PodMigrationJob {job.name} moves this pod ({job.mode.value}){because}"
        )
        log.info("Migration started", extra={"job": job.name, "pod": _key(pod), "node": node})

    def _create_reservation(self, j: _Job, step: Step, pod: Obj) -> None:
        job = j.job
        remaining = (self._deadline(job) - self._now()).total_seconds()
        body = reservations.build(
            j.raw,
            pod,
            ttl_seconds=remaining + self._settings.reservation_ttl_margin,
            target_node=job.meta.annotations.get(names.ANNOTATION_MIGRATION_TARGET_NODE, ""),
        )
        if job.reservation_template:
            body = {**body, "spec": {**body["spec"], **dict(job.reservation_template.get("spec") or {})}}
        name = body["metadata"]["name"]
        try:
            created = self._reservations.create(body)
            self._created[name] = created
            uid = str((created.get("metadata") or {}).get("uid") or "")
        except AlreadyExists:
            uid = ""
            log.log(V(2), "Reservation already exists; adopting it", extra={"job": job.name, "reservation": name})
        except Invalid as e:
            failed = JobStatus.of(job).at(
                MigrationPhase.FAILED, "Failed", reason=pmj.REASON_FAILED_CREATE_RESERVATION, message=str(e)
            )
            self._fail(j, Step(StepKind.FAIL, failed, rollback=False), pod)
            return
        if job.reservation_ref is None:
            # As Koordinator's controller does: the job names its Reservation (kubectl get pmj shows it).
            ref = {"apiVersion": names.RESERVATIONS.api_version, "kind": names.RESERVATIONS.kind, "name": name}
            if uid:
                ref["uid"] = uid
            self._remember(self._jobs.patch(job.name, {"spec": {"reservationOptions": {"reservationRef": ref}}}))
        message = f"Successfully create Reservation {quoted(name)}"
        self._write(j, step.status.at(MigrationPhase.RUNNING, pmj.CONDITION_RESERVATION_CREATED, message=message))
        self._events.normal(j.ref, pmj.CONDITION_RESERVATION_CREATED, message)

    def _evict(self, j: _Job, step: Step, pod: Obj, in_flight: list[InFlight]) -> None:
        job = j.job
        refusal = self._arbiter.may_evict(job.name, pod, self._cluster, in_flight)
        if refusal is not None:
            held = step.status.with_condition(
                pmj.CONDITION_EVICTION, False, reason=refusal.reason, message=refusal.message, now=stamp(self._now())
            )
            self._refused(j, refusal, held.at(MigrationPhase.RUNNING, pmj.CONDITION_EVICTION), pod)
            return
        meta = pod["metadata"]
        now = stamp(self._now())
        try:
            evict(
                self._pods,
                str(meta.get("name")),
                namespace=str(meta.get("namespace")),
                uid=str(meta.get("uid") or ""),
                delete_options=job.delete_options,
            )
        except TooManyRequests as e:  # a PodDisruptionBudget said not now: wait, until the ttl
            self._metrics.evictions.labels("refused").inc()
            self._metrics.refusals.labels("pdb").inc()
            held = step.status.with_condition(
                pmj.CONDITION_EVICTION, False, reason=pmj.REASON_FAILED_EVICT, message=str(e), now=now
            )
            self._write(
                j,
                held.at(MigrationPhase.RUNNING, pmj.CONDITION_EVICTION, reason=pmj.REASON_FAILED_EVICT, message=str(e)),
            )
            return
        except NotFound:
            pass  # already gone: the next pass sees it and goes on
        except APIError:
            self._metrics.evictions.labels("error").inc()
            raise
        else:
            self._metrics.evictions.labels("ok").inc()
            self._arbiter.evicted()
        # Koordinator's condition while the pod goes: Eviction False, reason Evicting.
        why = job.meta.annotations.get(names.ANNOTATION_MIGRATION_REASON, "")
        node = (pod.get("spec") or {}).get("nodeName") or ""
        message = f"Pod {quoted(_key(pod))} evicted from node {quoted(str(node))} by the reason {quoted(why)}"
        evicting = step.status.with_condition(
            pmj.CONDITION_EVICTION, False, reason=pmj.REASON_EVICTING, message=message, now=now
        )
        target = step.status.node_name
        self._write(
            j, evicting.at(MigrationPhase.RUNNING, pmj.CONDITION_EVICTION, reason=pmj.REASON_EVICTING, message=message)
        )
        self._events.normal(j.ref, pmj.REASON_EVICTING, message)
        moved = f"evicted pod {_key(pod)}" + (f"; its replacement is reserved on {target}" if target else "")
        self._events.normal(_pod_ref(pod), "MigrationEvicted", f"PodMigrationJob {job.name}: {moved}")
        log.info("Evicted pod for migration", extra={"job": job.name, "pod": _key(pod), "target": target})

    def _fail(self, j: _Job, step: Step, pod: Obj | None) -> None:
        job = j.job
        if step.status.reason == pmj.REASON_FORBIDDEN_MIGRATE_POD:
            self._metrics.refusals.labels("controller").inc()
        self._write(j, step.status)  # first the status, then the rollback: a crash between is cleaned up later
        if step.rollback and not self._dry_run:
            self._roll_back(job)
        self._metrics.migrations.labels("Failed").inc()
        self._events.warning(j.ref, step.status.reason, step.status.message)
        if pod is not None:
            self._events.warning(_pod_ref(pod), "MigrationFailed", f"PodMigrationJob {job.name}: {step.status.message}")
        log.info(
            "Migration failed", extra={"job": job.name, "reason": step.status.reason, "detail": step.status.message}
        )

    def _refused(self, j: _Job, refusal: Refusal, status: JobStatus, pod: Obj) -> None:
        job = j.job
        if job.reason != refusal.reason:  # counted and announced once per hold, not once per pass
            self._metrics.refusals.labels(refusal.rule).inc()
            self._events.normal(j.ref, "MigrationRefused", refusal.message)
            self._events.normal(_pod_ref(pod), "MigrationRefused", f"PodMigrationJob {job.name}: {refusal.message}")
            log.log(
                V(2), "Migration held back", extra={"job": job.name, "rule": refusal.rule, "detail": refusal.message}
            )
        self._write(j, status.at(status.phase, status.status, reason=refusal.reason, message=refusal.message))

    # --- rollback ----------------------------------------------------------------------------------
    def _roll_back(self, job: PodMigrationJob) -> None:
        """Delete the job's Reservation unless a replacement already consumed it."""
        if job.mode is not MigrationMode.RESERVATION_FIRST or not reservations.made_by_job(job):
            return  # a Reservation someone else made is theirs to remove
        self._delete_reservation(reservations.name_for(job.name))

    def _delete_reservation(self, name: str) -> None:
        raw = self._cluster.reservations.get(name)
        if raw is None or (raw.get("status") or {}).get("phase") == ReservationPhase.SUCCEEDED.value:
            return
        try:
            self._reservations.delete(name)
            log.info("Deleted reservation (rollback)", extra={"reservation": name})
        except NotFound:
            pass

    def _clean_up(self, job: PodMigrationJob) -> None:
        """A finished job that did not succeed holds nothing: finish a rollback a crash interrupted."""
        if job.phase is not MigrationPhase.SUCCEEDED and not self._dry_run:
            self._roll_back(job)

    def _orphans(self, jobs: set[str]) -> None:
        """Reservations of deleted jobs (the job was aborted by deleting it): roll back."""
        if self._dry_run:
            return
        for raw in self._cluster.reservations.list():
            owner = ((raw.get("metadata") or {}).get("labels") or {}).get(names.LABEL_MIGRATION_JOB)
            if owner and owner not in jobs and self._cluster.jobs.get(owner) is None:
                name = str(raw["metadata"].get("name"))
                if (raw.get("status") or {}).get("phase") != ReservationPhase.SUCCEEDED.value:
                    self._metrics.migrations.labels("Aborted").inc()
                self._delete_reservation(name)

    def _invalid(self, raw: Obj, error: ValidationError) -> None:
        name = str(raw["metadata"].get("name"))
        status = raw.get("status") or {}
        if status.get("phase") == MigrationPhase.FAILED.value and status.get("reason") == REASON_INVALID:
            return
        patch = {"status": {"phase": "Failed", "status": "Failed", "reason": REASON_INVALID, "message": str(error)}}
        try:
            self._remember(self._jobs.patch(name, patch, subresource="status"))
        except APIError as e:
            log.warning("Cannot write the status of an invalid job", extra={"job": name, "error": str(e)})
            return
        ref = ObjectReference(pmj.KIND, name, "", str(raw["metadata"].get("uid", "")), pmj.GROUP_VERSION)
        self._events.warning(ref, REASON_INVALID, str(error))
        self._metrics.migrations.labels("Failed").inc()
        log.warning("Invalid PodMigrationJob", extra={"job": name, "error": str(error)})

    # --- writing -----------------------------------------------------------------------------------
    def _write(self, j: _Job, status: JobStatus) -> None:
        old = JobStatus.of(j.job)
        if status == old:
            return
        self._remember(self._jobs.patch(j.job.name, {"status": status.to_dict()}, subresource="status"))
        job = j.job
        pod = f"{job.pod_ref.namespace or 'default'}/{job.pod_ref.name}"
        for reason, message in step_events(old, status, reservation=reservations.name_for_job(job), pod=pod):
            self._events.normal(j.ref, reason, message)

    def _remember(self, obj: dict[str, Any]) -> None:
        self._written[str(obj["metadata"]["name"])] = obj


def _key(pod: Obj) -> str:
    return f"{pod['metadata'].get('namespace') or 'default'}/{pod['metadata'].get('name')}"


def _pod_ref(pod: Obj) -> ObjectReference:
    m = pod["metadata"]
    return ObjectReference("Pod", str(m.get("name")), str(m.get("namespace") or "default"), str(m.get("uid", "")), "v1")
