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
    #: The request's `fieldSelector`, as sent (the Node authorizer lets a node list only its own
    #: pods: `spec.nodeName=NAME`).
    field_selector: str = ""

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
    verb = request_verb(method, bool(info.name), watch)
    field_selector = query.get("fieldSelector", "")
    name = info.name
    if verb in ("list", "watch") and not name:
        name = _exact_name(field_selector)  # kube's RequestInfo names a list of one object
    return Attributes(
        user,
        verb,
        True,
        path=path,
        group=info.group,
        version=info.version,
        resource=info.resource,
        subresource=info.subresource,
        namespace=namespace,
        name=name,
        field_selector=field_selector,
    )


def _exact_name(field_selector: str) -> str:
    """The name a field selector requires (`metadata.name=x`, `metadata.name==x`), else ""."""
    for term in field_selector.split(","):
        key, op, value = term.partition("==") if "==" in term else term.partition("=")
        if op and not key.endswith("!") and key.strip() == "metadata.name":
            name = value.strip()
            return name if name and name not in (".", "..") and "/" not in name and "%" not in name else ""
    return ""


def forbidden_message(attrs: Attributes, reason: str = "") -> str:
    """kube-apiserver's 403 message: `pods "web" is forbidden: User "u" cannot get resource
    "pods" in API group "" in the namespace "default"`, then `: REASON` when the authorizers gave one."""
    message = _forbidden(attrs)
    return f"{message}: {reason}" if reason else message


def _forbidden(attrs: Attributes) -> str:
    user = attrs.user.name
    if not attrs.resource_request:
        return f'forbidden: User "{user}" cannot {attrs.verb} path "{attrs.path}"'
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    where = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    why = f'User "{user}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.group}" {where}'
    subject = f'{attrs.qualified_resource} "{attrs.name}"' if attrs.name else attrs.qualified_resource
    return f"{subject} is forbidden: {why}"
