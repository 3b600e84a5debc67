"""What a request path addresses, as Kubernetes' RequestInfoFactory reads it.

`/api/v1/namespaces/ns/pods/p/status` → group "", version v1, namespace ns, resource pods, name p,
subresource status. Kept pure (a path in, a `RequestInfo` out) so the URL grammar is tested on
its own; `handlers.py` resolves the resource against the catalog.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

__all__ = ["RequestInfo", "parse_path", "request_verb"]

#: Path segments after `namespaces/{name}` that address the namespace itself, not a resource in it.
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """`is_resource` is False for non-resource paths (`/healthz`, `/api`, `/apis/g/v`)."""

    path: str
    is_resource: bool = False
    prefix: str = ""  # "api" | "apis" for API paths
    group: str = ""
    version: str = ""
    namespace: str = ""
    resource: str = ""
    name: str = ""
    subresource: str = ""
    #: The path had a `namespaces/{ns}/` part (so the resource must be namespaced).
    namespaced_path: bool = False
    #: Segments past what Kubernetes' grammar allows (always a 404).
    extra: bool = False


_VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def request_verb(method: str, item: bool, watch: bool) -> str:
    """The Kubernetes verb of a resource request (what discovery lists and RBAC grants)."""
    if watch:
        return "watch"
    if not item and method in ("GET", "DELETE"):
        return "list" if method == "GET" else "deletecollection"
    return _VERBS.get(method, method.lower())


def parse_path(path: str) -> RequestInfo:
    parts = [unquote(p) for p in path.strip("/").split("/") if p]
    if not parts or parts[0] not in ("api", "apis"):
        return RequestInfo(path)
    prefix = parts[0]
    if prefix == "api":
        if len(parts) < 2:
            return RequestInfo(path, prefix=prefix)
        group, version, rest = "", parts[1], parts[2:]
    else:
        if len(parts) < 3:
            return RequestInfo(path, prefix=prefix, group=parts[1] if len(parts) > 1 else "")
        group, version, rest = parts[1], parts[2], parts[3:]
    if not rest:
        return RequestInfo(path, prefix=prefix, group=group, version=version)
    namespace = ""
    namespaced_path = False
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
            namespaced_path = True
        else:
            namespace = ""  # the namespace object itself: /namespaces/{name}[/status]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    return RequestInfo(
        path,
        is_resource=True,
        prefix=prefix,
        group=group,
        version=version,
        namespace=namespace,
        resource=resource,
        name=name,
        subresource=subresource,
        namespaced_path=namespaced_path,
        extra=len(rest) > 3,
    )
