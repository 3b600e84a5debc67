"""RBAC: allow a request when a rule of a Role or ClusterRole bound to its user matches it.

The same evaluation as kube-apiserver's RBAC authorizer (deny by default, rules only add):
ClusterRoleBindings grant a ClusterRole's rules everywhere; a RoleBinding grants a Role's (or a
ClusterRole's) rules in its own namespace only. A rule matches on verb, API group and resource
(`pods`, `pods/status`, `*`, `*/status`), then `resourceNames` when it lists any (so `create`
and `deletecollection` never match a named rule, nor a `list`/`watch` unless its field selector
names one object, `metadata.name=NAME`, as kube's RequestInfo reads it), or on `nonResourceURLs`
(exact, `*`, or a prefix ending in `*`) for other paths. Subjects are Users, Groups and
ServiceAccounts (`system:serviceaccount:NS:NAME`). Aggregated ClusterRoles are not resolved.

The policy is read from the registry on each request; a cluster has tens of roles, so a scan is
cheaper than an index to keep up to date, and a change applies to the very next request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from apiserver.authz.attributes import Attributes
from apiserver.authz.authorizer import ALLOW, NO_OPINION, Authorizer, Decision
from apiserver.authz.identity import User

__all__ = ["AlwaysAllow", "Authorizer", "PolicySource", "RBACAuthorizer", "rule_allows", "rules_allow"]

Obj = Mapping[str, Any]


class AlwaysAllow:
    """A server without authentication: everyone may do everything (kube's AlwaysAllow)."""

    def authorize(self, attrs: Attributes) -> Decision:
        return ALLOW


class PolicySource(Protocol):
    """Where the RBAC objects are (the registry)."""

    def objects(self, plural: str, namespace: str = "") -> Sequence[Obj]: ...

    def get(self, plural: str, namespace: str, name: str) -> Obj | None: ...


def _matches(values: Iterable[Any], wanted: str) -> bool:
    return any(v in ("*", wanted) for v in values)


def _resource_matches(rule: Obj, attrs: Attributes) -> bool:
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    for resource in rule.get("resources") or ():
        if resource in ("*", combined) or (attrs.subresource and resource == f"*/{attrs.subresource}"):
            return True
    return False


def _url_matches(rule: Obj, path: str) -> bool:
    for url in rule.get("nonResourceURLs") or ():
        if url in ("*", path) or (isinstance(url, str) and url.endswith("*") and path.startswith(url[:-1])):
            return True
    return False


def rule_allows(rule: Obj, attrs: Attributes) -> bool:
    if not _matches(rule.get("verbs") or (), attrs.verb):
        return False
    if not attrs.resource_request:
        return _url_matches(rule, attrs.path)
    if not _matches(rule.get("apiGroups") or (), attrs.group) or not _resource_matches(rule, attrs):
        return False
    names = rule.get("resourceNames") or ()
    return not names or attrs.name in names


def rules_allow(rules: Iterable[Obj], attrs: Attributes) -> bool:
    """Whether any of `rules` allows the request (kube's `rbac.RulesAllow`)."""
    return any(rule_allows(rule, attrs) for rule in rules)


def _subject_matches(subject: Obj, user: User, binding_namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return bool(name == user.name)
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return user.name == f"system:serviceaccount:{namespace}:{name}"
    return False


class RBACAuthorizer:
    def __init__(self, policy: PolicySource) -> None:
        self._policy = policy

    def authorize(self, attrs: Attributes) -> Decision:
        """Allow when a bound rule matches; else no opinion (RBAC never denies)."""
        return ALLOW if rules_allow(self.rules_for(attrs.user, attrs.namespace), attrs) else NO_OPINION

    def rules_for(self, user: User, namespace: str) -> Iterable[Obj]:
        """Every rule that applies to `user` in `namespace` ("" : cluster-wide only)."""
        for binding in self._policy.objects("clusterrolebindings"):
            if self._binds(binding, user, ""):
                yield from self._role_rules(binding, "")
        if namespace:
            for binding in self._policy.objects("rolebindings", namespace):
                if self._binds(binding, user, namespace):
                    yield from self._role_rules(binding, namespace)

    @staticmethod
    def _binds(binding: Obj, user: User, namespace: str) -> bool:
        return any(
            _subject_matches(s, user, namespace) for s in binding.get("subjects") or () if isinstance(s, Mapping)
        )

    def _role_rules(self, binding: Obj, namespace: str) -> Iterable[Obj]:
        ref = binding.get("roleRef") or {}
        if ref.get("kind") == "ClusterRole":
            role = self._policy.get("clusterroles", "", str(ref.get("name", "")))
        elif ref.get("kind") == "Role" and namespace:
            role = self._policy.get("roles", namespace, str(ref.get("name", "")))
        else:
            role = None
        for rule in (role or {}).get("rules") or ():
            if isinstance(rule, Mapping):
                yield rule
