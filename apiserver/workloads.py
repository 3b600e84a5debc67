"""Workloads: the defaults and validation kube-apiserver applies to apps/v1, batch/v1 and policy/v1.

Deployments, ReplicaSets, StatefulSets, DaemonSets and Jobs carry a pod template (CronJobs a job
template, checked as a Job's, and a schedule, parsed as kube-controller-manager parses it); the
server fills the template's pod defaults (`pods.default_pod_spec`), checks it as it checks a pod
(`PodStrategy`, fields reported under `spec.template`), and checks the rules each kind adds: a
selector that is required, immutable and matches the template's labels, replicas that are not
negative, the restart policies a kind allows, the update strategy's fields. A Job, unless it asks
for `manualSelector`, gets a selector on its own uid and the labels that go with it, as
kube-apiserver gives it. Status is the controllers' (a status subresource): it starts empty.

Messages follow kube-apiserver's wording, so a user reading `kubectl` output can search for it.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from typing import Any, ClassVar

from apis.errors import ValidationError
from apis.k8s import cron
from apis.k8s.workloads import label_selector_matches, scaled_value
from apiserver.errors import Cause
from apiserver.pods import PodStrategy, default_pod_spec
from apiserver.strategy import Strategy

__all__ = ["STRATEGIES", "CronJobStrategy", "JobStrategy", "PodDisruptionBudgetStrategy", "WorkloadStrategy"]

_JOB_UID = "batch.kubernetes.io/controller-uid"
_JOB_NAME = "batch.kubernetes.io/job-name"
_pod_strategy = PodStrategy()


def _dict(parent: dict[str, Any], name: str) -> dict[str, Any]:
    value = parent.get(name)
    if not isinstance(value, dict):
        value = parent[name] = {}
    return value


def _go(value: object) -> str:
    """A value as kube-apiserver quotes it in messages (JSON is close enough to Go's %v here)."""
    return json.dumps(value, separators=(",", ":"))


def _template_causes(template: Any, path: str = "spec.template") -> list[Cause]:
    """The template checked as a pod, its fields named from the workload (`spec.template.spec…`)."""
    if not isinstance(template, dict):
        return [Cause(path, "Required value", "FieldValueRequired")]
    meta = {k: v for k, v in (template.get("metadata") or {}).items() if k != "name"}
    pod = {"metadata": meta, "spec": template.get("spec"), "status": {}}
    return [Cause(f"{path}.{c.field}", c.message, c.reason) for c in _pod_strategy.validate(json.loads(_go(pod)), None)]


def _restart_policy_causes(template: Any, allowed: tuple[str, ...], path: str = "spec.template") -> list[Cause]:
    """The template's restartPolicy must be one the kind allows."""
    policy = ((template or {}).get("spec") or {}).get("restartPolicy") if isinstance(template, dict) else None
    if policy is None or policy in allowed:
        return []
    supported = ", ".join(f'"{p}"' for p in allowed)
    return [
        Cause(
            f"{path}.spec.restartPolicy",
            f"Unsupported value: {_go(policy)}: supported values: {supported}",
            "FieldValueNotSupported",
        )
    ]


def _not_negative(spec: Mapping[str, Any], fields: tuple[str, ...], path: str) -> list[Cause]:
    causes = []
    for field in fields:
        value = spec.get(field)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            causes.append(Cause(f"{path}.{field}", f"Invalid value: {_go(value)}: must be greater than or equal to 0"))
    return causes


#: A Job's restart policies (its pods end), for Jobs and CronJobs' job templates.
_JOB_RESTART_POLICIES = ("OnFailure", "Never")


def _job_spec_causes(spec: Mapping[str, Any], path: str = "spec") -> list[Cause]:
    """What a JobSpec must satisfy beyond its template (a Job's, or a CronJob's job template's)."""
    fields = ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished")
    causes = _not_negative(spec, fields, path)
    if spec.get("completionMode", "NonIndexed") not in ("NonIndexed", "Indexed"):
        causes.append(
            Cause(
                f"{path}.completionMode",
                f'Unsupported value: {_go(spec.get("completionMode"))}: supported values: "NonIndexed", "Indexed"',
                "FieldValueNotSupported",
            )
        )
    return causes


def _int_or_percent(spec: Mapping[str, Any], field: str, path: str) -> list[Cause]:
    value = spec.get(field)
    if value is None:
        return []
    try:
        scaled_value(value, 100, round_up=True)
    except ValidationError as e:
        return [Cause(f"{path}.{field}", f"Invalid value: {_go(value)}: {e.reason}")]
    if isinstance(value, str) and int(value[:-1]) > 100:
        return [Cause(f"{path}.{field}", f"Invalid value: {_go(value)}: must not be greater than 100%")]
    return []


def _default_rolling(spec: dict[str, Any], field: str, rolling: Mapping[str, Any]) -> None:
    """An update strategy defaulted to RollingUpdate with `rolling`'s parameters; revision history 10."""
    strategy = _dict(spec, field)
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        params = _dict(strategy, "rollingUpdate")
        for key, value in rolling.items():
            params.setdefault(key, value)
    spec.setdefault("revisionHistoryLimit", 10)


class WorkloadStrategy(Strategy):
    """A kind with a selector and a pod template; subclasses add their defaults and rules."""

    kind: ClassVar[str] = ""
    #: restartPolicy values the kind's pods may have.
    restart_policies: ClassVar[tuple[str, ...]] = ("Always",)
    has_replicas: ClassVar[bool] = True

    def prepare_create(self, obj: dict[str, Any]) -> None:
        obj["status"] = {}
        self.default(obj)

    def prepare_update(self, new: dict[str, Any], old: dict[str, Any]) -> None:
        self.default(new)

    def default(self, obj: dict[str, Any]) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict):
            self.default_spec(spec)

    def default_spec(self, spec: dict[str, Any]) -> None:
        """Fill the kind's defaults into `spec`; subclasses add theirs after these."""
        if self.has_replicas:
            spec.setdefault("replicas", 1)
        template = spec.get("template")
        if isinstance(template, dict):
            default_pod_spec(template)

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[Cause]:
        causes = super().validate(obj, old)
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [*causes, Cause("spec", "Required value", "FieldValueRequired")]
        causes += self.validate_spec(spec, old.get("spec") if old is not None else None)
        return causes

    def validate_spec(self, spec: dict[str, Any], old: Any) -> list[Cause]:
        causes: list[Cause] = []
        if self.has_replicas:
            replicas = spec.get("replicas")
            if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
                causes.append(
                    Cause("spec.replicas", f"Invalid value: {_go(replicas)}: must be greater than or equal to 0")
                )
        selector = spec.get("selector")
        template = spec.get("template")
        causes += _template_causes(template)
        if not isinstance(selector, dict):
            causes.append(Cause("spec.selector", "Required value", "FieldValueRequired"))
        elif not selector.get("matchLabels") and not selector.get("matchExpressions"):
            causes.append(
                Cause(
                    "spec.selector",
                    f"Invalid value: {_go(selector)}: empty selector is invalid for {self.kind.lower()}",
                )
            )
        elif isinstance(template, dict):
            labels = (template.get("metadata") or {}).get("labels") or {}
            if not label_selector_matches(selector, labels):
                causes.append(
                    Cause(
                        "spec.template.metadata.labels",
                        f"Invalid value: {_go(labels)}: `selector` does not match template `labels`",
                    )
                )
        if isinstance(old, dict) and old.get("selector") != selector:
            causes.append(Cause("spec.selector", f"Invalid value: {_go(selector)}: field is immutable"))
        causes += _restart_policy_causes(template, self.restart_policies)
        return causes


