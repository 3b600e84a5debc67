"""RBAC: allow a request when a rule of a Role or ClusterRole bound to its user matches it.

The same evaluation as kube-apiserver's RBAC authorizer (deny by default, rules only add):
ClusterRoleBindings grant a ClusterRole's rules everywhere; a RoleBinding grants a Role's (or a
ClusterRole's) rules in its own namespace only. A rule matches on verb, API group and resource
(`pods`, `pods/status`, `*`, `*/status`), then `resourceNames` when it lists any (so `create`
and `deletecollection` never match a named rule, nor a `list`/`watch` unless its field selector
names one object, `metadata.name=NAME`, as kube's RequestInfo reads it), or on `nonResourceURLs`
(exact, `*`, or a prefix ending in `*`) for other paths. Subjects are Users, Groups and
ServiceAccounts (`system:serviceaccount:NS:NAME`). Aggregated ClusterRoles are not resolved.
Members of `system:masters` are allowed everything before any rule is read, as kube-apiserver's
privileged-group authorizer (ahead of RBAC) allows them: deleting the `cluster-admin` binding
cannot lock the administrator out.

The rules that apply to one user in one namespace are gathered from the registry once and kept
until any Role, ClusterRole or binding changes (`PolicyVersion`, bumped by the RBAC strategies as
each change is stored): gathering them scans every binding (about 50 µs with `deploy/`'s RBAC),
the cache answers in a dictionary lookup, and a change still applies to the very next request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from apiserver.authz.attributes import Attributes
from apiserver.authz.authorizer import ALLOW, NO_OPINION, Authorizer, Decision
from apiserver.authz.identity import MASTERS, User

__all__ = [
    "FULL_AUTHORITY",
    "AlwaysAllow",
    "Authorizer",
    "PolicySource",
    "PolicyVersion",
    "RBACAuthorizer",
    "rule_allows",
    "rules_allow",
]

Obj = Mapping[str, Any]
#: What cluster-admin holds (and what `system:masters` and AlwaysAllow are treated as holding).
FULL_AUTHORITY: tuple[Obj, ...] = (
    {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
    {"verbs": ["*"], "nonResourceURLs": ["*"]},
)


class AlwaysAllow:
    """A server without authentication: everyone may do everything (kube's AlwaysAllow)."""

    def authorize(self, attrs: Attributes) -> Decision:
        return ALLOW

    def rules_for(self, user: User, namespace: str) -> Iterable[Obj]:
        return FULL_AUTHORITY


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


class PolicyVersion:
    """Counts stored changes to RBAC objects (the RBAC strategies bump it): what caches of the
    policy key on."""

    def __init__(self) -> None:
        self.value = 0

    def bump(self) -> None:
        self.value += 1


_MAX_CACHED = 4096


class RBACAuthorizer:
    def __init__(self, policy: PolicySource, version: PolicyVersion | None = None) -> None:
        """With `version`, each user's rules per namespace are cached until it changes."""
        self._policy = policy
        self._version = version
        self._cache: dict[tuple[str, tuple[str, ...], str], tuple[Obj, ...]] = {}
        self._cached_at = -1

    def authorize(self, attrs: Attributes) -> Decision:
        """Allow `system:masters` at once, else when a bound rule matches; else no opinion (RBAC
        never denies)."""
        if MASTERS in attrs.user.groups:
            return ALLOW
        return ALLOW if rules_allow(self._rules(attrs.user, attrs.namespace), attrs) else NO_OPINION

    def rules_for(self, user: User, namespace: str) -> Iterable[Obj]:
        if MASTERS in user.groups:
            return FULL_AUTHORITY
        return self._rules(user, namespace)

    def _rules(self, user: User, namespace: str) -> Iterable[Obj]:
        if self._version is None:
            return self.bound_rules(user, namespace)
        if self._cached_at != self._version.value or len(self._cache) > _MAX_CACHED:
            self._cache.clear()
            self._cached_at = self._version.value
        key = (user.name, user.groups, namespace)
        rules = self._cache.get(key)
        if rules is None:
            rules = self._cache[key] = tuple(self.bound_rules(user, namespace))
        return rules

    def role_rules(self, kind: str, name: str, namespace: str) -> Sequence[Obj] | None:
        """The rules of a binding's roleRef (a Role in `namespace`, or a ClusterRole); None when it does not exist."""
        if kind == "ClusterRole":
            role = self._policy.get("clusterroles", "", name)
        elif kind == "Role" and namespace:
            role = self._policy.get("roles", namespace, name)
        else:
            return None
        if role is None:
            return None
        return [r for r in role.get("rules") or () if isinstance(r, Mapping)]

    def bound_rules(self, user: User, namespace: str) -> Iterable[Obj]:
        """Every rule the bindings give `user` in `namespace` ("" : cluster-wide only)."""
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
        return self.role_rules(str(ref.get("kind", "")), str(ref.get("name", "")), namespace) or ()
