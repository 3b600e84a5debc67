"""A request as kube's authorizers see it: who, which verb, on what.

Resource requests get kube's verbs (`get`, `list`, `watch`, `create`, `update`, `patch`,
`delete`, `deletecollection`) and name group, resource, subresource, namespace and object;
other paths (`/version`, `/openapi/v3`, `/apis`) are non-resource requests whose verb is the
lower-cased HTTP method, as kube-apiserver's RequestInfoFactory has it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from apiserver.authz.identity import User
from apiserver.routing import parse_path, request_verb

__all__ = ["Attributes", "forbidden_message", "from_request"]


@dataclass(frozen=True, slots=True)
class Attributes:
    user: User
    verb: str
    resource_request: bool
    path: str = ""
    group: str = ""
    version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    @property
    def qualified_resource(self) -> str:
        return f"{self.resource}.{self.group}" if self.group else self.resource


def from_request(user: User, method: str, path: str, query: Mapping[str, str]) -> Attributes:
    info = parse_path(path)
    if not info.is_resource or not info.version:
        return Attributes(user, method.lower(), False, path=path)
    watch = query.get("watch", "").lower() in ("1", "true")
    namespace = info.namespace
    if info.resource == "namespaces" and info.name:
        namespace = info.name  # a namespace object is "in" itself, as kube's RequestInfo says
    return Attributes(
        user,
        request_verb(method, bool(info.name), watch),
        True,
        path=path,
        group=info.group,
        version=info.version,
        resource=info.resource,
        subresource=info.subresource,
        namespace=namespace,
        name=info.name,
    )


def forbidden_message(attrs: Attributes) -> str:
    """kube-apiserver's 403 message: `pods "web" is forbidden: User "u" cannot get resource
    "pods" in API group "" in the namespace "default"`."""
    user = attrs.user.name
    if not attrs.resource_request:
        return f'forbidden: User "{user}" cannot {attrs.verb} path "{attrs.path}"'
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    where = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    why = f'User "{user}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.group}" {where}'
    subject = f'{attrs.qualified_resource} "{attrs.name}"' if attrs.name else attrs.qualified_resource
    return f"{subject} is forbidden: {why}"
