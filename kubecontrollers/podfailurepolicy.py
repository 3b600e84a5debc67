"""A Job's `podFailurePolicy`: what one failed pod means for its Job, as kube's job controller judges it.

The rules are tried in order and the first that matches the failed pod decides (facts from kube's
batch/v1 API and job controller): `onExitCodes` matches when a terminated container (only the one
named by `containerName`, if given) exited with a code `In` the values, or, for `NotIn`, with a
non-zero code not among them; `onPodConditions` matches when the pod has one of the conditions with
its status (default `True`, e.g. `DisruptionTarget` for an eviction). The action: `FailJob` fails the
Job at once (reason `PodFailurePolicy`, running pods deleted), `Ignore` does not count the failure
against `backoffLimit` (nor in `status.failed`) and the pod is replaced, `Count` (also when no rule
matches) counts it. `FailIndex` needs `backoffLimitPerIndex`, which is not covered: it counts.
Pure: called by `job.sync_job`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from kubecontrollers.plan import Obj

__all__ = ["COUNT", "FAIL_JOB", "IGNORE", "Verdict", "judge"]

FAIL_JOB: Final = "FailJob"
IGNORE: Final = "Ignore"
COUNT: Final = "Count"


@dataclass(frozen=True, slots=True)
class Verdict:
    action: str
    #: For FailJob, the Failed condition's message, worded as kube words it.
    message: str = ""


def _terminated(pod: Obj) -> list[tuple[str, int]]:
    """(container name, exit code) of every terminated container, init containers first."""
    status = pod.get("status") or {}
    out: list[tuple[str, int]] = []
    for key in ("initContainerStatuses", "containerStatuses"):
        for container in status.get(key) or ():
            ended = (container.get("state") or {}).get("terminated")
            if isinstance(ended, dict) and isinstance(ended.get("exitCode"), int):
                out.append((str(container.get("name", "")), int(ended["exitCode"])))
    return out


def _exit_code_match(rule: Obj, pod: Obj) -> tuple[str, int] | None:
    requirement: Obj = rule.get("onExitCodes") or {}
    values = set(requirement.get("values") or ())
    wanted = requirement.get("containerName")
    for name, code in _terminated(pod):
        if wanted and name != wanted:
            continue
        operator = requirement.get("operator")
        if (operator == "In" and code in values) or (operator == "NotIn" and code != 0 and code not in values):
            return name, code
    return None


def _condition_match(rule: Obj, pod: Obj) -> bool:
    conditions = {(c.get("type"), c.get("status")) for c in (pod.get("status") or {}).get("conditions") or ()}
    return any(
        (pattern.get("type"), pattern.get("status", "True")) in conditions
        for pattern in rule.get("onPodConditions") or ()
    )


def judge(policy: Obj | None, pod: Obj) -> Verdict:
    """What the failed `pod` means under `policy` (None: no policy, every failure counts)."""
    meta: Any = pod.get("metadata") or {}
    who = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    for index, rule in enumerate((policy or {}).get("rules") or ()):
        action = str(rule.get("action", COUNT))
        if rule.get("onExitCodes") is not None:
            matched = _exit_code_match(rule, pod)
            if matched is None:
                continue
            container, code = matched
            text = (
                f"Container {container} for pod {who} failed with exit code {code} "
                f"matching {action} rule at index {index}"
            )
            return Verdict(action if action in (FAIL_JOB, IGNORE) else COUNT, text)
        if rule.get("onPodConditions") is not None and _condition_match(rule, pod):
            text = f"Pod {who} has condition matching {action} rule at index {index}"
            return Verdict(action if action in (FAIL_JOB, IGNORE) else COUNT, text)
    return Verdict(COUNT)
