"""A pod's claims: `spec.resourceClaims` (the claims it uses, each named once, from a claim or
a template) and its containers' `resources.claims` (which of them each container gets, naming a
pod claim), and `status.resourceClaimStatuses` (the claims generated for its templates), as
kube-apiserver checks them. The pod strategy calls these on create and on every write of the
pod (its spec is immutable, so the spec's part only matters once)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apiserver.dra.checks import mapping, objects
from apiserver.errors import Cause
from apiserver.validation import dns_label, dns_subdomain

__all__ = ["validate_pod_claim_statuses", "validate_pod_claims"]

_ONE_SOURCE = "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"
_TWO_SOURCES = "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified"


def _pod_claim(claim: Any, path: str, names: set[str]) -> list[Cause]:
    c = mapping(claim)
    name = c.get("name")
    causes = []
    if not isinstance(name, str) or not name:
        causes.append(Cause.required(f"{path}.name"))
    elif name in names:
        causes.append(Cause.duplicate(f"{path}.name", name))
    else:
        if why := dns_label(name):
            causes.append(Cause.invalid(f"{path}.name", name, why))
        names.add(name)
    claim_name, template = c.get("resourceClaimName"), c.get("resourceClaimTemplateName")
    if claim_name is not None and template is not None:
        causes.append(Cause(path, f'Invalid value: "object": {_TWO_SOURCES}'))
    elif claim_name is None and template is None:
        causes.append(Cause(path, f'Invalid value: "object": {_ONE_SOURCE}'))
    for field, value in (("resourceClaimName", claim_name), ("resourceClaimTemplateName", template)):
        if value is not None and (why := dns_subdomain(str(value)) if value else "must not be empty"):
            causes.append(Cause.invalid(f"{path}.{field}", str(value), why))
    return causes


def _container_claims(claims: list[Any], path: str, pod_claims: set[str]) -> list[Cause]:
    """kube's validateResourceClaimNames: each entry names a pod claim (and optionally one of its
    requests), at most once."""
    causes = []
    seen: set[str] = set()
    for i, claim in enumerate(claims):
        c, at = mapping(claim), f"{path}[{i}]"
        name = c.get("name")
        if not isinstance(name, str) or not name:
            causes.append(Cause.required(at))
            continue
        key = f"{name}/{c['request']}" if c.get("request") else name
        if key in seen:
            causes.append(Cause.duplicate(at, key))
        seen.add(key)
        if name not in pod_claims:
            known = ", ".join(sorted(pod_claims))
            detail = "must be one of the names in pod.spec.resourceClaims" + (
                f": {known}" if known else " which is empty"
            )
            causes.append(Cause.not_found(at, name, detail))
    return causes


def validate_pod_claims(spec: Mapping[str, Any]) -> list[Cause]:
    """`spec.resourceClaims` and every container's `resources.claims` (paths from `spec`)."""
    names: set[str] = set()
    causes = []
    for i, claim in enumerate(objects(spec.get("resourceClaims"))):
        causes += _pod_claim(claim, f"spec.resourceClaims[{i}]", names)
    for field in ("containers", "initContainers", "ephemeralContainers"):
        for i, container in enumerate(objects(spec.get(field))):
            claims = objects(mapping(mapping(container).get("resources")).get("claims"))
            causes += _container_claims(claims, f"spec.{field}[{i}].resources.claims", names)
    return causes


def validate_pod_claim_statuses(spec: Mapping[str, Any], status: Mapping[str, Any]) -> list[Cause]:
    """`status.resourceClaimStatuses`: one entry per pod claim at most, each naming a pod claim,
    the generated claim's name a valid object name (or absent: no claim was needed)."""
    pod_claims = {str(mapping(c).get("name")) for c in objects(spec.get("resourceClaims"))}
    causes = []
    seen: set[str] = set()
    for i, entry in enumerate(objects(status.get("resourceClaimStatuses"))):
        e, at = mapping(entry), f"status.resourceClaimStatuses[{i}]"
        name = e.get("name")
        if not isinstance(name, str) or not name:
            causes.append(Cause.required(f"{at}.name"))
            continue
        if name in seen:
            causes.append(Cause.duplicate(f"{at}.name", name))
        seen.add(name)
        if name not in pod_claims:
            causes.append(Cause.invalid(f"{at}.name", name, "must match the name of an entry in `spec.resourceClaims`"))
        generated = e.get("resourceClaimName")
        if generated is not None and (why := dns_subdomain(str(generated))):
            causes.append(Cause.invalid(f"{at}.resourceClaimName", str(generated), why))
    return causes