class ReplicaSetStrategy(WorkloadStrategy):
    kind = "ReplicaSet"


class DeploymentStrategy(WorkloadStrategy):
    kind = "Deployment"

    def default_spec(self, spec: dict[str, Any]) -> None:
        super().default_spec(spec)
        _default_rolling(spec, "strategy", {"maxUnavailable": "25%", "maxSurge": "25%"})
        spec.setdefault("progressDeadlineSeconds", 600)

    def validate_spec(self, spec: dict[str, Any], old: Any) -> list[Cause]:
        causes = super().validate_spec(spec, old)
        strategy = spec.get("strategy") or {}
        kind = strategy.get("type")
        path = "spec.strategy"
        if kind not in ("RollingUpdate", "Recreate"):
            causes.append(
                Cause(
                    f"{path}.type",
                    f'Unsupported value: {_go(kind)}: supported values: "Recreate", "RollingUpdate"',
                    "FieldValueNotSupported",
                )
            )
        elif kind == "Recreate" and strategy.get("rollingUpdate") is not None:
            causes.append(
                Cause(
                    f"{path}.rollingUpdate",
                    "Forbidden: may not be specified when strategy `type` is 'Recreate'",
                    "FieldValueForbidden",
                )
            )
        elif kind == "RollingUpdate":
            rolling = strategy.get("rollingUpdate") or {}
            found = _int_or_percent(rolling, "maxSurge", f"{path}.rollingUpdate")
            found += _int_or_percent(rolling, "maxUnavailable", f"{path}.rollingUpdate")
            surge = 0 if found else scaled_value(rolling.get("maxSurge", 0), 100, round_up=True)
            unavailable = 0 if found else scaled_value(rolling.get("maxUnavailable", 0), 100, round_up=True)
            if not found and surge == 0 and unavailable == 0:
                found.append(
                    Cause(f"{path}.rollingUpdate.maxUnavailable", "Invalid value: 0: may not be 0 when `maxSurge` is 0")
                )
            causes += found
        return causes


