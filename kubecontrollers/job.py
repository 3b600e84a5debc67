"""The Job controller's decisions: run pods until enough succeed, retry failures up to backoffLimit.

As upstream, for NonIndexed Jobs: up to `parallelism` pods run at once, never more than the
completions still missing; a failed pod (phase Failed; with restartPolicy OnFailure, each container
restart) counts against `backoffLimit`, and its replacement waits the failure backoff (base · 2^(n-1),
capped at 6 minutes); past the limit the Job fails (`BackoffLimitExceeded`), as past
`activeDeadlineSeconds` (`DeadlineExceeded`), and its running pods are deleted. It completes when
`completions` pods succeeded (or, without completions, when one did and none runs), with the
SuccessCriteriaMet and Complete conditions and a completionTime. `suspend: true` deletes the
running pods and says Suspended.

`completionMode: Indexed` (one index per rank: PyTorch elastic, JobSet): each of the indexes
0 … completions-1 needs one pod that succeeds. A pod is made for the lowest indexes that neither
succeeded nor have an active pod, up to `parallelism` at once, named `NAME-INDEX-xxxxx`, with the
index as the annotation and label `batch.kubernetes.io/job-completion-index`, the environment
variable `JOB_COMPLETION_INDEX` (from that annotation, by the downward API) in every container, and
the hostname `NAME-INDEX`; a failed index is made again with the same index. A second active pod of
an index, or an active pod of an index that succeeded, is deleted. `status.completedIndexes` lists
the succeeded indexes as intervals (`0-2,4`), and `succeeded` counts them. A gang over the Job's
pods (Koordinator's gang annotations on the template, min-available = parallelism; or the label of
a scheduler-plugins PodGroup with minMember = parallelism) is created in
one sync, so the scheduler binds all ranks or none.

`podFailurePolicy` decides what each failed pod means (podfailurepolicy.py), and a finished Job with
`ttlSecondsAfterFinished` is deleted that long after it finished (ttlafterfinished.py). Not
covered: backoffLimitPerIndex (FailIndex), successPolicy, the pod-tracking finalizer (failures are
counted from the pods that still exist).
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Final

from apis.extension import names
from apis.k8s.meta import now_rfc3339
from apis.k8s.workloads import is_pod_active, is_pod_ready
from kube.events import WARNING
from kubecontrollers import podfailurepolicy, ttlafterfinished
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

__all__ = ["MAX_BACKOFF_S", "completed_indexes", "completion_index", "is_finished", "sync_job"]

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


def completion_index(pod: Obj, completions: int) -> int | None:
    """An Indexed Job pod's index (its annotation, else its label), None when missing or out of range."""
    meta = _meta(pod)
    for source in (meta.get("annotations") or {}, meta.get("labels") or {}):
        text = source.get(names.JOB_COMPLETION_INDEX)
        if isinstance(text, str) and text.isdigit() and int(text) < completions:
            return int(text)
    return None


def completed_indexes(indexes: set[int]) -> str:
    """Indexes as kube writes status.completedIndexes: sorted intervals, `0-2,4,6-7`."""
    out: list[str] = []
    run: list[int] = []
    for i in sorted(indexes):
        if run and i != run[-1] + 1:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
            run = []
        run.append(i)
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def _indexed_pod(
    template: Obj, *, job: str, namespace: str, index: int, owner: dict[str, Any], rng: Any
) -> dict[str, Any]:
    """A pod for `index`, as kube's job controller makes one (see the module docstring)."""
    labels = {names.JOB_COMPLETION_INDEX: str(index)}
    body = pod_from_template(
        template, namespace=namespace, name=f"{job}-{index}-{random_suffix(rng)}", owner=owner, labels=labels
    )
    body["metadata"].setdefault("annotations", {})[names.JOB_COMPLETION_INDEX] = str(index)
    spec = body["spec"]
    env = {
        "name": names.ENV_JOB_COMPLETION_INDEX,
        "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{names.JOB_COMPLETION_INDEX}']"}},
    }
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or ():
            variables = [e for e in container.get("env") or () if e.get("name") != names.ENV_JOB_COMPLETION_INDEX]
            container["env"] = [*variables, dict(env)]
    spec.setdefault("hostname", f"{job}-{index}")
    return body


