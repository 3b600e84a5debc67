"""Validating admission, pure parts: configurations, which webhooks match a write, the review and
the errors — each compared with what kube-apiserver does."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apis.k8s.labels import LabelSelector
from apiserver.admission import config, review
from apiserver.admission.config import Rule, Webhook
from apiserver.admission.matching import Attributes, matched_version, rule_matches, selectors_match


def hook(**fields: Any) -> dict[str, Any]:
    return {
        "name": "quota.tessera.test",
        "clientConfig": {"url": "https://127.0.0.1:9443/validate"},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        **fields,
    }


def parsed(**fields: Any) -> Webhook:
    obj = {"metadata": {"name": "cfg"}, "webhooks": [hook(**fields)]}
    config.apply_defaults(obj)
    webhooks, causes = config.parse(obj)
    assert causes == [], causes
    return webhooks[0]


def problems(*hooks: dict[str, Any]) -> list[str]:
    return [f"{c.field}: {c.message}" for c in config.parse({"metadata": {"name": "cfg"}, "webhooks": list(hooks)})[1]]


def attrs(**fields: Any) -> Attributes:
    base: dict[str, Any] = {
        "operation": "CREATE",
        "group": "",
        "version": "v1",
        "resource": "configmaps",
        "kind": "ConfigMap",
        "namespace": "team-a",
        "name": "cm",
        "obj": {"metadata": {"name": "cm", "labels": {"app": "web"}}},
        "old": None,
    }
    return Attributes(**{**base, **fields})


# --- configurations ------------------------------------------------------------------------------
def test_defaults_are_kube_apiservers() -> None:
    obj: dict[str, Any] = {"webhooks": [{"rules": [{}], "clientConfig": {"service": {"name": "s", "namespace": "n"}}}]}
    config.apply_defaults(obj)
    h = obj["webhooks"][0]
    assert (h["failurePolicy"], h["matchPolicy"], h["timeoutSeconds"]) == ("Fail", "Equivalent", 10)
    assert h["namespaceSelector"] == h["objectSelector"] == {}
    assert h["rules"][0]["scope"] == "*" and h["clientConfig"]["service"]["port"] == 443


def test_a_valid_configuration_parses_into_webhooks() -> None:
    w = parsed(
        clientConfig={"service": {"namespace": "ns", "name": "svc", "path": "/v"}, "caBundle": "UEVN"},
        objectSelector={"matchLabels": {"a": "b"}},
        admissionReviewVersions=["v1beta2", "v1beta1", "v1"],
    )
    assert w.service == config.ServiceRef("ns", "svc", "/v", 443) and w.service.host == "svc.ns.svc"
    assert w.ca_bundle == b"PEM" and w.url is None and w.fails_closed
    assert w.review_version == "v1beta1"  # the first version this server speaks, as kube-apiserver picks
    assert w.object_selector == LabelSelector({"a": "b"})


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"name": "short.name"},
            'webhooks[0].name: Invalid value: "short.name": should be a domain with at least three',
        ),
        ({"sideEffects": "Some"}, 'webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "Non'),
        ({"failurePolicy": "Maybe"}, 'webhooks[0].failurePolicy: Unsupported value: "Maybe": supported values: "Ign'),
        ({"timeoutSeconds": 31}, 'webhooks[0].timeoutSeconds: Invalid value: "31": the timeout value must be between'),
        ({"clientConfig": {}}, "webhooks[0].clientConfig: Required value: exactly one of url or service is required"),
        ({"clientConfig": {"url": "https://h/p?q=1"}}, 'clientConfig.url: Invalid value: "https://h/p?q=1": query'),
        ({"clientConfig": {"service": {"name": "s"}}}, "webhooks[0].clientConfig.service.namespace: Required value"),
        ({"clientConfig": {"url": "https://h/", "caBundle": "!!"}}, "webhooks[0].clientConfig.caBundle: Invalid"),
        ({"admissionReviewVersions": ["v2"]}, 'webhooks[0].admissionReviewVersions: Invalid value: "v2": must incl'),
        ({"rules": [{"operations": ["PATCH"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}]}, "ope"),
        ({"rules": [{"operations": ["*"], "apiGroups": [], "apiVersions": ["*"], "resources": ["*"]}]}, "apiGroups"),
        ({"rules": [{"operations": ["*"], "apiGroups": ["*", "x"], "apiVersions": ["*"], "resources": ["*"]}]}, "'*'"),
        ({"namespaceSelector": {"matchExpressions": [{"key": "k", "operator": "In"}]}}, "namespaceSelector.matchExp"),
    ],
)
def test_each_broken_field_is_named(fields: dict[str, Any], expected: str) -> None:
    assert any(expected in p for p in problems(hook(**fields))), problems(hook(**fields))


def test_duplicate_webhook_names_are_refused() -> None:
    assert 'webhooks[1].name: Duplicate value: "quota.tessera.test"' in problems(hook(), hook())


# --- matching ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("resources", "resource", "subresource", "matches"),
    [
        (["pods"], "pods", "", True),
        (["pods"], "pods", "status", False),
        (["*"], "pods", "", True),
        (["*"], "pods", "status", False),
        (["*/*"], "pods", "status", True),
        (["pods/*"], "pods", "eviction", True),
        (["*/status"], "pods", "status", True),
        (["*/status"], "pods", "", False),
        (["pods/status"], "nodes", "status", False),
    ],
)
def test_resources_match_as_kube_apiserver(
    resources: list[str], resource: str, subresource: str, matches: bool
) -> None:
    rule = Rule(frozenset({"*"}), frozenset({"*"}), frozenset({"*"}), tuple(resources))
    assert rule_matches(rule, attrs(resource=resource, subresource=subresource), "v1") is matches


def test_operations_groups_versions_and_scope_must_all_match() -> None:
    rule = Rule(frozenset({"UPDATE"}), frozenset({"apps"}), frozenset({"v1"}), ("*",), "Cluster")
    ok = attrs(operation="UPDATE", group="apps", namespace="")
    assert rule_matches(rule, ok, "v1")
    assert not rule_matches(rule, attrs(operation="CREATE", group="apps", namespace=""), "v1")
    assert not rule_matches(rule, attrs(operation="UPDATE", group="", namespace=""), "v1")
    assert not rule_matches(rule, ok, "v2")
    assert not rule_matches(rule, attrs(operation="UPDATE", group="apps"), "v1")  # namespaced: not Cluster scope
    namespaced = Rule(frozenset({"*"}), frozenset({"*"}), frozenset({"*"}), ("*",), "Namespaced")
    assert not rule_matches(namespaced, attrs(resource="namespaces", namespace=""), "v1")


def test_equivalent_match_policy_finds_another_served_version() -> None:
    rules = ({"operations": ["*"], "apiGroups": ["x.io"], "apiVersions": ["v1beta1"], "resources": ["things"]},)
    request = attrs(group="x.io", version="v1", resource="things", equivalent_versions=("v1", "v1beta1"))
    assert matched_version(parsed(rules=list(rules)), request) == "v1beta1"
    assert matched_version(parsed(rules=list(rules), matchPolicy="Exact"), request) is None


def test_selectors_look_at_old_and_new_labels_and_the_namespace() -> None:
    w = parsed(objectSelector={"matchLabels": {"app": "web"}}, namespaceSelector={"matchLabels": {"team": "a"}})
    labels = {"team-a": {"team": "a"}, "team-b": {"team": "b"}}
    assert selectors_match(w, attrs(), lambda ns: labels[ns])
    assert not selectors_match(w, attrs(namespace="team-b"), lambda ns: labels[ns])
    relabelled = attrs(obj={"metadata": {"labels": {}}}, old={"metadata": {"labels": {"app": "web"}}})
    assert selectors_match(w, relabelled, lambda ns: labels[ns])
    assert not selectors_match(w, attrs(obj={"metadata": {}}), lambda ns: labels[ns])
    cluster_scoped = attrs(resource="nodes", namespace="")
    assert selectors_match(w, cluster_scoped, lambda ns: pytest.fail("no namespace lookup"))


# --- the review and the answers ------------------------------------------------------------------
def test_the_request_of_an_update_of_a_subresource() -> None:
    old = {"apiVersion": "v1", "metadata": {"name": "cm"}}
    request = attrs(operation="UPDATE", subresource="status", old=old, dry_run=True)
    body = review.request(parsed(), request, "v1", "uid-1")
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    r = body["request"]
    assert (r["uid"], r["subResource"], r["requestSubResource"], r["operation"]) == (
        "uid-1",
        "status",
        "status",
        "UPDATE",
    )
    assert r["options"] == {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1", "dryRun": ["All"]}
    assert r["dryRun"] is True and r["oldObject"] == old


def test_an_equivalent_version_converts_the_object_and_keeps_the_request_version() -> None:
    request = attrs(group="x.io", version="v1", resource="things", obj={"apiVersion": "x.io/v1", "metadata": {}})
    r = review.request(parsed(), request, "v1beta1", "u")["request"]
    assert r["object"]["apiVersion"] == "x.io/v1beta1" and r["kind"]["version"] == "v1beta1"
    assert r["requestKind"]["version"] == "v1"


def answer(**response: Any) -> bytes:
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}).encode()


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"not json", "received invalid webhook response: the response is not JSON"),
        (
            json.dumps({"apiVersion": "v1", "kind": "Status"}).encode(),
            "expected webhook response of admission.k8s.io/v1",
        ),
        (answer(uid="other", allowed=True), 'expected response.uid="u", got "other"'),
        (
            answer(uid="u", allowed=True, patch="W10=", patchType="JSONPatch"),
            "validating webhooks may not return patches",
        ),
        (answer(uid="u"), "response.allowed must be a boolean"),
    ],
)
def test_a_malformed_answer_is_a_call_failure(body: bytes, why: str) -> None:
    with pytest.raises(review.CallFailed, match="received invalid webhook response") as failed:
        review.verdict(body, parsed(), "u")
    assert why in str(failed.value)


def test_a_denial_keeps_the_webhooks_status_and_names_the_webhook() -> None:
    w = parsed()
    verdict = review.verdict(
        answer(uid="u", allowed=False, status={"code": 403, "reason": "Forbidden", "message": "m"}), w, "u"
    )
    error = review.denied(w, verdict.status)
    assert (error.code, error.reason, error.message) == (
        403,
        "Forbidden",
        'admission webhook "quota.tessera.test" denied the request: m',
    )
    assert review.denied(w, None).code == 400  # kube-apiserver 1.31: a code below 400 becomes 400
    assert review.denied(w, None).message.endswith("denied the request without explanation")
    assert review.denied(w, {"code": 200, "reason": "Because"}).message.endswith("denied the request: Because")


def test_a_call_failure_is_an_internal_error_naming_the_webhook() -> None:
    error = review.call_failed(parsed(), "failed to call webhook: boom")
    assert (error.code, error.reason) == (500, "InternalError")
    assert (
        error.message
        == 'Internal error occurred: failed calling webhook "quota.tessera.test": failed to call webhook: boom'
    )
