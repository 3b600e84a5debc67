"""ValidatingWebhookConfiguration (admissionregistration.k8s.io/v1): defaults, validation, parsing.

`apply_defaults` fills what kube-apiserver fills before storing (failurePolicy Fail, matchPolicy
Equivalent, empty selectors, timeoutSeconds 10, scope `*`, service port 443), so `kubectl get -o
yaml` shows the same object as on a real cluster. `parse` validates a configuration and turns it
into `Webhook`s in one pass, returning every problem as a `Cause` worded as apimachinery's field
errors word them; the dispatcher only ever sees configurations that parsed.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from apis.errors import ValidationError
from apis.k8s.labels import LabelSelector
from apiserver.errors import Cause

__all__ = [
    "OPERATIONS",
    "REVIEW_VERSIONS",
    "Rule",
    "ServiceRef",
    "Webhook",
    "apply_defaults",
    "parse",
]

OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT", "*"})
#: AdmissionReview versions this server can send, in preference order (kube-apiserver's).
REVIEW_VERSIONS = ("v1", "v1beta1")
_SCOPES = ("Cluster", "Namespaced", "*")
_FAILURE_POLICIES = ("Ignore", "Fail")
_MATCH_POLICIES = ("Exact", "Equivalent")
_SIDE_EFFECTS = ("None", "NoneOnDryRun")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@dataclass(frozen=True, slots=True)
class Rule:
    """One RuleWithOperations: which requests a webhook wants."""

    operations: frozenset[str]
    api_groups: frozenset[str]
    api_versions: frozenset[str]
    #: `pods`, `pods/status`, `*`, `*/*`, `pods/*`, `*/status`.
    resources: tuple[str, ...]
    scope: str = "*"


@dataclass(frozen=True, slots=True)
class ServiceRef:
    namespace: str
    name: str
    path: str = ""
    port: int = 443

    @property
    def host(self) -> str:
        """The DNS name kube-apiserver calls and verifies the serving certificate against."""
        return f"{self.name}.{self.namespace}.svc"


@dataclass(frozen=True, slots=True)
class Webhook:
    """A validating webhook of a stored configuration, parsed once when the configuration is stored."""

    configuration: str
    name: str
    rules: tuple[Rule, ...]
    url: str | None
    service: ServiceRef | None
    ca_bundle: bytes
    failure_policy: str
    match_policy: str
    namespace_selector: LabelSelector
    object_selector: LabelSelector
    side_effects: str
    timeout_seconds: int
    review_version: str

    @property
    def fails_closed(self) -> bool:
        return self.failure_policy == "Fail"


def apply_defaults(obj: dict[str, Any]) -> None:
    """Fill kube-apiserver's defaults into a configuration, in place (malformed parts are left to `parse`)."""
    for hook in obj.get("webhooks") or ():
        if not isinstance(hook, dict):
            continue
        hook.setdefault("failurePolicy", "Fail")
        hook.setdefault("matchPolicy", "Equivalent")
        hook.setdefault("namespaceSelector", {})
        hook.setdefault("objectSelector", {})
        hook.setdefault("timeoutSeconds", 10)
        for rule in hook.get("rules") or ():
            if isinstance(rule, dict):
                rule.setdefault("scope", "*")
        client = hook.get("clientConfig")
        service = client.get("service") if isinstance(client, dict) else None
        if isinstance(service, dict):
            service.setdefault("port", 443)


def parse(obj: Mapping[str, Any]) -> tuple[list[Webhook], list[Cause]]:
    """The configuration's webhooks, or the problems that keep it from being stored."""
    name = str((obj.get("metadata") or {}).get("name", ""))
    hooks = obj.get("webhooks")
    if hooks is None:
        return [], []
    if not isinstance(hooks, list):
        return [], [Cause("webhooks", "Invalid value: must be a list", "FieldValueTypeInvalid")]
    webhooks: list[Webhook] = []
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, raw in enumerate(hooks):
        path = f"webhooks[{i}]"
        if not isinstance(raw, Mapping):
            causes.append(Cause(path, "Invalid value: must be an object", "FieldValueTypeInvalid"))
            continue
        hook_name = raw.get("name")
        if isinstance(hook_name, str) and hook_name in seen:
            causes.append(Cause(f"{path}.name", f"Duplicate value: {json.dumps(hook_name)}", "FieldValueDuplicate"))
        if isinstance(hook_name, str):
            seen.add(hook_name)
        found: list[Cause] = []
        webhook = _webhook(name, raw, path, found)
        causes += found
        if webhook is not None and not found:
            webhooks.append(webhook)
    return webhooks, causes