def sync_job(
    job: Obj, pods: Sequence[Obj], *, now: float, backoff_base_s: float = 10.0, rng: random.Random | None = None
) -> Plan:
    """What `job` needs, given the pods of its namespace. `now`: seconds since the epoch."""
    plan = Plan()
    meta, spec = _meta(job), job.get("spec") or {}
    namespace, name = str(meta.get("namespace", "")), str(meta["name"])
    old = job.get("status") or {}
    owned = [p for p in pods if controlled_by(p, meta["uid"])]
    if meta.get("deletionTimestamp"):
        return plan
    if is_finished(job):
        return ttlafterfinished.expire(job, now=now)
    active = [p for p in owned if is_pod_active(p)]
    failed_pods = [p for p in owned if _phase(p) == "Failed"]
    verdicts = [(p, podfailurepolicy.judge(spec.get("podFailurePolicy"), p)) for p in failed_pods]
    counted = [p for p, v in verdicts if v.action != podfailurepolicy.IGNORE]
    fail_job = next((v for _, v in verdicts if v.action == podfailurepolicy.FAIL_JOB), None)
    on_failure = ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy") == "OnFailure"
    failures = len(counted) + (sum(_restarts(p) for p in active) if on_failure else 0)
    completions = spec.get("completions")
    parallelism = int(spec.get("parallelism", 1))
    indexed = spec.get("completionMode") == "Indexed" and completions is not None
    ranks = int(completions) if indexed and completions is not None else 0
    done_indexes: set[int] = set()
    surplus: list[Obj] = []  # active pods that must go: a second pod of an index, or a finished index's
    if indexed:
        done_indexes = {i for p in owned if _phase(p) == "Succeeded" and (i := completion_index(p, ranks)) is not None}
        by_index: dict[int, Obj] = {}
        for pod in sorted(active, key=lambda p: str(_meta(p).get("creationTimestamp") or "")):
            index = completion_index(pod, ranks)
            if index is None or index in done_indexes or index in by_index:
                surplus.append(pod)
            else:
                by_index[index] = pod
        active = [p for p in active if p not in surplus]
        succeeded = len(done_indexes)
    else:
        succeeded = sum(1 for p in owned if _phase(p) == "Succeeded")
    status: dict[str, Any] = {k: v for k, v in old.items() if k in ("startTime", "conditions")}
    conditions = list(old.get("conditions") or ())
    suspended = bool(spec.get("suspend"))
    if not suspended and "startTime" not in status:
        status["startTime"] = now_rfc3339()
    started = _seconds(status.get("startTime"))
    deadline = spec.get("activeDeadlineSeconds")
    failure = ""
    if fail_job is not None:
        failure, message = "PodFailurePolicy", fail_job.message
    elif failures > int(spec.get("backoffLimit", 6)):
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
    for pod in [*surplus, *active[:removed]]:
        pmeta = _meta(pod)
        told = note(job, JOBS, "SuccessfulDelete", f"Deleted pod: {pmeta['name']}")
        plan.actions.append(Delete(PODS, namespace, str(pmeta["name"]), str(pmeta["uid"]), note=told))
    if not removed and len(active) < want:
        wait = _backoff_left(counted, len(counted), now, backoff_base_s)
        if wait > 0:
            plan.later(wait)
        else:
            ref = owner_reference(job, JOBS)
            template = spec.get("template") or {}
            if indexed:
                taken = {completion_index(p, ranks) for p in active}
                missing = [i for i in range(ranks) if i not in done_indexes and i not in taken]
                for index in missing[: want - len(active)]:
                    body = _indexed_pod(template, job=name, namespace=namespace, index=index, owner=ref, rng=rng)
                    told = note(job, JOBS, "SuccessfulCreate", f"Created pod: {body['metadata']['name']}")
                    plan.actions.append(create_pod(body, told))
            else:
                for _ in range(want - len(active)):
                    body = pod_from_template(
                        template, namespace=namespace, name=f"{name}-{random_suffix(rng)}", owner=ref
                    )
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
            "failed": len(counted),
            "ready": sum(1 for p in active if is_pod_ready(p)),
            "terminating": 0,
            "uncountedTerminatedPods": {},
            "completedIndexes": completed_indexes(done_indexes) if indexed else None,
        }
    )
    status = {k: v for k, v in status.items() if v not in (0, None, "") or k in ("ready", "terminating")}
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