class StatefulSetStrategy(WorkloadStrategy):
    kind = "StatefulSet"

    def default_spec(self, spec: dict[str, Any]) -> None:
        super().default_spec(spec)
        spec.setdefault("podManagementPolicy", "OrderedReady")
        _default_rolling(spec, "updateStrategy", {"partition": 0})
        spec.setdefault("persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"})

    def validate_spec(self, spec: dict[str, Any], old: Any) -> list[Cause]:
        causes = super().validate_spec(spec, old)
        policy = spec.get("podManagementPolicy")
        if policy not in ("OrderedReady", "Parallel"):
            causes.append(
                Cause(
                    "spec.podManagementPolicy",
                    f'Unsupported value: {_go(policy)}: supported values: "OrderedReady", "Parallel"',
                    "FieldValueNotSupported",
                )
            )
        if isinstance(old, dict):
            mutable = (
                "replicas",
                "template",
                "updateStrategy",
                "minReadySeconds",
                "persistentVolumeClaimRetentionPolicy",
            )
            if {k: v for k, v in spec.items() if k not in mutable} != {
                k: v for k, v in old.items() if k not in mutable
            }:
                causes.append(
                    Cause(
                        "spec",
                        "Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', "
                        "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' "
                        "are forbidden",
                        "FieldValueForbidden",
                    )
                )
        return causes


class DaemonSetStrategy(WorkloadStrategy):
    kind = "DaemonSet"
    has_replicas = False

    def default_spec(self, spec: dict[str, Any]) -> None:
        super().default_spec(spec)
        _default_rolling(spec, "updateStrategy", {"maxUnavailable": 1, "maxSurge": 0})


