"""Which webhooks a request goes to: rules, scope, matchPolicy and the two label selectors.

Pure and synchronous, so the registry can ask "does any webhook want this write?" without
awaiting; a write nothing matches costs a few comparisons. Semantics are kube-apiserver's
(`admission/plugin/webhook/predicates`): `*` in resources matches only the main resource,
`*/*` everything, `pods/*` every subresource of pods; a Namespaced rule never matches a Namespace
object; the namespaceSelector is applied to the namespace's labels (a Namespace's own labels for
requests on namespaces) and ignored for other cluster-scoped objects; the objectSelector matches
when the new or the old object's labels match.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from apiserver.admission.config import Rule, Webhook
from apiserver.authz.identity import ANONYMOUS, User

__all__ = ["Attributes", "matched_version", "rule_matches", "selectors_match"]

NAMESPACES = "namespaces"


@dataclass(frozen=True, slots=True)
class Attributes:
    """One write, as admission sees it (kube-apiserver's admission.Attributes)."""

    operation: str
    group: str
    version: str
    resource: str
    kind: str
    namespace: str
    name: str
    obj: Mapping[str, Any] | None
    old: Mapping[str, Any] | None
    subresource: str = ""
    dry_run: bool = False
    #: Who asked (the AdmissionReview's userInfo; NodeRestriction's node).
    user: User = ANONYMOUS
    #: The versions this group/resource is also served as (for matchPolicy Equivalent).
    equivalent_versions: tuple[str, ...] = ()


def rule_matches(rule: Rule, attrs: Attributes, version: str) -> bool:
    """Whether `rule` covers the request, seen as `version` of its group/resource."""
    if "*" not in rule.operations and attrs.operation not in rule.operations:
        return False
    if "*" not in rule.api_groups and attrs.group not in rule.api_groups:
        return False
    if "*" not in rule.api_versions and version not in rule.api_versions:
        return False
    if not _scope_matches(rule.scope, attrs):
        return False
    for resource in rule.resources:
        res, _, sub = resource.partition("/")
        if res in ("*", attrs.resource) and sub in ("*", attrs.subresource):
            return True
    return False


def _scope_matches(scope: str, attrs: Attributes) -> bool:
    if scope == "Cluster":
        return not attrs.namespace or attrs.resource == NAMESPACES
    if scope == "Namespaced":
        return bool(attrs.namespace) and attrs.resource != NAMESPACES
    return True


def matched_version(webhook: Webhook, attrs: Attributes) -> str | None:
    """The version the webhook gets the object as: the request's own when a rule covers it, else
    (matchPolicy Equivalent) the first other served version a rule covers; None: not called."""
    if any(rule_matches(rule, attrs, attrs.version) for rule in webhook.rules):
        return attrs.version
    if webhook.match_policy == "Equivalent":
        for version in attrs.equivalent_versions:
            if version != attrs.version and any(rule_matches(rule, attrs, version) for rule in webhook.rules):
                return version
    return None


def _labels(obj: Mapping[str, Any] | None) -> Mapping[str, str] | None:
    if obj is None:
        return None
    labels = (obj.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, Mapping) else {}


def selectors_match(webhook: Webhook, attrs: Attributes, namespace_labels: Callable[[str], Mapping[str, str]]) -> bool:
    """The objectSelector and namespaceSelector both admit the request."""
    objects: Iterable[Mapping[str, str] | None] = (_labels(attrs.obj), _labels(attrs.old))
    present = [labels for labels in objects if labels is not None]
    if not webhook.object_selector.selector.is_empty() and not any(
        webhook.object_selector.matches(labels) for labels in present
    ):
        return False
    if webhook.namespace_selector.selector.is_empty():
        return True
    if attrs.resource == NAMESPACES and not attrs.subresource:
        return any(webhook.namespace_selector.matches(labels) for labels in present)
    if not attrs.namespace:
        return True  # other cluster-scoped objects: the namespaceSelector does not apply
    return webhook.namespace_selector.matches(namespace_labels(attrs.namespace))
