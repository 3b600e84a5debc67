"""In front of every handler: authenticate (401), authorize (403), answer access reviews.

As in kube-apiserver, authorization comes before the request is routed, so a caller without a
grant learns nothing about what exists (a 403, not a 404), and the message is kube's own:
`pods is forbidden: User "system:serviceaccount:tessera-system:tessera-agent" cannot create
resource "pods" in API group "" in the namespace "default"`. Health endpoints answer everyone.
A server without a token authenticates nobody and allows everything (kube's AlwaysAllow), but
still answers reviews, so `kubectl auth can-i` says yes instead of failing.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from apiserver import bodies
from apiserver.authz import reviews
from apiserver.authz.attributes import forbidden_message, from_request
from apiserver.authz.authorizer import Authorizer
from apiserver.authz.identity import UNAUTHENTICATED_ADMIN, TokenAuthenticator, User
from apiserver.errors import StatusError
from apiserver.registry import encode
from kube.logs import V

__all__ = ["Gate"]

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_PUBLIC = ("/healthz", "/livez", "/readyz")


class Gate:
    def __init__(
        self,
        authenticator: TokenAuthenticator | None,
        authorizer: Authorizer,
        handle: Handler,
        respond: Callable[[StatusError], web.Response],
        *,
        on_user: Callable[[User], None] | None = None,
    ) -> None:
        """`on_user`: told who the request is from once it is authorized, in the request's task
        (the admission webhooks' userInfo)."""
        self._authenticator = authenticator
        self._on_user = on_user
        self._authorizer = authorizer
        self._handle = handle
        self._respond = respond

    async def __call__(self, request: web.Request) -> web.StreamResponse:
        if request.path.startswith(_PUBLIC):
            return await self._handle(request)
        if self._authenticator is None:
            user = UNAUTHENTICATED_ADMIN
        else:
            found = self._authenticator.authenticate(request.headers.get("Authorization", ""))
            if found is None:
                return self._respond(StatusError.unauthorized())
            user = found
        attrs = from_request(user, request.method, request.path, request.query)
        decision = self._authorizer.authorize(attrs)
        if not decision.allowed:
            log.log(V(2), "Forbidden", extra={"user": user.name, "verb": attrs.verb, "path": request.path})
            group = attrs.group if attrs.resource_request else ""
            message = forbidden_message(attrs, decision.reason)
            return self._respond(StatusError.forbidden(message, group=group, kind=attrs.resource, name=attrs.name))
        if reviews.is_review(attrs):
            try:
                content_type = request.content_type if "Content-Type" in request.headers else ""  # none: JSON
                raw = await request.read()
                review = bodies.decode(raw, content_type) if raw else {}
                answered = reviews.answer(attrs, review, self._authorizer, self._authenticator)
            except StatusError as e:
                return self._respond(e)
            return web.Response(body=encode(answered), status=201, content_type="application/json")
        if self._on_user is not None:
            self._on_user(user)
        return await self._handle(request)