class JobStrategy(WorkloadStrategy):
    """A Job: completions/parallelism/backoffLimit defaults, a generated selector, an immutable template."""

    kind = "Job"
    restart_policies = _JOB_RESTART_POLICIES
    has_replicas = False

    def prepare_create(self, obj: dict[str, Any]) -> None:
        super().prepare_create(obj)
        spec = obj.get("spec")
        if not isinstance(spec, dict) or spec.get("manualSelector") is True:
            return
        meta = obj["metadata"]
        uid, name = meta["uid"], meta["name"]
        spec["selector"] = {"matchLabels": {_JOB_UID: uid}}
        template = spec.get("template")
        if isinstance(template, dict):
            labels = _dict(_dict(template, "metadata"), "labels")
            labels.update({_JOB_UID: uid, _JOB_NAME: name, "controller-uid": uid, "job-name": name})

    def default_spec(self, spec: dict[str, Any]) -> None:
        super().default_spec(spec)
        if spec.get("completions") is None and spec.get("parallelism") is None:
            spec["completions"] = 1
        spec.setdefault("parallelism", 1)
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
        spec.setdefault("manualSelector", None)
        if spec["manualSelector"] is None:
            spec.pop("manualSelector")

    def validate_spec(self, spec: dict[str, Any], old: Any) -> list[Cause]:
        causes = super().validate_spec(spec, old) + _job_spec_causes(spec)
        if isinstance(old, dict):
            for field in ("template", "completions", "completionMode"):
                if spec.get(field) != old.get(field):
                    causes.append(Cause(f"spec.{field}", f"Invalid value: {_go(spec.get(field))}: field is immutable"))
        return causes


class CronJobStrategy(Strategy):
    """A CronJob: kube's defaults (concurrencyPolicy Allow, suspend false, history limits 3 and 1),
    its schedule parsed as kube-controller-manager parses it (`apis.k8s.cron`), its time zone one
    of the IANA database's, and its job template checked as a Job's (its selector is generated per
    Job, so the template may not set one)."""

    def prepare_create(self, obj: dict[str, Any]) -> None:
        obj["status"] = {}
        self._default(obj)

    def prepare_update(self, new: dict[str, Any], old: dict[str, Any]) -> None:
        self._default(new)

    def _default(self, obj: dict[str, Any]) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        spec.setdefault("concurrencyPolicy", "Allow")
        spec.setdefault("suspend", False)
        spec.setdefault("successfulJobsHistoryLimit", 3)
        spec.setdefault("failedJobsHistoryLimit", 1)
        template = (spec.get("jobTemplate") or {}).get("spec") if isinstance(spec.get("jobTemplate"), dict) else None
        if isinstance(template, dict) and isinstance(template.get("template"), dict):
            default_pod_spec(template["template"])

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[Cause]:
        causes = super().validate(obj, old)
        name = (obj.get("metadata") or {}).get("name")
        if old is None and isinstance(name, str) and len(name) > _CRONJOB_NAME_MAX:
            # The controller names each Job `NAME-<minutes since the epoch>` (11 more characters).
            causes.append(Cause("metadata.name", f"Invalid value: {_go(name)}: must be no more than 52 characters"))
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [*causes, Cause("spec", "Required value", "FieldValueRequired")]
        old_spec = (old or {}).get("spec") if isinstance((old or {}).get("spec"), dict) else None
        return causes + self._spec_causes(spec, old_spec)

    def _spec_causes(self, spec: dict[str, Any], old: dict[str, Any] | None) -> list[Cause]:
        causes: list[Cause] = []
        schedule, time_zone = spec.get("schedule"), spec.get("timeZone")
        if not schedule:
            causes.append(Cause("spec.schedule", "Required value", "FieldValueRequired"))
        elif isinstance(schedule, str):
            causes += _schedule_causes(schedule, time_zone, tz_allowed="TZ" in str((old or {}).get("schedule", "")))
        causes += _not_negative(spec, ("startingDeadlineSeconds",), "spec")
        if time_zone is not None and (old is None or old.get("timeZone") != time_zone):
            causes += _time_zone_causes(time_zone)
        policy = spec.get("concurrencyPolicy")
        if not policy:
            causes.append(Cause("spec.concurrencyPolicy", "Required value", "FieldValueRequired"))
        elif policy not in ("Allow", "Forbid", "Replace"):
            causes.append(
                Cause(
                    "spec.concurrencyPolicy",
                    f'Unsupported value: {_go(policy)}: supported values: "Allow", "Forbid", "Replace"',
                    "FieldValueNotSupported",
                )
            )
        causes += _not_negative(spec, ("successfulJobsHistoryLimit", "failedJobsHistoryLimit"), "spec")
        return causes + _job_template_causes(spec.get("jobTemplate"))


