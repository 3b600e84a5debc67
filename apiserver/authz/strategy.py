"""The RBAC kinds' rules on write, as kube-apiserver's `rbac/validation` has them.

Names are path segments (`system:discovery` is a valid ClusterRole name), every rule needs verbs
and either resources with API groups or non-resource URLs (those only in ClusterRoles), and a
binding's `roleRef` is required and cannot change (delete and re-create the binding instead).
Before any of that, a write must not grant what its requester lacks (`escalation.py`): kube
checks escalation ahead of validation, so an escalating write is a 403 even when it is invalid.
"""

from __future__ import annotations

from typing import Any

from apiserver.authz.escalation import EscalationGuard
from apiserver.authz.rbac import PolicyVersion
from apiserver.errors import Cause
from apiserver.strategy import Strategy
from apiserver.validation import validate_metadata

__all__ = ["BindingStrategy", "RoleStrategy", "rbac_strategies"]


def _path_segment_causes(meta: dict[str, Any]) -> list[Cause]:
    causes = validate_metadata({k: v for k, v in meta.items() if k != "name"})
    name = meta.get("name", "")
    if name in (".", "..") or "/" in name or "%" in name:
        causes.append(Cause.invalid("metadata.name", name, "may not be '.' or '..' or contain '/' or '%'"))
    return causes


class _RBACStrategy(Strategy):
    """What both kinds share: every stored change bumps the policy's version (the authorizer's caches)."""

    def __init__(self, version: PolicyVersion) -> None:
        self._version = version

    def on_stored(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        self._version.bump()


class RoleStrategy(_RBACStrategy):
    def __init__(self, *, cluster: bool, guard: EscalationGuard, version: PolicyVersion) -> None:
        super().__init__(version)
        self._cluster = cluster
        self._guard = guard
        self._resource = "clusterroles" if cluster else "roles"

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[Cause]:
        self._guard.check_role(obj, old, resource=self._resource)
        causes = _path_segment_causes(obj.get("metadata") or {})
        rules = obj.get("rules") or []
        if not isinstance(rules, list):
            return [*causes, Cause("rules", "Invalid value: must be a list", "FieldValueTypeInvalid")]
        for i, rule in enumerate(rules):
            path = f"rules[{i}]"
            if not isinstance(rule, dict):
                causes.append(Cause(path, "Invalid value: must be an object", "FieldValueTypeInvalid"))
                continue
            causes += self._rule_causes(rule, path)
        return causes

    def _rule_causes(self, rule: dict[str, Any], path: str) -> list[Cause]:
        causes = []
        if not rule.get("verbs"):
            causes.append(Cause.required(f"{path}.verbs", "verbs must contain at least one value"))
        urls = rule.get("nonResourceURLs")
        where = f"{path}.nonResourceURLs"
        if urls and not self._cluster:
            causes.append(Cause.invalid(where, str(urls), "namespaced rules cannot apply to non-resource URLs"))
        if urls and (rule.get("resources") or rule.get("apiGroups")):
            both = "rules cannot apply to both regular resources and non-resource URLs"
            causes.append(Cause.invalid(where, str(urls), both))
        if not urls and (not rule.get("resources") or "apiGroups" not in rule):
            need = "resource rules must supply at least one api group and resource"
            causes.append(Cause.required(f"{path}.resources", need))
        return causes


class BindingStrategy(_RBACStrategy):
    def __init__(self, *, cluster: bool, guard: EscalationGuard, version: PolicyVersion) -> None:
        super().__init__(version)
        self._guard = guard
        self._resource = "clusterrolebindings" if cluster else "rolebindings"

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[Cause]:
        self._guard.check_binding(obj, old, resource=self._resource)
        causes = _path_segment_causes(obj.get("metadata") or {})
        ref = obj.get("roleRef")
        if not isinstance(ref, dict) or not ref.get("name") or ref.get("kind") not in ("Role", "ClusterRole"):
            causes.append(Cause.required("roleRef", "a kind (Role or ClusterRole) and a name are required"))
        elif old is not None and ref != old.get("roleRef"):
            causes.append(Cause.invalid("roleRef", str(ref.get("name")), "cannot change roleRef"))
        for i, subject in enumerate(obj.get("subjects") or []):
            if not isinstance(subject, dict) or subject.get("kind") not in ("User", "Group", "ServiceAccount"):
                causes.append(
                    Cause.invalid(
                        f"subjects[{i}].kind",
                        str((subject or {}).get("kind")),
                        'must be "User", "Group" or "ServiceAccount"',
                    )
                )
            elif not subject.get("name"):
                causes.append(Cause.required(f"subjects[{i}].name", ""))
        return causes


def rbac_strategies(guard: EscalationGuard, version: PolicyVersion) -> dict[str, Strategy]:
    """By storage id, for the registry's strategy table; `guard` checks escalation on every write,
    and every stored change bumps `version`."""
    return {
        "roles.rbac.authorization.k8s.io": RoleStrategy(cluster=False, guard=guard, version=version),
        "clusterroles.rbac.authorization.k8s.io": RoleStrategy(cluster=True, guard=guard, version=version),
        "rolebindings.rbac.authorization.k8s.io": BindingStrategy(cluster=False, guard=guard, version=version),
        "clusterrolebindings.rbac.authorization.k8s.io": BindingStrategy(cluster=True, guard=guard, version=version),
    }
