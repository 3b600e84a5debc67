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


INDEX = "batch.kubernetes.io/job-completion-index"


def indexed_pod(name: str, index: int, phase: str = "Running") -> dict[str, Any]:
    p = pod(name, owned_by=J, phase=phase, **{INDEX: str(index)})
    p["metadata"]["annotations"] = {INDEX: str(index)}
    return p


def test_an_indexed_job_makes_one_pod_per_index_with_its_index_env_and_hostname() -> None:
    plan = sync_job(job(completions=4, parallelism=4, completionMode="Indexed"), [], now=NOW)
    made = [a.body for a in plan.actions if isinstance(a, Create)]
    assert [p["metadata"]["annotations"][INDEX] for p in made] == ["0", "1", "2", "3"]
    assert [p["metadata"]["labels"][INDEX] for p in made] == ["0", "1", "2", "3"]
    assert [p["spec"]["hostname"] for p in made] == ["train-0", "train-1", "train-2", "train-3"]
    assert all(p["metadata"]["name"].startswith(f"train-{i}-") for i, p in enumerate(made))
    env = {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX}']"}}}
    template = {
        "spec": {"restartPolicy": "Never", "containers": [{"name": "a"}, {"name": "b", "env": [{"name": "X"}]}]}
    }
    plan = sync_job(job(completions=1, completionMode="Indexed", template=template), [], now=NOW)
    body = next(a.body for a in plan.actions if isinstance(a, Create))
    assert [c["env"] for c in body["spec"]["containers"]] == [[env], [{"name": "X"}, env]]


def test_an_indexed_job_remakes_failed_indexes_and_completes_when_every_index_succeeded() -> None:
    spec = {"completions": 4, "parallelism": 2, "completionMode": "Indexed", "backoffLimit": 3}
    pods = [indexed_pod("a", 0, "Succeeded"), indexed_pod("b", 1, "Failed"), indexed_pod("c", 2)]
    plan = sync_job(job(**spec), pods, now=NOW, backoff_base_s=0)
    made = [a.body["metadata"]["annotations"][INDEX] for a in plan.actions if isinstance(a, Create)]
    assert made == ["1"]  # parallelism 2: index 2 runs, the lowest missing index (the failed 1) is next
    status = status_of(plan)
    assert (status["succeeded"], status["completedIndexes"], status["failed"]) == (1, "0", 1)
    # A second pod of index 2, and one of the finished index 0, are deleted.
    extra = [indexed_pod("d", 2), indexed_pod("e", 0)]
    extra[0]["metadata"]["creationTimestamp"] = "2024-01-02T00:00:00Z"
    assert sorted(a.name for a in sync_job(job(**spec), pods + extra, now=NOW).actions if isinstance(a, Delete)) == [
        "d",
        "e",
    ]
    finished = [indexed_pod(str(i), i, "Succeeded") for i in (0, 1, 2, 3)] + [indexed_pod("again", 1, "Succeeded")]
    status = status_of(sync_job(job(**spec), finished, now=NOW))
    assert (status["succeeded"], status["completedIndexes"]) == (4, "0-3")
    assert "Complete" in types(status)


def test_completed_indexes_are_written_as_intervals() -> None:
    from kubecontrollers.job import completed_indexes

    assert completed_indexes({0, 1, 2, 4, 6, 7}) == "0-2,4,6-7"
    assert completed_indexes(set()) == ""


def failed_with(code: int, name: str = "f", container: str = "main") -> dict[str, Any]:
    p = pod(name, owned_by=J, phase="Failed")
    p["status"]["containerStatuses"] = [{"name": container, "state": {"terminated": {"exitCode": code}}}]
    return p


POLICY = {
    "rules": [
        {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
        {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [137]}},
    ]
}


def test_pod_failure_policy_fail_job_stops_at_once_with_kubes_message() -> None:
    plan = sync_job(job(podFailurePolicy=POLICY, backoffLimit=6), [failed_with(42), pod("r", owned_by=J)], now=NOW)
    status = status_of(plan)
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "PodFailurePolicy"
    assert failed["message"] == "Container main for pod ns/f failed with exit code 42 matching FailJob rule at index 0"
    assert [a.name for a in plan.actions if isinstance(a, Delete)] == ["r"]
    # The same exit code in another container than the rule names counts as usual.
    other = status_of(sync_job(job(podFailurePolicy=POLICY), [failed_with(42, container="side")], now=NOW))
    assert "Failed" not in types(other) and other["failed"] == 1


def test_pod_failure_policy_ignore_does_not_count_against_the_backoff_limit() -> None:
    evicted = pod("ev", owned_by=J, phase="Failed")
    evicted["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True"})
    pods = [evicted, failed_with(137, "oom")]
    plan = sync_job(job(podFailurePolicy=POLICY, backoffLimit=0), pods, now=NOW, backoff_base_s=0)
    status = status_of(plan)
    assert "Failed" not in types(status) and "failed" not in status
    assert sum(isinstance(a, Create) for a in plan.actions) == 1  # replaced
    # Without the policy, the same two failures exceed backoffLimit 0.
    assert "Failed" in types(status_of(sync_job(job(backoffLimit=0), pods, now=NOW)))


def finished_job(ttl: int | None, at: str = "2027-01-15T08:00:00Z") -> dict[str, Any]:
    j = job() if ttl is None else job(ttlSecondsAfterFinished=ttl)
    j["status"]["conditions"] = [{"type": "Complete", "status": "True", "lastTransitionTime": at}]
    return j


def test_ttl_after_finished_deletes_the_job_in_the_foreground_once_it_ran_out() -> None:
    finished_at = 1_800_000_000.0  # 2027-01-15T08:00:00Z
    plan = sync_job(finished_job(60), [], now=finished_at + 59)
    assert plan.actions == [] and plan.requeue_after is not None and abs(plan.requeue_after - 1) < 1e-6
    plan = sync_job(finished_job(60), [], now=finished_at + 60)
    [delete] = plan.actions
    assert isinstance(delete, Delete)
    assert (delete.name, delete.uid, delete.propagation) == ("train", "uid-j", "Foreground")
    kept = sync_job(finished_job(None), [], now=finished_at + 10**6)
    assert kept.actions == [] and kept.requeue_after is None