_CRONJOB_NAME_MAX = 52


def _schedule_causes(schedule: str, time_zone: object, *, tz_allowed: bool) -> list[Cause]:
    causes = []
    try:
        cron.Schedule.parse(schedule, tz=datetime.UTC)
    except cron.ScheduleError as e:
        causes.append(Cause("spec.schedule", f"Invalid value: {_go(schedule)}: {e}"))
    if "TZ" in schedule and tz_allowed and time_zone is not None:
        message = "cannot use both timeZone field and TZ or CRON_TZ in schedule"
        causes.append(Cause("spec.schedule", f"Invalid value: {_go(schedule)}: {message}"))
    elif "TZ" in schedule and not tz_allowed:
        message = "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
        causes.append(Cause("spec.schedule", f"Invalid value: {_go(schedule)}: {message}"))
    return causes


def _time_zone_causes(time_zone: object) -> list[Cause]:
    if not isinstance(time_zone, str):
        return []  # the schema's decoding refuses a non-string
    if not time_zone:
        return [Cause("spec.timeZone", f"Invalid value: {_go(time_zone)}: timeZone must be nil or non-empty string")]
    try:
        cron.zone(time_zone)
    except cron.UnknownZoneError as e:
        return [Cause("spec.timeZone", f"Invalid value: {_go(time_zone)}: {e}")]
    return []


def _job_template_causes(job_template: object) -> list[Cause]:
    """A CronJob's jobTemplate, checked as a Job's spec (kube's ValidateJobTemplateSpec)."""
    path = "spec.jobTemplate.spec"
    spec = job_template.get("spec") if isinstance(job_template, dict) else None
    if not isinstance(spec, dict):
        return [Cause(path, "Required value", "FieldValueRequired")]
    template = spec.get("template")
    causes = _template_causes(template, f"{path}.template")
    causes += _restart_policy_causes(template, _JOB_RESTART_POLICIES, f"{path}.template")
    causes += _job_spec_causes(spec, path)
    if spec.get("selector") is not None:
        causes.append(
            Cause(f"{path}.selector", f"Invalid value: {_go(spec['selector'])}: `selector` will be auto-generated")
        )
    if spec.get("manualSelector") is True:
        causes.append(
            Cause(
                f"{path}.manualSelector",
                'Unsupported value: true: supported values: "nil", "false"',
                "FieldValueNotSupported",
            )
        )
    return causes


class PodDisruptionBudgetStrategy(Strategy):
    """minAvailable or maxUnavailable (not both), each an integer or a percentage."""

    def prepare_create(self, obj: dict[str, Any]) -> None:
        obj["status"] = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[Cause]:
        causes = super().validate(obj, old)
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [*causes, Cause("spec", "Required value", "FieldValueRequired")]
        if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
            causes.append(
                Cause(
                    "spec",
                    f"Invalid value: {_go(spec)}: minAvailable and maxUnavailable cannot be both set",
                )
            )
        causes += _int_or_percent(spec, "minAvailable", "spec")
        causes += _int_or_percent(spec, "maxUnavailable", "spec")
        selector = spec.get("selector")
        if selector is not None and not isinstance(selector, dict):
            causes.append(Cause("spec.selector", "must be a label selector", "FieldValueTypeInvalid"))
        return causes


#: Storage id -> strategy, for the server to add to its registry's.
STRATEGIES: Mapping[str, Strategy] = {
    "deployments.apps": DeploymentStrategy(),
    "replicasets.apps": ReplicaSetStrategy(),
    "statefulsets.apps": StatefulSetStrategy(),
    "daemonsets.apps": DaemonSetStrategy(),
    "jobs.batch": JobStrategy(),
    "cronjobs.batch": CronJobStrategy(),
    "poddisruptionbudgets.policy": PodDisruptionBudgetStrategy(),
}
