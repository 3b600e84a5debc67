"""Access reviews: "may this user do that?" answered by the same authorizer requests go through.

`SelfSubjectAccessReview` asks for the caller (`kubectl auth can-i`), `SubjectAccessReview` for
any user and groups (what a webhook or a test asks), `LocalSubjectAccessReview` for any user in
one namespace; `SelfSubjectRulesReview` lists the caller's rules in a namespace (`kubectl auth
can-i --list`). Reviews are answered, never stored, as in kube-apiserver.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apiserver.authz.attributes import Attributes
from apiserver.authz.identity import User
from apiserver.authz.rbac import Authorizer
from apiserver.catalog import AUTHORIZATION_GROUP
from apiserver.errors import Cause, StatusError

__all__ = ["KINDS", "answer"]

KINDS = {
    "selfsubjectaccessreviews": "SelfSubjectAccessReview",
    "subjectaccessreviews": "SubjectAccessReview",
    "localsubjectaccessreviews": "LocalSubjectAccessReview",
    "selfsubjectrulesreviews": "SelfSubjectRulesReview",
}


def _invalid(kind: str, field: str, detail: str) -> StatusError:
    return StatusError.invalid(kind, "", [Cause.required(field, detail)], group=AUTHORIZATION_GROUP)


def _spec(review: Any, kind: str) -> Mapping[str, Any]:
    if not isinstance(review, Mapping) or review.get("kind") not in (None, kind):
        raise StatusError.bad_request(f"the body must be a {kind} object")
    spec = review.get("spec")
    if not isinstance(spec, Mapping):
        raise _invalid(kind, "spec", "a review needs a spec")
    return spec


def _subject(spec: Mapping[str, Any], caller: User, self_review: bool, kind: str) -> User:
    if self_review:
        return caller
    name, groups = spec.get("user") or "", spec.get("groups") or []
    if not name and not groups:
        raise _invalid(kind, "spec.user", "at least one of user or group must be specified")
    return User(str(name), str(spec.get("uid") or ""), tuple(str(g) for g in groups))


def _attributes(spec: Mapping[str, Any], user: User, kind: str, namespace: str) -> Attributes:
    resource = spec.get("resourceAttributes")
    other = spec.get("nonResourceAttributes")
    if isinstance(resource, Mapping) == isinstance(other, Mapping):
        raise _invalid(kind, "spec.resourceAttributes", "exactly one of nonResourceAttributes or resourceAttributes")
    if isinstance(other, Mapping):
        return Attributes(user, str(other.get("verb") or ""), False, path=str(other.get("path") or ""))
    assert isinstance(resource, Mapping)
    asked = str(resource.get("namespace") or "")
    if namespace and asked != namespace:
        raise StatusError.bad_request(
            f"spec.resourceAttributes.namespace must match metadata.namespace: {asked!r} != {namespace!r}"
        )
    return Attributes(
        user,
        str(resource.get("verb") or ""),
        True,
        group=str(resource.get("group") or ""),
        version=str(resource.get("version") or ""),
        resource=str(resource.get("resource") or ""),
        subresource=str(resource.get("subresource") or ""),
        namespace=asked,
        name=str(resource.get("name") or ""),
    )


def _rules(authorizer: Authorizer, user: User, namespace: str) -> dict[str, Any]:
    resource_rules, url_rules = [], []
    for rule in authorizer.rules_for(user, namespace):
        if rule.get("nonResourceURLs"):
            url_rules.append({"verbs": list(rule.get("verbs") or ()), "nonResourceURLs": list(rule["nonResourceURLs"])})
        else:
            keys = ("verbs", "apiGroups", "resources", "resourceNames")
            resource_rules.append({k: list(rule[k]) for k in keys if rule.get(k)})
    return {"resourceRules": resource_rules, "nonResourceRules": url_rules, "incomplete": False}


def answer(attrs: Attributes, review: Any, authorizer: Authorizer) -> dict[str, Any]:
    """The review, with its status filled in (the body of the 201)."""
    kind = KINDS.get(attrs.resource)
    if kind is None or attrs.name or attrs.subresource or attrs.verb != "create":
        raise StatusError.method_not_allowed(attrs.verb.upper(), attrs.path)
    spec = _spec(review, kind)
    out: dict[str, Any] = {
        "kind": kind,
        "apiVersion": f"{AUTHORIZATION_GROUP}/{attrs.version}",
        "metadata": {"creationTimestamp": None, **({"namespace": attrs.namespace} if attrs.namespace else {})},
        "spec": dict(spec),
    }
    if kind == "SelfSubjectRulesReview":
        out["status"] = _rules(authorizer, attrs.user, str(spec.get("namespace") or ""))
        return out
    user = _subject(spec, attrs.user, kind == "SelfSubjectAccessReview", kind)
    out["status"] = {"allowed": authorizer.authorize(_attributes(spec, user, kind, attrs.namespace))}
    return out