def _webhook(configuration: str, raw: Mapping[str, Any], path: str, causes: list[Cause]) -> Webhook | None:
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        causes.append(Cause.required(f"{path}.name", "name is required"))
        name = ""
    elif name.count(".") < 2 or len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
        why = "should be a domain with at least three segments separated by dots"
        causes.append(Cause.invalid(f"{path}.name", name, why))
    rules = _rules(raw.get("rules"), f"{path}.rules", causes)
    url, service, ca_bundle = _client_config(raw.get("clientConfig"), f"{path}.clientConfig", causes)
    failure = _choice(raw, "failurePolicy", _FAILURE_POLICIES, path, causes)
    match = _choice(raw, "matchPolicy", _MATCH_POLICIES, path, causes)
    side_effects = raw.get("sideEffects")
    if side_effects is None:
        causes.append(Cause.required(f"{path}.sideEffects", f"must specify one of {', '.join(_SIDE_EFFECTS)}"))
    elif side_effects not in _SIDE_EFFECTS:
        causes.append(_unsupported(f"{path}.sideEffects", side_effects, _SIDE_EFFECTS))
    timeout = raw.get("timeoutSeconds", 10)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= 30:
        causes.append(
            Cause.invalid(f"{path}.timeoutSeconds", str(timeout), "the timeout value must be between 1 and 30 seconds")
        )
        timeout = 10
    version = _review_version(raw.get("admissionReviewVersions"), f"{path}.admissionReviewVersions", causes)
    selectors = [_selector(raw, key, path, causes) for key in ("namespaceSelector", "objectSelector")]
    if causes:
        return None
    return Webhook(
        configuration=configuration,
        name=name,
        rules=rules,
        url=url,
        service=service,
        ca_bundle=ca_bundle,
        failure_policy=failure,
        match_policy=match,
        namespace_selector=selectors[0],
        object_selector=selectors[1],
        side_effects=str(side_effects),
        timeout_seconds=timeout,
        review_version=version,
    )


def _unsupported(field: str, value: object, supported: tuple[str, ...]) -> Cause:
    values = ", ".join(json.dumps(s) for s in supported)
    return Cause(field, f"Unsupported value: {json.dumps(value)}: supported values: {values}", "FieldValueNotSupported")


def _choice(raw: Mapping[str, Any], key: str, supported: tuple[str, ...], path: str, causes: list[Cause]) -> str:
    """`raw[key]`, one of `supported` (missing: the last, kube-apiserver's default for both policies)."""
    value = raw.get(key, supported[-1])
    if value not in supported:
        causes.append(_unsupported(f"{path}.{key}", value, supported))
        return supported[-1]
    return str(value)


def _strings(raw: Mapping[str, Any], key: str, path: str, causes: list[Cause]) -> tuple[str, ...]:
    value = raw.get(key)
    if not isinstance(value, list) or not value:
        causes.append(Cause.required(f"{path}.{key}", "must contain at least one value"))
        return ()
    if not all(isinstance(v, str) for v in value):
        causes.append(Cause(f"{path}.{key}", "Invalid value: must be a list of strings", "FieldValueTypeInvalid"))
        return ()
    if "*" in value and len(value) > 1:
        causes.append(Cause.invalid(f"{path}.{key}", "*", "if '*' is present, must not specify other values"))
    return tuple(value)


