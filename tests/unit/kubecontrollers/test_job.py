"""The Job controller's decisions (kubecontrollers.job)."""

from typing import Any

from kubecontrollers.job import sync_job
from kubecontrollers.plan import Create, Delete, Patch
from tests.unit.kubecontrollers.objects import meta, pod

J = ("Job", "train", "uid-j")
NOW = 1_800_000_000.0


def job(**spec: Any) -> dict[str, Any]:
    template = {"metadata": {"labels": {"job-name": "train"}}, "spec": {"restartPolicy": "Never", "containers": []}}
    return {
        "metadata": meta("train", "uid-j"),
        "spec": {"completions": 2, "parallelism": 1, "backoffLimit": 1, "template": template, **spec},
        "status": {"startTime": "2027-01-15T08:00:00Z"},
    }


def status_of(plan: Any) -> dict[str, Any]:
    patch: dict[str, Any] = next(a for a in plan.actions if isinstance(a, Patch)).patch["status"]
    return patch


def types(status: dict[str, Any]) -> set[str]:
    return {c["type"] for c in status.get("conditions") or () if c["status"] == "True"}


def test_runs_parallelism_pods_until_completions_succeed_then_completes() -> None:
    plan = sync_job(job(parallelism=3), [], now=NOW)
    assert sum(isinstance(a, Create) for a in plan.actions) == 2  # never more than the completions missing
    done = [pod("a", owned_by=J, phase="Succeeded"), pod("b", owned_by=J, phase="Succeeded")]
    status = status_of(sync_job(job(), done, now=NOW))
    assert status["succeeded"] == 2 and {"Complete", "SuccessCriteriaMet"} <= types(status)
    assert status["completionTime"]


def test_a_failed_pod_is_retried_after_the_backoff_and_the_limit_fails_the_job() -> None:
    failed = pod("a", owned_by=J, phase="Failed")
    ended = {"terminated": {"exitCode": 1, "finishedAt": "2027-01-15T07:59:50Z"}}  # 10 s before NOW
    failed["status"]["containerStatuses"] = [{"name": "m", "state": ended}]
    plan = sync_job(job(), [failed], now=NOW, backoff_base_s=0)
    assert sum(isinstance(a, Create) for a in plan.actions) == 1
    waiting = sync_job(job(), [failed], now=NOW, backoff_base_s=30)
    assert not any(isinstance(a, Create) for a in waiting.actions) and waiting.requeue_after is not None
    running = pod("c", owned_by=J)
    plan = sync_job(job(), [failed, pod("b", owned_by=J, phase="Failed"), running], now=NOW)
    status = status_of(plan)
    assert "Failed" in types(status) and status["failed"] == 2
    assert [a.name for a in plan.actions if isinstance(a, Delete)] == ["c"]
    reason = next(c["reason"] for c in status["conditions"] if c["type"] == "Failed")
    assert reason == "BackoffLimitExceeded"


def test_a_finished_job_does_nothing() -> None:
    finished = job()
    finished["status"]["conditions"] = [{"type": "Complete", "status": "True"}]
    assert sync_job(finished, [pod("a", owned_by=J)], now=NOW).actions == []
