"""`ttlSecondsAfterFinished`: a finished Job is deleted that long after it finished.

As kube's TTL-after-finished controller: the clock starts at the `lastTransitionTime` of the Job's
Complete or Failed condition; when it has run out the Job is deleted with Foreground propagation
(its pods go first, then the Job), guarded by the Job's uid; until then the Job is looked at again
when it will have. A Job without the field is kept forever. Pure: called by `job.sync_job` for
finished Jobs.
"""

from __future__ import annotations

import datetime

from kubecontrollers.kinds import JOBS
from kubecontrollers.plan import Delete, Obj, Plan

__all__ = ["expire"]


def _finished_at(job: Obj) -> float | None:
    for condition in (job.get("status") or {}).get("conditions") or ():
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            stamp = condition.get("lastTransitionTime")
            if isinstance(stamp, str):
                try:
                    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
                except ValueError:
                    return None
    return None


def expire(job: Obj, *, now: float) -> Plan:
    """The delete of a finished `job` whose TTL ran out, or when to look again (nothing without a TTL)."""
    plan = Plan()
    ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
    finished = _finished_at(job)
    if not isinstance(ttl, int) or isinstance(ttl, bool) or finished is None:
        return plan
    left = finished + ttl - now
    if left > 0:
        plan.later(left)
        return plan
    meta = job.get("metadata") or {}
    plan.actions.append(
        Delete(
            JOBS,
            str(meta.get("namespace", "")),
            str(meta["name"]),
            str(meta["uid"]),
            propagation="Foreground",
        )
    )
    return plan
