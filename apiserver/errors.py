"""Failures of a request, as the Kubernetes `Status` objects a client expects.

Every handler raises `StatusError` (never returns an error by hand), and one place in
`handlers.py` turns it into a response, so every 4xx/5xx body has the same shape as
kube-apiserver's: `kind: Status`, `reason`, `message`, `details`, `code`. The constructors below
word messages as kube-apiserver does (`pods "x" not found`), because clients and people read them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Cause", "StatusError", "status_body", "success_body"]


@dataclass(frozen=True, slots=True)
class Cause:
    """One field-level problem in an Invalid (422) response."""

    field: str
    message: str
    reason: str = "FieldValueInvalid"

    def to_dict(self) -> dict[str, str]:
        return {"reason": self.reason, "message": self.message, "field": self.field}

    # --- the kinds of field error, worded as apimachinery's field.Error.ErrorBody words them -------
    @classmethod
    def invalid(cls, field: str, value: str | int, detail: str) -> Cause:
        """`Invalid value: "500m": must be an integer` (a string value is quoted, as Go's %q)."""
        return cls(field, f"Invalid value: {json.dumps(value)}: {detail}")

    @classmethod
    def required(cls, field: str, detail: str = "") -> Cause:
        return cls(field, f"Required value: {detail}" if detail else "Required value", "FieldValueRequired")

    @classmethod
    def forbidden(cls, field: str, detail: str) -> Cause:
        return cls(field, f"Forbidden: {detail}", "FieldValueForbidden")

    @classmethod
    def duplicate(cls, field: str, value: object) -> Cause:
        return cls(field, f"Duplicate value: {json.dumps(value)}", "FieldValueDuplicate")

    @classmethod
    def not_found(cls, field: str, value: object, detail: str = "") -> Cause:
        body = f"Not found: {json.dumps(value)}"
        return cls(field, f"{body}: {detail}" if detail else body, "FieldValueNotFound")

    @classmethod
    def not_supported(cls, field: str, value: object, supported: Sequence[str]) -> Cause:
        """`Unsupported value: "Some": supported values: "All", "ExactCount"`."""
        listed = ", ".join(json.dumps(s) for s in supported)
        return cls(
            field, f"Unsupported value: {json.dumps(value)}: supported values: {listed}", "FieldValueNotSupported"
        )

    @classmethod
    def too_many(cls, field: str, count: int, limit: int) -> Cause:
        return cls(field, f"Too many: {count}: must have at most {limit} items", "FieldValueTooMany")

    @classmethod
    def too_long(cls, field: str, limit: int) -> Cause:
        return cls(field, f"Too long: may not be more than {limit} bytes", "FieldValueTooLong")


class StatusError(Exception):
    """A request failed; `code` is the HTTP status, `reason` Kubernetes' StatusReason."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        group: str = "",
        kind: str = "",
        name: str = "",
        causes: Sequence[Cause] = (),
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.group = group
        self.kind = kind
        self.name = name
        self.causes = tuple(causes)
        self.retry_after = retry_after

    def to_status(self) -> dict[str, Any]:
        details: dict[str, Any] = {}
        if self.name:
            details["name"] = self.name
        if self.group:
            details["group"] = self.group
        if self.kind:
            details["kind"] = self.kind
        if self.causes:
            details["causes"] = [c.to_dict() for c in self.causes]
        if self.retry_after is not None:
            details["retryAfterSeconds"] = self.retry_after
        return status_body("Failure", self.code, self.message, reason=self.reason, details=details)

    # --- the kinds of failure, worded as kube-apiserver words them --------------------------------
    @classmethod
    def bad_request(cls, message: str) -> StatusError:
        return cls(400, "BadRequest", message)

    @classmethod
    def cannot_handle(cls, kind: str, version: str, detail: str) -> StatusError:
        """A body that does not decode as its kind (a wrong JSON type; under fieldValidation=Strict
        an unknown field): `Deployment in version "v1" cannot be handled as a Deployment: ...`."""
        return cls.bad_request(f'{kind} in version "{version}" cannot be handled as a {kind}: {detail}')

    @classmethod
    def unauthorized(cls) -> StatusError:
        return cls(401, "Unauthorized", "Unauthorized")

    @classmethod
    def forbidden(cls, message: str, *, group: str = "", kind: str = "", name: str = "") -> StatusError:
        return cls(403, "Forbidden", message, group=group, kind=kind, name=name)

    @classmethod
    def not_found(cls, resource: str, name: str, *, group: str = "") -> StatusError:
        qualified = f"{resource}.{group}" if group else resource
        return cls(404, "NotFound", f'{qualified} "{name}" not found', group=group, kind=resource, name=name)

    @classmethod
    def no_route(cls, path: str) -> StatusError:
        return cls(404, "NotFound", f"the server could not find the requested resource ({path})")

    @classmethod
    def method_not_allowed(cls, method: str, what: str) -> StatusError:
        return cls(405, "MethodNotAllowed", f"{method} is not supported on {what}")

    @classmethod
    def not_acceptable(cls, message: str) -> StatusError:
        return cls(406, "NotAcceptable", message)

    @classmethod
    def already_exists(cls, resource: str, name: str, *, group: str = "") -> StatusError:
        qualified = f"{resource}.{group}" if group else resource
        return cls(409, "AlreadyExists", f'{qualified} "{name}" already exists', group=group, kind=resource, name=name)

    @classmethod
    def conflict(cls, resource: str, name: str, why: str, *, group: str = "") -> StatusError:
        qualified = f"{resource}.{group}" if group else resource
        message = f'Operation cannot be fulfilled on {qualified} "{name}": {why}'
        return cls(409, "Conflict", message, group=group, kind=resource, name=name)

    @classmethod
    def gone(cls, message: str) -> StatusError:
        return cls(410, "Expired", message)

    @classmethod
    def too_large(cls, message: str) -> StatusError:
        return cls(413, "RequestEntityTooLarge", f"Request entity too large: {message}")

    @classmethod
    def unsupported_media_type(cls, content_type: str) -> StatusError:
        return cls(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - {content_type}")

    @classmethod
    def invalid(cls, kind: str, name: str, causes: Sequence[Cause], *, group: str = "") -> StatusError:
        """422 with one cause per problem; the message lists them as apimachinery's aggregate
        error does: the one problem alone, several (duplicates dropped) in `[a, b]`."""
        problems = list(dict.fromkeys(f"{c.field}: {c.message}" for c in causes))
        subject = f'{kind} "{name}" is invalid' if name else f"{kind} is invalid"
        if len(problems) > 1:
            message = f"{subject}: [{', '.join(problems)}]"
        else:
            message = f"{subject}: {problems[0]}" if problems else subject
        return cls(422, "Invalid", message, group=group, kind=kind, name=name, causes=causes)

    @classmethod
    def too_many_requests(cls, message: str, retry_after: int = 1) -> StatusError:
        return cls(429, "TooManyRequests", message, retry_after=retry_after)

    @classmethod
    def internal(cls, message: str = "an error on the server has prevented the request from succeeding") -> StatusError:
        return cls(500, "InternalError", f"Internal error occurred: {message}")

    @classmethod
    def unavailable(cls, message: str) -> StatusError:
        return cls(503, "ServiceUnavailable", message)


def status_body(
    status: str, code: int, message: str = "", *, reason: str = "", details: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A `meta/v1 Status` object."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": status}
    if message:
        body["message"] = message
    if reason:
        body["reason"] = reason
    if details:
        body["details"] = details
    body["code"] = code
    return body


def success_body(code: int = 200, *, name: str = "", kind: str = "", group: str = "") -> dict[str, Any]:
    """The Status a successful binding, eviction or collection delete returns."""
    details = {k: v for k, v in (("name", name), ("group", group), ("kind", kind)) if v}
    return status_body("Success", code, details=details or None)
