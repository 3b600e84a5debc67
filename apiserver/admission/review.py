"""AdmissionReview: the request kube-apiserver sends a webhook, reading its answer, and the errors.

Pure: `request` builds the AdmissionReview for one webhook, `verdict` checks an answer the way
kube-apiserver's `VerifyAdmissionResponse` does (kind, version, uid; a validating webhook may not
patch) and raises `CallFailed` for anything malformed, and `denied` / `call_failed` spell the
StatusErrors a client gets, as kube-apiserver 1.31 (the version this server reports) spells them:

- a denial keeps the webhook's status (code below 400 → 400, reason and details as given) with
  the message `admission webhook "NAME" denied the request: MESSAGE` (or its reason, or
  `without explanation`);
- a webhook that cannot be called (refused, timed out, bad TLS, bad answer) under failurePolicy
  Fail is a 500 InternalError `Internal error occurred: failed calling webhook "NAME": REASON`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from apiserver.admission.config import Webhook
from apiserver.admission.matching import Attributes
from apiserver.errors import Cause, StatusError

__all__ = ["CallFailed", "Verdict", "call_failed", "denied", "request", "verdict"]

_OPTIONS_KIND = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}


class CallFailed(Exception):
    """The webhook could not be called or answered nonsense; `str()` is kube-apiserver's reason."""


@dataclass(frozen=True, slots=True)
class Verdict:
    allowed: bool
    #: The webhook's `response.status` (a metav1.Status), when it gave one.
    status: Mapping[str, Any] | None = None
    warnings: tuple[str, ...] = ()


def _as_version(obj: Mapping[str, Any] | None, group: str, version: str) -> Mapping[str, Any] | None:
    """The object as `version` of its group (every served version holds the same object here)."""
    if obj is None:
        return None
    api_version = f"{group}/{version}" if group else version
    return obj if obj.get("apiVersion") == api_version else {**obj, "apiVersion": api_version}


def request(webhook: Webhook, attrs: Attributes, version: str, uid: str) -> dict[str, Any]:
    """The AdmissionReview for `webhook`; `version` is the one it matched (see `matched_version`)."""
    options: dict[str, Any] = {"kind": _OPTIONS_KIND.get(attrs.operation, ""), "apiVersion": "meta.k8s.io/v1"}
    if attrs.dry_run:
        options["dryRun"] = ["All"]
    body: dict[str, Any] = {
        "uid": uid,
        "kind": {"group": attrs.group, "version": version, "kind": attrs.kind},
        "resource": {"group": attrs.group, "version": version, "resource": attrs.resource},
        "requestKind": {"group": attrs.group, "version": attrs.version, "kind": attrs.kind},
        "requestResource": {"group": attrs.group, "version": attrs.version, "resource": attrs.resource},
        "operation": attrs.operation,
        "userInfo": attrs.user.info(),
        "object": _as_version(attrs.obj, attrs.group, version),
        "oldObject": _as_version(attrs.old, attrs.group, version),
        "dryRun": attrs.dry_run,
        "options": options,
    }
    if attrs.subresource:
        body["subResource"] = body["requestSubResource"] = attrs.subresource
    if attrs.name:
        body["name"] = attrs.name
    if attrs.namespace:
        body["namespace"] = attrs.namespace
    return {"apiVersion": f"admission.k8s.io/{webhook.review_version}", "kind": "AdmissionReview", "request": body}


def verdict(body: bytes, webhook: Webhook, uid: str) -> Verdict:
    """Read a webhook's answer; raises CallFailed when it is not a valid AdmissionReview for `uid`."""
    try:
        return _verdict(body, webhook, uid)
    except CallFailed as e:
        raise CallFailed(f"received invalid webhook response: {e}") from None


def _verdict(body: bytes, webhook: Webhook, uid: str) -> Verdict:
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise CallFailed(f"the response is not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise CallFailed("the response is not a JSON object")
    expected = f"admission.k8s.io/{webhook.review_version}"
    if doc.get("apiVersion") != expected or doc.get("kind") != "AdmissionReview":
        got = f"{doc.get('apiVersion') or ''}, Kind={doc.get('kind') or ''}"
        raise CallFailed(f"expected webhook response of {expected}, Kind=AdmissionReview, got {got}")
    response = doc.get("response")
    if not isinstance(response, dict):
        raise CallFailed("webhook response was absent")
    if response.get("uid") != uid:
        raise CallFailed(f'expected response.uid="{uid}", got "{response.get("uid") or ""}"')
    if response.get("patch") or response.get("patchType"):
        raise CallFailed("validating webhooks may not return patches")
    allowed = response.get("allowed")
    if not isinstance(allowed, bool):
        raise CallFailed("response.allowed must be a boolean")
    status = response.get("status")
    warnings = response.get("warnings") or ()
    return Verdict(
        allowed,
        status if isinstance(status, dict) else None,
        tuple(w for w in warnings if isinstance(w, str)) if isinstance(warnings, list) else (),
    )


def denied(webhook: Webhook, status: Mapping[str, Any] | None) -> StatusError:
    """What the client gets when `webhook` denies the request with `status`."""
    status = status or {}
    code = status.get("code")
    code = code if isinstance(code, int) and not isinstance(code, bool) and code >= 400 else 400
    message, reason = status.get("message"), status.get("reason")
    by = f'admission webhook "{webhook.name}" denied the request'
    if isinstance(message, str) and message:
        text = f"{by}: {message}"
    elif isinstance(reason, str) and reason:
        text = f"{by}: {reason}"
    else:
        text = f"{by} without explanation"
    raw_details = status.get("details")
    details: Mapping[str, Any] = raw_details if isinstance(raw_details, dict) else {}
    causes = [
        Cause(str(c.get("field", "")), str(c.get("message", "")), str(c.get("reason", "")))
        for c in details.get("causes") or ()
        if isinstance(c, dict)
    ]
    return StatusError(
        code,
        reason if isinstance(reason, str) else "",
        text,
        group=str(details.get("group", "")),
        kind=str(details.get("kind", "")),
        name=str(details.get("name", "")),
        causes=causes,
    )


def call_failed(webhook: Webhook, reason: str) -> StatusError:
    """What the client gets when `webhook` (failurePolicy Fail) cannot be called."""
    message = f'failed calling webhook "{webhook.name}": {reason}'
    error = StatusError.internal(message)
    error.causes = (Cause("", message, ""),)
    return error
