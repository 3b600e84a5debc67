"""The Job controller's decisions: run pods until enough succeed, retry failures up to backoffLimit.

As upstream, for NonIndexed Jobs: up to `parallelism` pods run at once, never more than the
completions still missing; a failed pod (phase Failed; with restartPolicy OnFailure, each container
restart) counts against `backoffLimit`, and its replacement waits the failure backoff (base · 2^(n-1),
capped at 6 minutes); past the limit the Job fails (`BackoffLimitExceeded`), as past
`activeDeadlineSeconds` (`DeadlineExceeded`), and its running pods are deleted. It completes when
`completions` pods succeeded (or, without completions, when one did and none runs), with the
SuccessCriteriaMet and Complete conditions and a completionTime. `suspend: true` deletes the
running pods and says Suspended. Not covered: Indexed completion, pod failure policies,
ttlSecondsAfterFinished, the pod-tracking finalizer.
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Final

from apis.k8s.meta import now_rfc3339
from apis.k8s.workloads import is_pod_active, is_pod_ready
from kube.events import WARNING
from kubecontrollers.kinds import JOBS, PODS
from kubecontrollers.plan import (
    Delete,
    Obj,
    Plan,
    controlled_by,
    create_pod,
    note,
    owner_reference,
    pod_from_template,
    random_suffix,
    status_patch,
    with_condition,
)

__all__ = ["MAX_BACKOFF_S", "is_finished", "sync_job"]

MAX_BACKOFF_S: Final = 360.0
_REACHED: Final = "Reached expected number of succeeded pods"


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase", ""))


def _restarts(pod: Obj) -> int:
    return sum(int(s.get("restartCount", 0)) for s in (pod.get("status") or {}).get("containerStatuses") or ())


def _seconds(stamp: object) -> float | None:
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def is_finished(job: Obj) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or ()
    )


def _finished_at(pod: Obj) -> float:
    """When the pod's last container ended (0 when unknown)."""
    ends = [
        _seconds(((s.get("state") or {}).get("terminated") or {}).get("finishedAt"))
        for s in (pod.get("status") or {}).get("containerStatuses") or ()
    ]
    return max((e for e in ends if e is not None), default=0.0)


def sync_job(
    job: Obj, pods: Sequence[Obj], *, now: float, backoff_base_s: float = 10.0, rng: random.Random | None = None
) -> Plan:
    """What `job` needs, given the pods of its namespace. `now`: seconds since the epoch."""
    plan = Plan()
    meta, spec = _meta(job), job.get("spec") or {}
    namespace, name = str(meta.get("namespace", "")), str(meta["name"])
    old = job.get("status") or {}
    owned = [p for p in pods if controlled_by(p, meta["uid"])]
    if meta.get("deletionTimestamp") or is_finished(job):
        return plan
    active = [p for p in owned if is_pod_active(p)]
    succeeded = sum(1 for p in owned if _phase(p) == "Succeeded")
    failed_pods = [p for p in owned if _phase(p) == "Failed"]
    on_failure = ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy") == "OnFailure"
    failures = len(failed_pods) + (sum(_restarts(p) for p in active) if on_failure else 0)
    completions = spec.get("completions")
    parallelism = int(spec.get("parallelism", 1))
    status: dict[str, Any] = {k: v for k, v in old.items() if k in ("startTime", "conditions")}
    conditions = list(old.get("conditions") or ())
    suspended = bool(spec.get("suspend"))
    if not suspended and "startTime" not in status:
        status["startTime"] = now_rfc3339()
    started = _seconds(status.get("startTime"))
    deadline = spec.get("activeDeadlineSeconds")
    failure = ""
    if failures > int(spec.get("backoffLimit", 6)):
        failure = "BackoffLimitExceeded"
        message = "Job has reached the specified backoff limit"
    elif deadline is not None and started is not None and now >= started + int(deadline):
        failure = "DeadlineExceeded"
        message = "Job was active longer than specified deadline"
    elif deadline is not None and started is not None:
        plan.later(started + int(deadline) - now)
    complete = (completions is not None and succeeded >= int(completions)) or (
        completions is None and succeeded > 0 and not active
    )
    if failure or complete or suspended:
        want = 0
    elif completions is None:
        want = parallelism if succeeded == 0 else len(active)
    else:
        want = min(parallelism, int(completions) - succeeded)
    removed = max(0, len(active) - want)
    if removed:
        for pod in active[:removed]:
            pmeta = _meta(pod)
            told = note(job, JOBS, "SuccessfulDelete", f"Deleted pod: {pmeta['name']}")
            plan.actions.append(Delete(PODS, namespace, str(pmeta["name"]), str(pmeta["uid"]), note=told))
    elif len(active) < want:
        wait = _backoff_left(failed_pods, len(failed_pods), now, backoff_base_s)
        if wait > 0:
            plan.later(wait)
        else:
            ref = owner_reference(job, JOBS)
            template = spec.get("template") or {}
            for _ in range(want - len(active)):
                body = pod_from_template(template, namespace=namespace, name=f"{name}-{random_suffix(rng)}", owner=ref)
                told = note(job, JOBS, "SuccessfulCreate", f"Created pod: {body['metadata']['name']}")
                plan.actions.append(create_pod(body, told))
    if failure:
        conditions = with_condition(conditions, "FailureTarget", "True", failure, message)
        conditions = with_condition(conditions, "Failed", "True", failure, message)
    elif complete and not active:
        for kind in ("SuccessCriteriaMet", "Complete"):
            conditions = with_condition(conditions, kind, "True", "CompletionsReached", _REACHED)
        status["completionTime"] = old.get("completionTime") or now_rfc3339()
    if suspended:
        conditions = with_condition(conditions, "Suspended", "True", "JobSuspended", "Job suspended")
    elif any(c.get("type") == "Suspended" for c in conditions):
        conditions = with_condition(conditions, "Suspended", "False", "JobResumed", "Job resumed")
    status.update(
        {
            "active": len(active) - removed,
            "succeeded": succeeded,
            "failed": len(failed_pods),
            "ready": sum(1 for p in active if is_pod_ready(p)),
            "terminating": 0,
            "uncountedTerminatedPods": {},
        }
    )
    status = {k: v for k, v in status.items() if v not in (0, None) or k in ("ready", "terminating")}
    if conditions:
        status["conditions"] = conditions
    write = status_patch(job, JOBS, status)
    if write is not None:
        if failure and not is_finished(job):
            write = replace(write, note=note(job, JOBS, failure, message, WARNING))
        elif complete and not active and not is_finished(job):
            write = replace(write, note=note(job, JOBS, "Completed", "Job completed"))
        plan.actions.append(write)
    return plan


def _backoff_left(failed: list[Obj], count: int, now: float, base: float) -> float:
    """Seconds until a replacement may start after `count` failures (0: now)."""
    if count == 0:
        return 0.0
    delay = min(base * 2.0 ** (count - 1), MAX_BACKOFF_S)
    last = max((_finished_at(p) for p in failed), default=0.0)
    return max(0.0, last + delay - now)
