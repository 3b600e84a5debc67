"""RBAC escalation prevention, as kube-apiserver's policy-based RBAC storage has it.

Whoever may write Roles or bindings must not thereby gain (or hand out) what they lack:
- a Role or ClusterRole is written only when the requester's own rules (in the request's
  namespace; cluster-wide only for a ClusterRole) cover every rule in it, or the requester may
  `escalate` roles/clusterroles; setting an `aggregationRule` needs full authority;
- a RoleBinding or ClusterRoleBinding is written only when the requester may `bind` the role it
  refers to, or already holds every rule of that role (where the binding applies);
- members of `system:masters` skip both checks, as does a write that only changes what the
  garbage collector needs (ownerReferences, finalizers).
A refusal is kube's 403: `clusterroles.rbac.authorization.k8s.io "r" is forbidden: user "u"
(groups=["g"]) is attempting to grant RBAC permissions not currently held:` and one line per
missing rule (`{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`). The comparison is
kube's: each rule is broken down into one verb, group, resource (and name, or URL) at a time,
and each of those must be covered by one rule the requester has.

The RBAC strategies (`strategy.py`) call `EscalationGuard` from their validation, which runs in
the request's task: `REQUESTER` (set by the gate) says who is writing. A write without one is
the server's own (the bootstrap policy) and is not checked.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, Protocol

from apiserver.authz.attributes import Attributes
from apiserver.authz.authorizer import Decision
from apiserver.authz.identity import MASTERS, User
from apiserver.authz.rbac import FULL_AUTHORITY
from apiserver.catalog import RBAC_GROUP
from apiserver.errors import StatusError

__all__ = ["REQUESTER", "EscalationGuard", "missing_rules"]

#: Who the current request is from (None: the server itself); set by the gate in the request's task.
REQUESTER: ContextVar[User | None] = ContextVar("tessera_requester", default=None)

Rule = Mapping[str, Any]
#: metadata fields a write may change without an escalation check (kube's IsOnlyMutatingGCFields).
_GC_FIELDS = ("ownerReferences", "finalizers", "managedFields", "resourceVersion")


class RuleSource(Protocol):
    """What the guard asks: the requester's rules and its other grants (the RBAC authorizer)."""

    def authorize(self, attrs: Attributes) -> Decision: ...

    def rules_for(self, user: User, namespace: str) -> Iterable[Rule]: ...

    def role_rules(self, kind: str, name: str, namespace: str) -> Sequence[Rule] | None: ...


def _strings(rule: Rule, key: str) -> list[str]:
    return [str(v) for v in rule.get(key) or ()]


def _breakdown(rule: Rule) -> list[dict[str, list[str]]]:
    """One verb, API group, resource (and resource name) per rule, or one URL and verb (kube's BreakdownRule)."""
    verbs, names = _strings(rule, "verbs"), _strings(rule, "resourceNames")
    out: list[dict[str, list[str]]] = []
    for group in _strings(rule, "apiGroups"):
        for resource in _strings(rule, "resources"):
            for verb in verbs:
                base = {"apiGroups": [group], "resources": [resource], "verbs": [verb]}
                out += [{**base, "resourceNames": [n]} for n in names] if names else [base]
    out += [{"nonResourceURLs": [url], "verbs": [verb]} for url in _strings(rule, "nonResourceURLs") for verb in verbs]
    return out


def _resources_cover(owned: list[str], wanted: list[str]) -> bool:
    if "*" in owned:
        return True
    for resource in wanted:
        if resource in owned:
            continue
        if "/" not in resource or f"*/{resource.split('/', 1)[1]}" not in owned:
            return False
    return True


def _url_covers(owner: str, path: str) -> bool:
    return owner == path or (owner.endswith("*") and path.startswith(owner.rstrip("*")))


def _covers(owner: Rule, sub: dict[str, list[str]]) -> bool:
    """kube's ruleCovers: `owner` (any rule) covers `sub` (one from `_breakdown`)."""
    verbs, groups = _strings(owner, "verbs"), _strings(owner, "apiGroups")
    if "*" not in verbs and not set(sub["verbs"]) <= set(verbs):
        return False
    if "*" not in groups and not set(sub.get("apiGroups", ())) <= set(groups):
        return False
    if not _resources_cover(_strings(owner, "resources"), sub.get("resources", [])):
        return False
    urls = _strings(owner, "nonResourceURLs")
    if not all(any(_url_covers(o, p) for o in urls) for p in sub.get("nonResourceURLs", ())):
        return False
    owner_names = _strings(owner, "resourceNames")
    if not sub.get("resourceNames"):
        return not owner_names
    return not owner_names or set(sub["resourceNames"]) <= set(owner_names)


def missing_rules(owner: Iterable[Rule], wanted: Iterable[Rule]) -> list[dict[str, list[str]]]:
    """The broken-down rules of `wanted` that no rule of `owner` covers (kube's Covers)."""
    owned = list(owner)
    return [sub for rule in wanted for sub in _breakdown(rule) if not any(_covers(o, sub) for o in owned)]


