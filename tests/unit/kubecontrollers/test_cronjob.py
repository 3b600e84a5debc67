"""The CronJob controller's decisions at chosen times: which Job a time makes, the concurrency
policies, deadlines, history, status, and the Events kube's controller records."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from apis.extension import names
from apis.k8s.cron import Schedule, ScheduleError, zone
from kubecontrollers.cronjob import MAX_MISSED, Missed, job_name, most_recent, sync_cronjob
from kubecontrollers.plan import Create, Delete, Patch, Plan

UTC = datetime.UTC
TEMPLATE = {
    "metadata": {"labels": {"team": "ml"}, "annotations": {"owner": "ana"}},
    "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "m", "image": "x"}]}}},
}


def at(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text).replace(tzinfo=UTC)


def cronjob(schedule: str = "*/5 * * * *", *, status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {
            "name": "report",
            "namespace": "ns",
            "uid": "uid-report",
            "resourceVersion": "7",
            "creationTimestamp": "2024-01-01T10:00:30Z",
        },
        "spec": {
            "schedule": schedule,
            "concurrencyPolicy": "Allow",
            "suspend": False,
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 1,
            "jobTemplate": TEMPLATE,
            **spec,
        },
        "status": status or {},
    }


def job(
    name: str, *, outcome: str = "", started: str = "2024-01-01T10:05:01Z", owner: str = "report"
) -> dict[str, Any]:
    status: dict[str, Any] = {"startTime": started}
    if outcome:
        status["conditions"] = [{"type": outcome, "status": "True"}]
        if outcome == "Complete":
            status["completionTime"] = started.replace(":01Z", ":59Z")
    refs = [{"apiVersion": "batch/v1", "kind": "CronJob", "name": owner, "uid": f"uid-{owner}", "controller": True}]
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "resourceVersion": "3",
            "ownerReferences": refs,
        },
        "spec": {},
        "status": status,
    }


def ref(name: str, *, uid: bool = True) -> dict[str, Any]:
    out = {"apiVersion": "batch/v1", "kind": "Job", "name": name, "namespace": "ns"}
    return {**out, "uid": f"uid-{name}", "resourceVersion": "3"} if uid else out


def sync(cj: dict[str, Any], jobs: list[dict[str, Any]], now: str, local: datetime.tzinfo = UTC) -> Plan:
    return sync_cronjob(cj, jobs, now=at(now), local_zone=local)


def created(plan: Plan) -> list[dict[str, Any]]:
    return [a.body for a in plan.actions if isinstance(a, Create)]


def deleted(plan: Plan) -> list[str]:
    return [a.name for a in plan.actions if isinstance(a, Delete)]


def status(plan: Plan) -> dict[str, Any]:
    patches = [a for a in plan.actions if isinstance(a, Patch) and a.subresource == "status"]
    assert len(patches) == 1 and plan.actions[-1] is patches[0], "one status write, after the others"
    return {k: v for k, v in patches[0].patch["status"].items() if v is not None}


def events(plan: Plan) -> list[str]:
    return [n.reason for n in plan.notes]


def test_the_most_recent_time_due_makes_its_job_named_after_the_minute() -> None:
    plan = sync(cronjob(), [], "2024-01-01T10:07:10")
    (body,) = created(plan)
    scheduled = at("2024-01-01T10:05:00")
    assert body["metadata"]["name"] == job_name("report", scheduled) == f"report-{int(scheduled.timestamp()) // 60}"
    assert body["metadata"]["labels"] == {"team": "ml"}
    assert body["metadata"]["annotations"] == {
        "owner": "ana",
        names.ANNOTATION_CRONJOB_SCHEDULED_TIMESTAMP: "2024-01-01T10:05:00Z",
    }
    (owner,) = body["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "CronJob",
        "report",
        "uid-report",
        True,
    )
    assert body["spec"] == TEMPLATE["spec"]
    assert status(plan) == {
        "active": [{"apiVersion": "batch/v1", "kind": "Job", "name": body["metadata"]["name"], "namespace": "ns"}],
        "lastScheduleTime": "2024-01-01T10:05:00Z",
    }
    assert plan.actions[0].note is not None and plan.actions[0].note.reason == "SuccessfulCreate"  # type: ignore[union-attr]
    assert plan.requeue_after == pytest.approx(170.1)  # just after 10:10


def test_nothing_before_the_first_time_and_nothing_twice() -> None:
    early = sync(cronjob(), [], "2024-01-01T10:04:00")
    assert early.actions == [] and early.requeue_after == pytest.approx(60.1)
    name = job_name("report", at("2024-01-01T10:05:00"))
    ran = cronjob(status={"active": [ref(name)], "lastScheduleTime": "2024-01-01T10:05:00Z"})
    again = sync(ran, [job(name)], "2024-01-01T10:07:00")
    assert again.actions == [] and again.notes == []


def test_a_job_made_by_the_last_sync_gets_its_uid_once_it_shows() -> None:
    name = job_name("report", at("2024-01-01T10:05:00"))
    cj = cronjob(status={"active": [ref(name, uid=False)], "lastScheduleTime": "2024-01-01T10:05:00Z"})
    assert status(sync(cj, [job(name)], "2024-01-01T10:06:00"))["active"] == [ref(name)]


@pytest.mark.parametrize(
    ("policy", "creates", "deletes", "reason"),
    [("Allow", 1, 0, None), ("Forbid", 0, 0, "JobAlreadyActive"), ("Replace", 1, 1, None)],
)
def test_concurrency_policy_while_a_job_runs(policy: str, creates: int, deletes: int, reason: str | None) -> None:
    running = job_name("report", at("2024-01-01T10:05:00"))
    cj = cronjob(
        concurrencyPolicy=policy, status={"active": [ref(running)], "lastScheduleTime": "2024-01-01T10:05:00Z"}
    )
    plan = sync(cj, [job(running)], "2024-01-01T10:10:05")
    assert len(created(plan)) == creates and len(deleted(plan)) == deletes
    assert (reason in events(plan)) if reason else events(plan) == []
    if policy == "Replace":
        (gone,) = [a for a in plan.actions if isinstance(a, Delete)]
        assert (gone.name, gone.propagation) == (running, "Background")
        assert plan.actions.index(gone) < plan.actions.index(next(a for a in plan.actions if isinstance(a, Create)))
        assert [r["name"] for r in status(plan)["active"]] == [job_name("report", at("2024-01-01T10:10:00"))]


def test_starting_deadline_skips_a_time_missed_by_more() -> None:
    late = cronjob("0 * * * *", startingDeadlineSeconds=120)
    assert created(sync(late, [], "2024-01-01T11:05:00")) == []  # 11:00 was 5 minutes ago
    assert [b["metadata"]["name"] for b in created(sync(late, [], "2024-01-01T11:01:00"))] == [
        job_name("report", at("2024-01-01T11:00:00"))
    ]
    assert len(created(sync(cronjob("0 * * * *"), [], "2024-01-01T11:05:00"))) == 1  # no deadline: late is fine


def test_many_missed_times_start_only_the_latest_with_a_warning() -> None:
    plan = sync(cronjob("* * * * *"), [], "2024-01-03T10:00:30")
    assert [b["metadata"]["name"] for b in created(plan)] == [job_name("report", at("2024-01-03T10:00:00"))]
    assert "TooManyMissedTimes" in events(plan)
    few = sync(cronjob("* * * * *"), [], "2024-01-01T10:05:30")
    assert "TooManyMissedTimes" not in events(few) and len(created(few)) == 1


def test_suspended_starts_nothing_but_keeps_status_current() -> None:
    name = job_name("report", at("2024-01-01T10:05:00"))
    cj = cronjob(suspend=True, status={"active": [ref(name)], "lastScheduleTime": "2024-01-01T10:05:00Z"})
    plan = sync(cj, [job(name, outcome="Complete")], "2024-01-01T11:00:00")
    assert created(plan) == [] and plan.requeue_after is None
    assert status(plan) == {"lastScheduleTime": "2024-01-01T10:05:00Z", "lastSuccessfulTime": "2024-01-01T10:05:59Z"}
    assert events(plan) == ["SawCompletedJob"]


def test_finished_missing_and_unexpected_jobs() -> None:
    done, gone, manual = "report-1", "report-2", "report-manual-x7k"
    cj = cronjob(status={"active": [ref(done), ref(gone)], "lastScheduleTime": "2024-01-01T10:05:00Z"})
    plan = sync(cj, [job(done, outcome="Failed"), job(manual)], "2024-01-01T10:06:00")
    assert status(plan) == {"lastScheduleTime": "2024-01-01T10:05:00Z"}  # nothing left active
    assert sorted(events(plan)) == ["MissingJob", "SawCompletedJob", "UnexpectedJob"]
    unexpected = next(n for n in plan.notes if n.reason == "UnexpectedJob")
    assert unexpected.type == "Warning" and unexpected.message.endswith(manual)
    assert "lastSuccessfulTime" not in status(plan), "a failed Job is no success"


def test_history_keeps_the_newest_finished_jobs_by_start_time() -> None:
    succeeded = [job(f"ok-{i}", outcome="Complete", started=f"2024-01-01T1{i}:05:01Z") for i in range(5)]
    failed = [job(f"bad-{i}", outcome="Failed", started=f"2024-01-01T1{i}:06:01Z") for i in range(2)]
    others = [job("theirs", outcome="Complete", owner="other-cronjob")]
    plan = sync(cronjob(suspend=True), [*succeeded, *failed, *others], "2024-01-01T16:00:00")
    assert sorted(deleted(plan)) == ["bad-0", "ok-0", "ok-1"]
    assert all(a.propagation == "Background" for a in plan.actions if isinstance(a, Delete))
    assert status(plan)["lastSuccessfulTime"] == "2024-01-01T14:05:59Z"


def test_a_time_zone_decides_the_wall_clock_and_the_annotation() -> None:
    tokyo = cronjob("0 9 * * *", timeZone="Asia/Tokyo")
    (body,) = created(sync(tokyo, [], "2024-01-02T00:00:30"))  # 09:00:30 in Tokyo
    assert body["metadata"]["annotations"][names.ANNOTATION_CRONJOB_SCHEDULED_TIMESTAMP] == "2024-01-02T09:00:00+09:00"
    assert created(sync(cronjob("0 9 * * *"), [], "2024-01-02T00:00:30")) == []  # UTC: 09:00 is later
    # Without spec.timeZone, the controller's own zone.
    assert len(created(sync(cronjob("0 9 * * *"), [], "2024-01-02T00:00:30", zone("Asia/Tokyo")))) == 1


@pytest.mark.parametrize(
    ("spec", "reason", "message"),
    [
        (
            {"timeZone": "Mars/Olympus"},
            "UnknownTimeZone",
            'invalid timeZone: "Mars/Olympus": unknown time zone Mars/Olympus',
        ),
        (
            {"schedule": "61 * * * *"},
            "UnparseableSchedule",
            'unparseable schedule: "61 * * * *" : end of range (61) above maximum (59): 61',
        ),
        (
            {"schedule": "0 0 30 2 *"},
            "InvalidSchedule",
            "invalid schedule: 0 0 30 2 * : time difference between two schedules is less than 1 second",
        ),
    ],
    ids=["time-zone", "unparseable", "never"],
)
def test_a_schedule_that_cannot_run_says_why_and_waits_for_an_edit(
    spec: dict[str, Any], reason: str, message: str
) -> None:
    plan = sync(cronjob(**spec), [], "2024-01-01T12:00:00")
    assert created(plan) == [] and plan.requeue_after is None
    (told,) = plan.notes
    assert (told.reason, told.type, told.message) == (reason, "Warning", message)


def test_a_cronjob_being_deleted_only_keeps_its_status() -> None:
    cj = cronjob(status={"active": [ref("report-1")]})
    cj["metadata"]["deletionTimestamp"] = "2024-01-01T10:06:00Z"
    plan = sync(cj, [], "2024-01-01T10:07:00")
    assert created(plan) == [] and events(plan) == ["MissingJob"]


def test_most_recent_counts_missed_times_without_stepping_each() -> None:
    hourly = Schedule.parse("@hourly", tz=UTC)
    latest, missed = most_recent(hourly, earliest=at("2024-01-01T00:00:00"), now=at("2024-03-01T12:30:00"))
    assert latest == at("2024-03-01T12:00:00") and missed is Missed.MANY and MAX_MISSED == 100
    assert most_recent(hourly, earliest=at("2024-01-01T00:00:00"), now=at("2024-01-01T00:59:59")) == (None, Missed.NONE)
    assert most_recent(hourly, earliest=at("2024-01-01T00:00:00"), now=at("2024-01-01T01:30:00")) == (
        at("2024-01-01T01:00:00"),
        Missed.NONE,
    )
    assert most_recent(hourly, earliest=at("2024-01-01T00:00:00"), now=at("2024-01-01T03:30:00")) == (
        at("2024-01-01T03:00:00"),
        Missed.FEW,
    )
    with pytest.raises(ScheduleError):
        most_recent(
            Schedule.parse("0 0 30 2 *", tz=UTC), earliest=at("2024-01-01T00:00:00"), now=at("2024-06-01T00:00:00")
        )
