"""In front of every handler: authenticate (401), authorize (403), answer access reviews.

As in kube-apiserver, authorization comes before the request is routed, so a caller without a
grant learns nothing about what exists (a 403, not a 404), and the message is kube's own:
`pods is forbidden: User "system:serviceaccount:tessera-system:tessera-agent" cannot create
resource "pods" in API group "" in the namespace "default"`. Health endpoints answer everyone.
Between authentication and authorization, impersonation headers are applied or refused
(`impersonation.py`), and the resulting user is the request's `REQUESTER` (what RBAC's
escalation checks and admission webhooks see).
A server without a token authenticates nobody and allows everything (kube's AlwaysAllow), but
still answers reviews, so `kubectl auth can-i` says yes instead of failing.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from apiserver.authz import reviews
from apiserver.authz.attributes import Attributes, forbidden_message, from_request
from apiserver.authz.authorizer import Authorizer
from apiserver.authz.escalation import REQUESTER
from apiserver.authz.identity import UNAUTHENTICATED_ADMIN, TokenAuthenticator, User
from apiserver.authz.impersonation import ImpersonationWithoutUser, impersonate
from apiserver.errors import StatusError
from apiserver.flowcontrol import FlowControl
from apiserver.registry import encode
from kube.logs import V

__all__ = ["Gate"]

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ReadBody = Callable[[web.Request], Awaitable[Any]]
_PUBLIC = ("/healthz", "/livez", "/readyz")


class Gate:
    def __init__(
        self,
        authenticator: TokenAuthenticator | None,
        authorizer: Authorizer,
        handle: Handler,
        respond: Callable[[StatusError], web.Response],
        *,
        read_body: ReadBody,
        flow: FlowControl,
        on_user: Callable[[User], None] | None = None,
    ) -> None:
        """`on_user`: told who the request is from once it is authorized, in the request's task
        (the admission webhooks' userInfo). `read_body`: an access review's body, decoded.
        `flow`: the seats and queues each request waits for once its user is known."""
        self._authenticator = authenticator
        self._on_user = on_user
        self._authorizer = authorizer
        self._handle = handle
        self._respond = respond
        self._read_body = read_body
        self._flow = flow

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
        try:
            user = impersonate(user, request.headers.items(), self._authorizer)
        except StatusError as e:
            log.log(V(2), "Impersonation refused", extra={"user": user.name, "reason": e.message})
            return self._respond(e)
        except ImpersonationWithoutUser as e:  # kube's answer, word for word: a plain-text 500
            return web.Response(status=500, text=f'Internal Server Error: "{request.path_qs}": {e}\n')
        REQUESTER.set(user)
        attrs = from_request(user, request.method, request.path, request.query)
        try:
            if attrs.verb == "watch":  # long-running: counted per user, holds no seat while it streams
                with self._flow.watch(user):
                    return await self._authorized(request, user, attrs)
            async with self._flow.seat(user):
                return await self._authorized(request, user, attrs)
        except StatusError as e:  # refused by flow control (429)
            return self._respond(e)

    async def _authorized(self, request: web.Request, user: User, attrs: Attributes) -> web.StreamResponse:
        decision = self._authorizer.authorize(attrs)
        if not decision.allowed:
            log.log(V(2), "Forbidden", extra={"user": user.name, "verb": attrs.verb, "path": request.path})
            group = attrs.group if attrs.resource_request else ""
            message = forbidden_message(attrs, decision.reason)
            return self._respond(StatusError.forbidden(message, group=group, kind=attrs.resource, name=attrs.name))
        if reviews.is_review(attrs):
            try:
                review = await self._read_body(request)
                answered = reviews.answer(attrs, review, self._authorizer, self._authenticator)
            except StatusError as e:
                return self._respond(e)
            return web.Response(body=encode(answered), status=201, content_type="application/json")
        if self._on_user is not None:
            self._on_user(user)
        return await self._handle(request)
