"""Workloads: the defaults and validation kube-apiserver applies to apps/v1, batch/v1 and policy/v1.

Deployments, ReplicaSets, StatefulSets, DaemonSets and Jobs carry a pod template; the server
fills the template's pod defaults (`pods.default_pod_spec`), checks it as it checks a pod
(`PodStrategy`, fields reported under `spec.template`), and checks the rules each kind adds: a
selector that is required, immutable and matches the template's labels, replicas that are not
negative, the restart policies a kind allows, the update strategy's fields. A Job, unless it asks
for `manualSelector`, gets a selector on its own uid and the labels that go with it, as
kube-apiserver gives it. Status is the controllers' (a status subresource): it starts empty.

Messages follow kube-apiserver's wording, so a user reading `kubectl` output can search for it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from apis.errors import ValidationError
from apis.k8s.workloads import label_selector_matches, scaled_value
from apiserver.errors import Cause
from apiserver.pods import PodStrategy, default_pod_spec
from apiserver.strategy import Strategy

__all__ = ["STRATEGIES", "JobStrategy", "PodDisruptionBudgetStrategy", "WorkloadStrategy"]

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


def _template_causes(template: Any) -> list[Cause]:
    """The template checked as a pod, its fields named from the workload (`spec.template.spec…`)."""
    if not isinstance(template, dict):
        return [Cause("spec.template", "Required value", "FieldValueRequired")]
    meta = {k: v for k, v in (template.get("metadata") or {}).items() if k != "name"}
    pod = {"metadata": meta, "spec": template.get("spec"), "status": {}}
    return [
        Cause(f"spec.template.{c.field}", c.message, c.reason)
        for c in _pod_strategy.validate(json.loads(_go(pod)), None)
    ]


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
        policy = ((template or {}).get("spec") or {}).get("restartPolicy") if isinstance(template, dict) else None
        if policy is not None and policy not in self.restart_policies:
            supported = ", ".join(f'"{p}"' for p in self.restart_policies)
            causes.append(
                Cause(
                    "spec.template.spec.restartPolicy",
                    f"Unsupported value: {_go(policy)}: supported values: {supported}",
                    "FieldValueNotSupported",
                )
            )
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
    restart_policies = ("OnFailure", "Never")
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
        causes = super().validate_spec(spec, old)
        for field in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
            value = spec.get(field)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                causes.append(
                    Cause(f"spec.{field}", f"Invalid value: {_go(value)}: must be greater than or equal to 0")
                )
        if spec.get("completionMode") not in ("NonIndexed", "Indexed"):
            causes.append(
                Cause(
                    "spec.completionMode",
                    f'Unsupported value: {_go(spec.get("completionMode"))}: supported values: "NonIndexed", "Indexed"',
                    "FieldValueNotSupported",
                )
            )
        if isinstance(old, dict):
            for field in ("template", "completions", "completionMode"):
                if spec.get(field) != old.get(field):
                    causes.append(Cause(f"spec.{field}", f"Invalid value: {_go(spec.get(field))}: field is immutable"))
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
    "poddisruptionbudgets.policy": PodDisruptionBudgetStrategy(),
}
