"""When the containers of a simulated pod exit, and what kubelet then reports.

A simulated kubelet starts no container, so nothing would ever exit: Jobs would never finish. So a
pod says how long it runs (`tessera.dev/simulated-run-seconds`, and `tessera.dev/simulated-exit-code`);
a pod with restartPolicy Never or OnFailure (a Job's) runs `DEFAULT_RUN_SECONDS` unless it says
otherwise, one with Always (a Deployment's) runs until deleted. When its time is up kubelet's rules
apply: exit code 0, or restartPolicy Never, ends the pod (Succeeded / Failed, containers
terminated); a failure under OnFailure or Always restarts the containers in place (restartCount + 1)
and the clock starts again. Pure functions over the raw pod; `pods.py` acts on them.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Final

from apis.extension.names import ANNOTATION_SIMULATED_EXIT_CODE, ANNOTATION_SIMULATED_RUN_SECONDS
from apis.k8s.core import Pod

__all__ = ["DEFAULT_RUN_SECONDS", "exit_status", "run_seconds", "started_at"]

DEFAULT_RUN_SECONDS: Final = 5.0


def run_seconds(pod: Pod) -> float | None:
    """How long the pod's containers run before they exit; None: until the pod is deleted.

    A malformed annotation counts as absent (the pod keeps its kind's default), never a crash.
    """
    text = pod.annotations.get(ANNOTATION_SIMULATED_RUN_SECONDS)
    if text is not None:
        if text.strip().lower() == "never":
            return None
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if value >= 0:
            return value
    return None if pod.restart_policy == "Always" else DEFAULT_RUN_SECONDS


def exit_code(pod: Pod) -> int:
    text = pod.annotations.get(ANNOTATION_SIMULATED_EXIT_CODE, "0")
    return int(text) if text.strip().lstrip("-").isdigit() else 1


def _seconds(stamp: object) -> float | None:
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def started_at(raw: Mapping[str, Any]) -> float | None:
    """When the containers last started (the latest running startedAt), None when none runs."""
    starts = [
        _seconds(((s.get("state") or {}).get("running") or {}).get("startedAt"))
        for s in (raw.get("status") or {}).get("containerStatuses") or ()
    ]
    known = [s for s in starts if s is not None]
    return max(known) if known else None


def exit_status(raw: Mapping[str, Any], pod: Pod, *, now: str) -> dict[str, Any]:
    """The status patch after the containers of `raw` exited with the pod's exit code (at `now`)."""
    code = exit_code(pod)
    status = raw.get("status") or {}
    restart = code != 0 and pod.restart_policy != "Never"
    containers = []
    for c in status.get("containerStatuses") or ():
        running = (c.get("state") or {}).get("running") or {}
        ended = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": running.get("startedAt", now),
            "finishedAt": now,
        }
        if restart:
            containers.append(
                {
                    **c,
                    "restartCount": int(c.get("restartCount", 0)) + 1,
                    "lastState": {"terminated": ended},
                    "state": {"running": {"startedAt": now}},
                }
            )
        else:
            containers.append({**c, "ready": False, "started": False, "state": {"terminated": ended}})
    if restart:
        return {"status": {"containerStatuses": containers}}
    conditions = [
        {**c, "status": "False", "reason": "PodCompleted", "lastTransitionTime": now}
        if c.get("type") in ("Ready", "ContainersReady")
        else c
        for c in status.get("conditions") or ()
    ]
    phase = "Succeeded" if code == 0 else "Failed"
    return {"status": {"phase": phase, "conditions": conditions, "containerStatuses": containers}}
