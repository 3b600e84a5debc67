"""The CronJob controller's decisions: a Job at each time the schedule names, as kube's (v2).

One sync, as upstream's: the CronJob's Jobs (those whose controller reference names it) are
first trimmed to `successfulJobsHistoryLimit` / `failedJobsHistoryLimit` (the oldest finished go,
by start time); then `status.active` is brought up to date (a finished Job leaves it, `SawCompleted
Job`; a Job gone leaves it, `MissingJob`; a running Job it does not list is `UnexpectedJob`, which
is what `kubectl create job --from=cronjob/NAME` makes) and `status.lastSuccessfulTime` follows the
latest completion. Unless the CronJob is being deleted, is suspended, or its schedule or time zone
does not parse (a Warning Event says which, and nothing runs until it is edited), the most recent
time the schedule named since the last run (or the CronJob's creation) — at most
`startingDeadlineSeconds` ago, else it is a `MissSchedule` — gets a Job named
`NAME-<minutes since the epoch>`, so the same time never makes two Jobs, with the template's labels
and annotations, `batch.kubernetes.io/cronjob-scheduled-timestamp`, and the CronJob as its
controller. `concurrencyPolicy` Forbid skips a time while a Job runs (`JobAlreadyActive`); Replace
deletes the running ones first. More than 100 missed times only start the latest, with a
`TooManyMissedTimes` warning. Then the sync asks to be run again just after the next time.

The schedule runs in `spec.timeZone`, or without one in the controller's own zone, as
kube-controller-manager's. Time is a parameter: tests step it, nothing waits. Differences: a Job
that the cache does not show is taken as gone (upstream asks the API server; the engine's
expectations keep a Job just created from being missed), and a Job just created enters
`status.active` by name, its uid filled in at the next sync.
"""

from __future__ import annotations

import copy
import datetime
import enum
from collections.abc import Mapping, Sequence
from typing import Any, Final

from apis.extension import names
from apis.k8s import cron
from kube.events import NORMAL, WARNING
from kubecontrollers.kinds import CRON_JOBS, JOBS
from kubecontrollers.plan import Create, Delete, Note, Obj, Plan, note, owner_reference, status_patch

__all__ = ["MAX_MISSED", "Missed", "job_name", "most_recent", "sync_cronjob"]

#: More missed times than this is a clock or configuration problem (kube's limit).
MAX_MISSED: Final = 100
#: Runs are looked at this long after their time: a clock a little behind still finds them due.
_NEXT_DELTA: Final = datetime.timedelta(milliseconds=100)


class Missed(enum.Enum):
    NONE = "none"
    FEW = "few"
    MANY = "many"


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _time(stamp: object) -> datetime.datetime | None:
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def _stamp(t: datetime.datetime) -> str:
    return t.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def job_name(cronjob: str, scheduled: datetime.datetime) -> str:
    """The Job a scheduled time makes: `NAME-<minutes since the epoch>` (a lock against running twice)."""
    return f"{cronjob}-{int(scheduled.timestamp()) // 60}"


def most_recent(
    schedule: cron.Schedule,
    *,
    earliest: datetime.datetime,
    now: datetime.datetime,
) -> tuple[datetime.datetime | None, Missed]:
    """The latest time the schedule names in (earliest, now], and how many were missed before it.

    Raises ScheduleError when the schedule names no second time within five years (a day that
    does not exist, `0 0 30 2 *`): kube calls that an invalid schedule. Counts and finds the
    latest as kube does, from the interval between the first two times, so a schedule missed for
    years costs a few steps, not one per missed time.
    """
    first = schedule.next_after(earliest)
    second = schedule.next_after(first) if first is not None else None
    if first is not None and now < first:
        return None, Missed.NONE
    if first is None or second is None or (second - first).total_seconds() < 1:
        raise cron.ScheduleError("time difference between two schedules is less than 1 second")
    if now < second:
        return first, Missed.NONE
    interval = round((second - first).total_seconds())
    count = int((now - first).total_seconds()) // interval + 1
    latest: datetime.datetime | None = None
    t = schedule.next_after(first + datetime.timedelta(seconds=(count - 2) * interval))
    while t is not None and t <= now:
        latest, t = t, schedule.next_after(t)
    return latest, Missed.MANY if count > MAX_MISSED else Missed.FEW


def _outcome(job: Obj) -> str:
    """`Complete` or `Failed` for a finished Job, "" for one still running."""
    for condition in (job.get("status") or {}).get("conditions") or ():
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return str(condition["type"])
    return ""


def _controlled_by(job: Obj, cronjob: str) -> bool:
    return any(
        r.get("controller") is True and r.get("kind") == CRON_JOBS.kind and r.get("name") == cronjob
        for r in _meta(job).get("ownerReferences") or ()
    )


def _ref(job: Obj) -> dict[str, Any]:
    meta = _meta(job)
    return {
        "apiVersion": JOBS.api_version,
        "kind": JOBS.kind,
        "name": meta["name"],
        "namespace": meta.get("namespace", ""),
        "uid": meta.get("uid", ""),
        "resourceVersion": meta.get("resourceVersion", ""),
    }