def _rules(raw: object, path: str, causes: list[Cause]) -> tuple[Rule, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        causes.append(Cause(path, "Invalid value: must be a list", "FieldValueTypeInvalid"))
        return ()
    rules = []
    for i, rule in enumerate(raw):
        where = f"{path}[{i}]"
        if not isinstance(rule, Mapping):
            causes.append(Cause(where, "Invalid value: must be an object", "FieldValueTypeInvalid"))
            continue
        operations = _strings(rule, "operations", where, causes)
        for op in operations:
            if op not in OPERATIONS:
                causes.append(_unsupported(f"{where}.operations", op, tuple(sorted(OPERATIONS))))
        groups = _strings(rule, "apiGroups", where, causes)
        versions = _strings(rule, "apiVersions", where, causes)
        resources = _strings(rule, "resources", where, causes)
        for resource in resources:
            if resource.count("/") > 1 or resource.startswith("/") or resource.endswith("/"):
                causes.append(Cause.invalid(f"{where}.resources", resource, "must be RESOURCE or RESOURCE/SUBRESOURCE"))
        scope = rule.get("scope", "*")
        if scope not in _SCOPES:
            causes.append(_unsupported(f"{where}.scope", scope, _SCOPES))
        rules.append(Rule(frozenset(operations), frozenset(groups), frozenset(versions), resources, str(scope)))
    return tuple(rules)


def _client_config(raw: object, path: str, causes: list[Cause]) -> tuple[str | None, ServiceRef | None, bytes]:
    if not isinstance(raw, Mapping):
        causes.append(Cause.required(path, "exactly one of url or service is required"))
        return None, None, b""
    ca_bundle = b""
    if raw.get("caBundle") is not None:
        try:
            ca_bundle = base64.b64decode(str(raw["caBundle"]), validate=True)
        except (binascii.Error, ValueError):
            causes.append(Cause.invalid(f"{path}.caBundle", "<bytes>", "must be base64-encoded PEM certificates"))
    url, service = raw.get("url"), raw.get("service")
    if (url is None) == (service is None):
        causes.append(Cause.required(path, "exactly one of url or service is required"))
        return None, None, ca_bundle
    if url is not None:
        return _url(url, f"{path}.url", causes), None, ca_bundle
    return None, _service(service, f"{path}.service", causes), ca_bundle


def _url(url: object, path: str, causes: list[Cause]) -> str | None:
    if not isinstance(url, str) or not url:
        causes.append(Cause.required(path, "url must be a non-empty string"))
        return None
    parts = urlsplit(url)
    why = ""
    if parts.scheme != "https":
        why = "'https' is the only allowed URL scheme"
    elif not parts.hostname:
        why = "host must be specified"
    elif parts.username or parts.password:
        why = "user information is not permitted in the URL"
    elif parts.fragment or "#" in url:
        why = "fragments are not permitted in the URL"
    elif parts.query:
        why = "query parameters are not permitted in the URL"
    if why:
        causes.append(Cause.invalid(path, url, why))
        return None
    return url


def _service(raw: object, path: str, causes: list[Cause]) -> ServiceRef | None:
    if not isinstance(raw, Mapping):
        causes.append(Cause(path, "Invalid value: must be an object", "FieldValueTypeInvalid"))
        return None
    found = len(causes)
    for key in ("namespace", "name"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            causes.append(Cause.required(f"{path}.{key}", f"service {key} is required"))
    svc_path = raw.get("path") or ""
    if not isinstance(svc_path, str) or (svc_path and not svc_path.startswith("/")):
        causes.append(Cause.invalid(f"{path}.path", str(svc_path), "must start with a '/'"))
    port = raw.get("port", 443)
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        causes.append(Cause.invalid(f"{path}.port", str(port), "port is not valid: must be between 1 and 65535"))
    if len(causes) > found:
        return None
    return ServiceRef(raw["namespace"], raw["name"], svc_path, port)


def _review_version(raw: object, path: str, causes: list[Cause]) -> str:
    if not isinstance(raw, list) or not raw:
        causes.append(Cause.required(path, f"must specify one of {', '.join(REVIEW_VERSIONS)}"))
        return REVIEW_VERSIONS[0]
    for version in raw:
        if version in REVIEW_VERSIONS:
            return str(version)
    causes.append(
        Cause.invalid(path, ", ".join(map(str, raw)), f"must include at least one of {', '.join(REVIEW_VERSIONS)}")
    )
    return REVIEW_VERSIONS[0]


def _selector(raw: Mapping[str, Any], key: str, path: str, causes: list[Cause]) -> LabelSelector:
    try:
        return LabelSelector.from_dict(raw.get(key), f"{path}.{key}")
    except ValidationError as e:
        causes.append(Cause(e.field, f"Invalid value: {e.reason}"))
        return LabelSelector({})