def _compact(rules: list[dict[str, list[str]]]) -> list[dict[str, list[str]]]:
    """Rules on one group and resource (and at most one name) merged by verb (kube's CompactRules)."""
    simple: dict[tuple[str, str, str | None], dict[str, list[str]]] = {}
    out = []
    for rule in rules:
        names = rule.get("resourceNames", [])
        if rule.get("nonResourceURLs") or len(names) > 1:
            out.append(rule)
            continue
        key = (rule["apiGroups"][0], rule["resources"][0], names[0] if names else None)
        if key in simple:
            simple[key]["verbs"] = simple[key]["verbs"] + rule["verbs"]
        else:
            simple[key] = {k: list(v) for k, v in rule.items()}
    return out + list(simple.values())


def _go_quoted(values: Sequence[str]) -> str:
    """Go's `%q` of a []string: `["a" "b"]`."""
    return "[" + " ".join(json.dumps(v, ensure_ascii=False) for v in values) + "]"


def _compact_string(rule: Mapping[str, list[str]]) -> str:
    """kube's CompactString: `{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`."""
    keys = (
        ("APIGroups", "apiGroups"),
        ("Resources", "resources"),
        ("NonResourceURLs", "nonResourceURLs"),
        ("ResourceNames", "resourceNames"),
        ("Verbs", "verbs"),
    )
    return "{" + ", ".join(f"{label}:{_go_quoted(rule[key])}" for label, key in keys if rule.get(key)) + "}"


def _privileged(user: User | None) -> bool:
    return user is None or MASTERS in user.groups


def _only_gc_fields(new: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
    if old is None:
        return False

    def strip(obj: Mapping[str, Any]) -> dict[str, Any]:
        meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _GC_FIELDS}
        return {**obj, "metadata": meta}

    return strip(new) == strip(old)


class EscalationGuard:
    """Bound to the authorizer once the registry exists (`bind`); until then (and for the server's
    own writes) nothing is checked."""

    def __init__(self) -> None:
        self._source: RuleSource | None = None

    def bind(self, source: RuleSource) -> None:
        self._source = source

    def _forbid(self, user: User, resource: str, name: str, owner: Iterable[Rule], wanted: Iterable[Rule]) -> None:
        missing = missing_rules(owner, wanted)
        if not missing:
            return
        lines = "\n".join(sorted({_compact_string(r) for r in _compact(missing)}))
        why = (
            f"user {json.dumps(user.name, ensure_ascii=False)} (groups={_go_quoted(user.groups)}) "
            f"is attempting to grant RBAC permissions not currently held:\n{lines}"
        )
        raise _forbidden(resource, name, why)

    def check_role(self, obj: Mapping[str, Any], old: Mapping[str, Any] | None, *, resource: str) -> None:
        """Raises kube's 403 when the requester may not write this Role or ClusterRole."""
        user, source = REQUESTER.get(), self._source
        if source is None or user is None or _privileged(user) or _only_gc_fields(obj, old):
            return
        meta = obj.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        escalate = Attributes(
            user,
            "escalate",
            True,
            group=RBAC_GROUP,
            version="*",
            resource=resource,
            namespace=namespace,
            name=name if old is not None else "",  # a create's URL names no object
        )
        if source.authorize(escalate):
            return
        owner = list(source.rules_for(user, namespace))
        self._forbid(user, resource, name, owner, [r for r in obj.get("rules") or () if isinstance(r, Mapping)])
        if (_has_aggregation(obj) or _has_aggregation(old)) and missing_rules(owner, FULL_AUTHORITY):
            raise _forbidden(resource, name, "must have cluster-admin privileges to use the aggregationRule")

    def check_binding(self, obj: Mapping[str, Any], old: Mapping[str, Any] | None, *, resource: str) -> None:
        """Raises kube's 403 when the requester may neither `bind` the referenced role nor holds
        all of its rules; 404 when it would have to hold them and the role does not exist."""
        user, source = REQUESTER.get(), self._source
        if source is None or user is None or _privileged(user) or _only_gc_fields(obj, old):
            return
        meta = obj.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        ref = obj.get("roleRef") or {}
        kind, role_name = str(ref.get("kind") or ""), str(ref.get("name") or "")
        plural = {"ClusterRole": "clusterroles", "Role": "roles"}.get(kind)
        if plural is None:
            return  # refused by validation
        bind = Attributes(
            user,
            "bind",
            True,
            group=str(ref.get("apiGroup") or ""),
            resource=plural,
            namespace=namespace,
            name=role_name,
        )
        if source.authorize(bind):
            return
        rules = source.role_rules(kind, role_name, namespace)
        if rules is None:
            raise StatusError.not_found(plural, role_name, group=RBAC_GROUP)
        self._forbid(user, resource, name, source.rules_for(user, namespace), rules)


def _has_aggregation(obj: Mapping[str, Any] | None) -> bool:
    rule = (obj or {}).get("aggregationRule")
    return isinstance(rule, Mapping) and bool(rule.get("clusterRoleSelectors"))


def _forbidden(resource: str, name: str, why: str) -> StatusError:
    subject = f'{resource}.{RBAC_GROUP} "{name}"' if name else f"{resource}.{RBAC_GROUP}"
    return StatusError.forbidden(f"{subject} is forbidden: {why}", group=RBAC_GROUP, kind=resource, name=name)
