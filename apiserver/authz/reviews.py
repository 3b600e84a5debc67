"""Reviews: "who is this token?" and "may this user do that?", answered by the same
authenticator and authorizers requests go through.

`TokenReview` names the user of a bearer token (with groups and extra), `SelfSubjectReview` the
caller (`kubectl auth whoami`): how a component authenticates a request to its own endpoints by
delegating to the API server, as kubelet and kube-scheduler do (`kube/delegation.py`).
`SelfSubjectAccessReview` asks for the caller (`kubectl auth can-i`), `SubjectAccessReview` for
any user, groups and extra (what a delegating component or a test asks),
`LocalSubjectAccessReview` for any user in one namespace; `SelfSubjectRulesReview` lists the
caller's rules in a namespace (`kubectl auth can-i --list`). Reviews are answered, never stored,
as in kube-apiserver.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apis.k8s.users import extra_of
from apiserver.authz.attributes import Attributes
from apiserver.authz.authorizer import Authorizer, Chain
from apiserver.authz.identity import TokenAuthenticator, User, node_name
from apiserver.authz.node import NodeAuthorizer
from apiserver.catalog import AUTHENTICATION_GROUP, AUTHORIZATION_GROUP
from apiserver.errors import Cause, StatusError

__all__ = ["AUTHENTICATION_KINDS", "KINDS", "answer", "is_review"]

KINDS = {
    "selfsubjectaccessreviews": "SelfSubjectAccessReview",
    "subjectaccessreviews": "SubjectAccessReview",
    "localsubjectaccessreviews": "LocalSubjectAccessReview",
    "selfsubjectrulesreviews": "SelfSubjectRulesReview",
}
AUTHENTICATION_KINDS = {"tokenreviews": "TokenReview", "selfsubjectreviews": "SelfSubjectReview"}


def is_review(attrs: Attributes) -> bool:
    """Whether the request is for a review (answered here, never stored)."""
    if not attrs.resource_request:
        return False
    if attrs.group == AUTHORIZATION_GROUP:
        return attrs.resource in KINDS
    return attrs.group == AUTHENTICATION_GROUP and attrs.resource in AUTHENTICATION_KINDS


def _invalid(kind: str, field: str, detail: str, group: str = AUTHORIZATION_GROUP) -> StatusError:
    return StatusError.invalid(kind, "", [Cause.required(field, detail)], group=group)


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
    extra = spec.get("extra") or {}
    if not isinstance(extra, Mapping) or not isinstance(groups, list):
        raise StatusError.bad_request(f"{kind}: spec.groups must be a list and spec.extra an object of lists")
    return User(str(name), str(spec.get("uid") or ""), tuple(str(g) for g in groups), extra_of(extra))


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
        field_selector=_field_selector(resource.get("fieldSelector")),
    )


def _field_selector(selector: Any) -> str:
    """SubjectAccessReview's `fieldSelector` (1.31+): its `rawSelector`, or `requirements` of `In`
    with one value (the only shape the Node authorizer reads) spelled `key=value`."""
    if not isinstance(selector, Mapping):
        return ""
    if selector.get("rawSelector"):
        return str(selector["rawSelector"])
    terms = [
        f"{r.get('key')}={r['values'][0]}"
        for r in selector.get("requirements") or ()
        if isinstance(r, Mapping) and r.get("operator") == "In" and len(r.get("values") or ()) == 1
    ]
    return ",".join(terms)


def _rules(authorizer: Authorizer, user: User, namespace: str) -> dict[str, Any]:
    resource_rules, url_rules = [], []
    for rule in authorizer.rules_for(user, namespace):
        if rule.get("nonResourceURLs"):
            url_rules.append({"verbs": list(rule.get("verbs") or ()), "nonResourceURLs": list(rule["nonResourceURLs"])})
        else:
            keys = ("verbs", "apiGroups", "resources", "resourceNames")
            resource_rules.append({k: list(rule[k]) for k in keys if rule.get(k)})
    # The Node authorizer cannot list a node's rules (kube: "node authorizer does not support
    # user rule resolution"), so a node's list is incomplete.
    by_node = isinstance(authorizer, Chain) and any(isinstance(a, NodeAuthorizer) for a in authorizer.authorizers)
    incomplete = by_node and node_name(user) is not None
    out: dict[str, Any] = {"resourceRules": resource_rules, "nonResourceRules": url_rules, "incomplete": incomplete}
    if incomplete:
        out["evaluationError"] = "node authorizer does not support user rule resolution"
    return out


def _token_review(spec: Mapping[str, Any], authenticator: TokenAuthenticator | None) -> dict[str, Any]:
    token = spec.get("token")
    if not isinstance(token, str) or not token:
        raise _invalid("TokenReview", "spec.token", "token must be specified", AUTHENTICATION_GROUP)
    audiences = [str(a) for a in spec.get("audiences") or ()]
    user = authenticator.authenticate(f"Bearer {token}") if authenticator is not None else None
    if user is None:
        return {"authenticated": False, "user": {}}
    # Static tokens are good for any audience: the ones asked for are the ones granted (kube).
    return {"authenticated": True, "user": user.info(), **({"audiences": audiences} if audiences else {})}


def answer(
    attrs: Attributes, review: Any, authorizer: Authorizer, authenticator: TokenAuthenticator | None = None
) -> dict[str, Any]:
    """The review, with its status filled in (the body of the 201). `authenticator`: the
    server's, for TokenReviews (None: the server authenticates nobody)."""
    group = attrs.group
    kind = (KINDS if group == AUTHORIZATION_GROUP else AUTHENTICATION_KINDS).get(attrs.resource)
    if kind is None or attrs.name or attrs.subresource or attrs.verb != "create":
        raise StatusError.method_not_allowed(attrs.verb.upper(), attrs.path)
    out: dict[str, Any] = {
        "kind": kind,
        "apiVersion": f"{group}/{attrs.version}",
        "metadata": {"creationTimestamp": None, **({"namespace": attrs.namespace} if attrs.namespace else {})},
    }
    if kind == "SelfSubjectReview":
        out["status"] = {"userInfo": attrs.user.info()}
        return out
    spec = _spec(review, kind)
    out["spec"] = dict(spec)
    if kind == "TokenReview":
        out["status"] = _token_review(spec, authenticator)
        return out
    if kind == "SelfSubjectRulesReview":
        out["status"] = _rules(authorizer, attrs.user, str(spec.get("namespace") or ""))
        return out
    user = _subject(spec, attrs.user, kind == "SelfSubjectAccessReview", kind)
    decision = authorizer.authorize(_attributes(spec, user, kind, attrs.namespace))
    status: dict[str, Any] = {"allowed": decision.allowed}
    if decision.reason:
        status["reason"] = decision.reason
    out["status"] = status
    return out
