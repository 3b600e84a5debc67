"""Impersonation: `Impersonate-User`, `-Group`, `-Uid` and `-Extra-*` headers, as kube-apiserver applies them.

`kubectl --as=NAME --as-group=G` sends these headers; the request then runs as the named user
(RBAC, admission's userInfo and access reviews all see it) once the caller is allowed the verb
`impersonate` on each thing it asks for:
- a user `system:serviceaccount:NS:NAME`: `serviceaccounts` NAME in NS (API group ""), and the
  user gets the ServiceAccount's groups unless groups are given;
- any other user: `users` NAME (group ""); each group: `groups` NAME (group "");
- `Impersonate-Uid`: `uids` (group `authentication.k8s.io`);
- `Impersonate-Extra-KEY: VALUE`: `userextras/KEY` named VALUE (group `authentication.k8s.io`; the
  key is lower-cased and %-decoded).
The first thing refused is kube's 403 (`users "bob" is forbidden: User "alice" cannot impersonate
resource "users" in API group "" at the cluster scope`); nothing is ever silently ignored. Groups,
uid or extras without a user are refused as kube refuses them (a 500 naming the requests).
Everyone impersonated other than `system:anonymous` is also in `system:authenticated`, unless
`system:authenticated` or `system:unauthenticated` was asked for explicitly.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote

from apiserver.authz.attributes import Attributes, forbidden_message
from apiserver.authz.identity import AUTHENTICATED, SERVICE_ACCOUNT_PREFIX, User, service_account_groups
from apiserver.authz.rbac import Authorizer
from apiserver.errors import StatusError
from apiserver.validation import dns_label, dns_subdomain

__all__ = ["USER_HEADER", "ImpersonationWithoutUser", "impersonate"]

USER_HEADER = "Impersonate-User"
GROUP_HEADER = "Impersonate-Group"
UID_HEADER = "Impersonate-Uid"
EXTRA_PREFIX = "impersonate-extra-"
AUTHENTICATION_GROUP = "authentication.k8s.io"
ANONYMOUS = "system:anonymous"
UNAUTHENTICATED = "system:unauthenticated"


class ImpersonationWithoutUser(Exception):
    """Groups, uid or extras asked for without a user: kube answers a plain-text 500 with this text."""


@dataclass(frozen=True, slots=True)
class _Ask:
    """One thing to impersonate, as kube's ObjectReference for it (the order of its fields is Go's)."""

    kind: str
    name: str
    namespace: str = ""
    api_version: str = ""
    field_path: str = ""

    def go(self) -> str:
        """Go's `%v` of the ObjectReference (Kind Namespace Name UID APIVersion ResourceVersion FieldPath)."""
        return f"{{{self.kind} {self.namespace} {self.name}  {self.api_version}  {self.field_path}}}"

    def attributes(self, requester: User) -> Attributes:
        resource, group, sub = {
            "ServiceAccount": ("serviceaccounts", "", ""),
            "User": ("users", "", ""),
            "Group": ("groups", "", ""),
            "UserExtra": ("userextras", AUTHENTICATION_GROUP, self.field_path),
            "UID": ("uids", AUTHENTICATION_GROUP, ""),
        }[self.kind]
        return Attributes(
            requester,
            "impersonate",
            True,
            group=group,
            resource=resource,
            subresource=sub,
            namespace=self.namespace,
            name=self.name,
        )


def _service_account(username: str) -> tuple[str, str] | None:
    """(namespace, name) of a ServiceAccount's username, as kube's SplitUsername reads it."""
    if not username.startswith(SERVICE_ACCOUNT_PREFIX):
        return None
    parts = username.removeprefix(SERVICE_ACCOUNT_PREFIX).split(":")
    if len(parts) != 2 or dns_label(parts[0]) or dns_subdomain(parts[1]):
        return None
    return parts[0], parts[1]


def _asks(headers: Iterable[tuple[str, str]]) -> list[_Ask]:
    items = list(headers)
    user = next((v for k, v in items if k.lower() == USER_HEADER.lower()), "")
    asks: list[_Ask] = []
    if user:
        sa = _service_account(user)
        asks.append(_Ask("ServiceAccount", sa[1], sa[0]) if sa else _Ask("User", user))
    asks += [_Ask("Group", v) for k, v in items if k.lower() == GROUP_HEADER.lower()]
    for key, value in items:
        if key.lower().startswith(EXTRA_PREFIX):
            extra_key = unquote(key.lower().removeprefix(EXTRA_PREFIX))
            asks.append(_Ask("UserExtra", value, api_version=f"{AUTHENTICATION_GROUP}/v1", field_path=extra_key))
    uid = next((v for k, v in items if k.lower() == UID_HEADER.lower()), "")
    if uid:
        asks.append(_Ask("UID", uid, api_version=f"{AUTHENTICATION_GROUP}/v1"))
    if asks and not user:
        raise ImpersonationWithoutUser(f"requested [{' '.join(a.go() for a in asks)}] without impersonating a user")
    return asks


def impersonate(requester: User, headers: Iterable[tuple[str, str]], authorizer: Authorizer) -> User:
    """`requester` itself when no impersonation header is present, else the impersonated user.

    Raises StatusError (kube's 403) for the first thing `requester` may not impersonate, and
    ImpersonationWithoutUser for groups, uid or extras without a user."""
    items = [(k, v) for k, v in headers if k[:12].lower() == "impersonate-"]
    if not items:
        return requester
    asks = _asks(items)
    if not asks:
        return requester
    groups_given = any(a.kind == "Group" for a in asks)
    name, uid, groups = "", "", []
    extra: dict[str, list[str]] = {}
    for ask in asks:
        attrs = ask.attributes(requester)
        if not authorizer.authorize(attrs):
            raise StatusError.forbidden(forbidden_message(attrs), group=attrs.group, kind=attrs.resource, name=ask.name)
        if ask.kind == "ServiceAccount":
            name = f"{SERVICE_ACCOUNT_PREFIX}{ask.namespace}:{ask.name}"
            if not groups_given:
                groups = list(service_account_groups(ask.namespace))
        elif ask.kind == "User":
            name = ask.name
        elif ask.kind == "Group":
            groups.append(ask.name)
        elif ask.kind == "UserExtra":
            extra.setdefault(ask.field_path, []).append(ask.name)
        else:
            uid = ask.name
    if name != ANONYMOUS:
        if not any(g in (AUTHENTICATED, UNAUTHENTICATED) for g in groups):
            groups.append(AUTHENTICATED)
    elif UNAUTHENTICATED not in groups:
        groups.append(UNAUTHENTICATED)
    return User(name, uid, tuple(groups), tuple(sorted((k, tuple(v)) for k, v in extra.items())))