class _Sync:
    """One sync's working state: the CronJob, its Jobs, the status being written, the plan."""

    def __init__(self, cronjob: Obj, jobs: Sequence[Obj], now: datetime.datetime) -> None:
        self.cronjob = cronjob
        self.name = str(_meta(cronjob)["name"])
        self.namespace = str(_meta(cronjob).get("namespace", ""))
        self.spec: Mapping[str, Any] = cronjob.get("spec") or {}
        self.status: dict[str, Any] = copy.deepcopy(dict(cronjob.get("status") or {}))
        self.active: list[dict[str, Any]] = [dict(r) for r in self.status.get("active") or () if isinstance(r, dict)]
        self.jobs = [j for j in jobs if _controlled_by(j, self.name)]
        self.now = now
        self.plan = Plan()

    def tell(self, reason: str, message: str, type: str = NORMAL) -> Note:
        return note(self.cronjob, CRON_JOBS, reason, message, type)

    def say(self, reason: str, message: str, type: str = NORMAL) -> None:
        self.plan.notes.append(self.tell(reason, message, type))

    def delete(self, job: Obj) -> None:
        meta = _meta(job)
        told = self.tell("SuccessfulDelete", f"Deleted job {meta['name']}")
        self.plan.actions.append(
            Delete(JOBS, self.namespace, str(meta["name"]), str(meta["uid"]), propagation="Background", note=told)
        )
        self.active = [r for r in self.active if r.get("uid") != meta["uid"]]

    def finish(self) -> Plan:
        """The plan, with the status write (if anything changed) last."""
        self.status.pop("active", None)
        if self.active:
            self.status["active"] = self.active
        write = status_patch(self.cronjob, CRON_JOBS, self.status)
        if write is not None:
            self.plan.actions.append(write)
        return self.plan

    # --- the steps ---------------------------------------------------------------------------------
    def trim_history(self) -> None:
        """Delete the oldest finished Jobs past the history limits (kube's cleanupFinishedJobs)."""
        for outcome, field in (("Complete", "successfulJobsHistoryLimit"), ("Failed", "failedJobsHistoryLimit")):
            limit = self.spec.get(field)
            if not isinstance(limit, int) or isinstance(limit, bool):
                continue
            finished = [j for j in self.jobs if _outcome(j) == outcome]
            finished.sort(key=lambda j: (not _start(j), _start(j), _meta(j)["name"]))
            for job in finished[: max(0, len(finished) - limit)]:
                self.delete(job)

    def _listed(self, job: Obj) -> int | None:
        """Where status.active lists `job` (by uid; by name while the entry has no uid yet)."""
        meta = _meta(job)
        for i, ref in enumerate(self.active):
            if ref.get("uid") == meta.get("uid") or (not ref.get("uid") and ref.get("name") == meta["name"]):
                return i
        return None

    def reconcile_active(self) -> None:
        """status.active and lastSuccessfulTime from the Jobs as they are."""
        running: set[int] = set()
        done: set[int] = set()
        for job in self.jobs:
            meta, index, outcome = _meta(job), self._listed(job), _outcome(job)
            if outcome:
                if index is not None:
                    done.add(index)
                    self.say("SawCompletedJob", f"Saw completed job: {meta['name']}, condition: {outcome}")
                completed = _time((job.get("status") or {}).get("completionTime"))
                last = _time(self.status.get("lastSuccessfulTime"))
                if outcome == "Complete" and completed is not None and (last is None or completed > last):
                    self.status["lastSuccessfulTime"] = job["status"]["completionTime"]
            elif index is None:
                message = f"Saw a job that the controller did not create or forgot: {meta['name']}"
                self.say("UnexpectedJob", message, WARNING)
            else:
                running.add(index)
                if not self.active[index].get("uid"):  # made by the last sync: now with its uid
                    self.active[index] = _ref(job)
        kept = []
        for i, ref in enumerate(self.active):
            if i in running:
                kept.append(ref)
            elif i not in done:
                self.say("MissingJob", f"Active job went missing: {ref.get('name')}")
        self.active = kept

    def run_due(self, local_zone: datetime.tzinfo) -> None:
        """Start the Job of the most recent time due, if the policies allow, and ask to come back."""
        schedule_text = str(self.spec.get("schedule", ""))
        time_zone = self.spec.get("timeZone")
        if isinstance(time_zone, str):
            try:
                cron.zone(time_zone)
            except cron.UnknownZoneError as e:
                self.say("UnknownTimeZone", f'invalid timeZone: "{time_zone}": {e}', WARNING)
                return
        if self.spec.get("suspend") is True:
            return
        if "TZ" in schedule_text:
            self.say(
                "UnsupportedSchedule",
                f'CRON_TZ or TZ used in schedule "{schedule_text}" is not officially supported, see '
                "https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details",
                WARNING,
            )
        elif isinstance(time_zone, str):
            schedule_text = f"CRON_TZ={time_zone} {schedule_text}"
        try:
            schedule = cron.Schedule.parse(schedule_text, tz=local_zone)
        except cron.ScheduleError as e:
            self.say("UnparseableSchedule", f'unparseable schedule: "{self.spec.get("schedule")}" : {e}', WARNING)
            return
        created = _time(_meta(self.cronjob).get("creationTimestamp")) or self.now
        last = _time(self.status.get("lastScheduleTime"))
        earliest = last or created
        deadline = self.spec.get("startingDeadlineSeconds")
        if isinstance(deadline, int) and not isinstance(deadline, bool):
            earliest = max(earliest, self.now - datetime.timedelta(seconds=deadline))
        try:
            scheduled, missed = most_recent(schedule, earliest=earliest, now=self.now)
        except cron.ScheduleError as e:
            self.say("InvalidSchedule", f"invalid schedule: {self.spec.get('schedule')} : {e}", WARNING)
            return
        if scheduled is not None:
            self._start(scheduled, missed, deadline)
        self._come_back(schedule, created)

    def _start(self, scheduled: datetime.datetime, missed: Missed, deadline: object) -> None:
        if missed is Missed.MANY:
            self.say(
                "TooManyMissedTimes",
                "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew",
                WARNING,
            )
        if isinstance(deadline, int) and scheduled + datetime.timedelta(seconds=deadline) < self.now:
            when = scheduled.astimezone(datetime.UTC).strftime("%a, %d %b %Y %H:%M:%S %z")
            self.say("MissSchedule", f"Missed scheduled time to start a job: {when}", WARNING)
            return
        name = job_name(self.name, scheduled)
        if any(r.get("name") == name for r in self.active) or _time(self.status.get("lastScheduleTime")) == scheduled:
            return
        if self.spec.get("concurrencyPolicy") == "Forbid" and self.active:
            message = "Not starting job because prior execution is running and concurrency policy is Forbid"
            self.say("JobAlreadyActive", message)
            return
        if self.spec.get("concurrencyPolicy") == "Replace":
            running = {str(_meta(j).get("uid")): j for j in self.jobs}
            for ref in list(self.active):
                job = running.get(str(ref.get("uid")))
                if job is not None:
                    self.delete(job)
        told = self.tell("SuccessfulCreate", f"Created job {name}")
        self.plan.actions.append(Create(JOBS, self.namespace, self._job(name, scheduled), told))
        self.active.append(
            {"apiVersion": JOBS.api_version, "kind": JOBS.kind, "name": name, "namespace": self.namespace}
        )
        self.status["lastScheduleTime"] = _stamp(scheduled)

    def _job(self, name: str, scheduled: datetime.datetime) -> dict[str, Any]:
        template = self.spec.get("jobTemplate") or {}
        tmeta = template.get("metadata") or {}
        time_zone = self.spec.get("timeZone")
        zone = cron.zone(time_zone) if isinstance(time_zone, str) else datetime.UTC
        when = scheduled.astimezone(zone).isoformat(timespec="seconds").replace("+00:00", "Z")
        annotations = {**(tmeta.get("annotations") or {}), names.ANNOTATION_CRONJOB_SCHEDULED_TIMESTAMP: when}
        return {
            "apiVersion": JOBS.api_version,
            "kind": JOBS.kind,
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": dict(tmeta.get("labels") or {}),
                "annotations": annotations,
                "ownerReferences": [owner_reference(self.cronjob, CRON_JOBS)],
            },
            "spec": copy.deepcopy(dict(template.get("spec") or {})),
        }

    def _come_back(self, schedule: cron.Schedule, created: datetime.datetime) -> None:
        """Ask to sync again just after the next time (kube's nextScheduleTimeDuration)."""
        earliest = _time(self.status.get("lastScheduleTime")) or created
        try:
            latest, missed = most_recent(schedule, earliest=earliest, now=self.now)
        except cron.ScheduleError:
            latest, missed = self.now, Missed.NONE
        base = latest or (earliest if missed is Missed.NONE else self.now)
        following = schedule.next_after(base)
        if following is not None:
            self.plan.later(max((following + _NEXT_DELTA - self.now).total_seconds(), 0.0))


def _start(job: Obj) -> str:
    return str((job.get("status") or {}).get("startTime") or "")


def sync_cronjob(cronjob: Obj, jobs: Sequence[Obj], *, now: datetime.datetime, local_zone: datetime.tzinfo) -> Plan:
    """What `cronjob` needs now, given the Jobs of its namespace (those it controls are its own)
    and the time; `local_zone` is the zone of a CronJob without `spec.timeZone`."""
    sync = _Sync(cronjob, jobs, now)
    sync.trim_history()
    sync.reconcile_active()
    if not _meta(cronjob).get("deletionTimestamp"):
        sync.run_due(local_zone)
    return sync.finish()
