"""Authentication and authorization of a component's own HTTP endpoints, delegated to the API server.

As kubelet's authenticated port and kube-scheduler's secure port do: a request's bearer token is
sent to the API server in a TokenReview (who is this?), and the user it names, with the request's
path and lower-cased method, in a SubjectAccessReview (may they?). So whoever may
`POST /health/clear` on an agent, `PUT /debug/flags/v` on the scheduler or `GET /metrics`
anywhere is decided by RBAC, in one place, with the cluster's own identities:

    rules: [{nonResourceURLs: ["/metrics"], verbs: ["get"]}]          # a Prometheus scraper
    rules: [{nonResourceURLs: ["/health/clear"], verbs: ["post"]}]    # an operator clearing GPU faults

A request without credentials is `system:anonymous` (group `system:unauthenticated`) and is
authorized like any other (RBAC grants it nothing unless told to); a token the API server does
not accept is a 401. Answers are cached briefly, as kube's delegating authenticator and
authorizer do (10 s each, allowed and denied alike, bounded in size), so a scrape every few
seconds costs the API server a review now and then. A component needs kube's
`system:auth-delegator` ClusterRole (create TokenReviews and SubjectAccessReviews) for this;
a node's identity has it from the Node authorizer.

`Delegation` is thread-safe: the HTTP server's request threads share one.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

from apis.k8s.users import ANONYMOUS, UserInfo
from kube import errors
from kube.logs import V
from kube.resources import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS

if TYPE_CHECKING:  # the client (urllib3) loads with the component, not with kube.serving
    from kube.client import Client

__all__ = [
    "ANONYMOUS",
    "CACHE_SIZE",
    "CACHE_TTL_S",
    "Caller",
    "Decision",
    "Delegation",
    "DelegationFailed",
    "Unauthenticated",
]

log = logging.getLogger(__name__)

#: Seconds an answer of the API server is reused (kube's `--authentication-token-webhook-cache-ttl`
#: and `--authorization-webhook-cache-{authorized,unauthorized}-ttl` of its control-plane components).
CACHE_TTL_S: Final = 10.0
#: Answers kept at most, per cache; the oldest go first.
CACHE_SIZE: Final = 1024

_TOKEN_REVIEWS: Final = f"/apis/{TOKEN_REVIEWS.api_version}/{TOKEN_REVIEWS.plural}"
_ACCESS_REVIEWS: Final = f"/apis/{SUBJECT_ACCESS_REVIEWS.api_version}/{SUBJECT_ACCESS_REVIEWS.plural}"


#: Who made a request (kube's `user.Info`), as the API server named them.
Caller = UserInfo


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    #: The API server's reason (appended to a 403's message).
    reason: str = ""


class Unauthenticated(Exception):
    """The credentials were given and the API server does not accept them: a 401."""


class DelegationFailed(Exception):
    """The API server could not be asked (unreachable, or it refused the review itself)."""


K = TypeVar("K")
T = TypeVar("T")


class _TTLCache(Generic[K, T]):
    """At most `size` answers, each for `ttl_s` seconds. Thread-safe."""

    def __init__(self, ttl_s: float, size: int, clock: Callable[[], float]) -> None:
        self._ttl_s = ttl_s
        self._size = size
        self._clock = clock
        self._entries: OrderedDict[K, tuple[float, T]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> T | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            if self._clock() >= found[0]:
                del self._entries[key]
                return None
            return found[1]

    def put(self, key: K, value: T) -> None:
        with self._lock:
            self._entries[key] = (self._clock() + self._ttl_s, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)


class Delegation:
    """Asks the API server of `client` who a token is and what they may do, caching answers."""

    def __init__(
        self,
        client: Client,
        *,
        ttl_s: float = CACHE_TTL_S,
        size: int = CACHE_SIZE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._tokens: _TTLCache[str, tuple[Caller | None]] = _TTLCache(ttl_s, size, clock)
        self._decisions: _TTLCache[tuple[Any, ...], Decision] = _TTLCache(ttl_s, size, clock)

    def authenticate(self, authorization: str) -> Caller:
        """The caller of a request with this `Authorization` header ("" or none: ANONYMOUS).

        Raises Unauthenticated for a token the API server does not accept, or a scheme other
        than Bearer; DelegationFailed when the API server cannot be asked."""
        if not authorization.strip():
            return ANONYMOUS
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise Unauthenticated("only bearer tokens are accepted")
        key = hashlib.sha256(token.encode()).hexdigest()
        cached = self._tokens.get(key)
        if cached is None:  # not asked lately; a rejection is cached too, as (None,)
            cached = (self._review_token(token),)
            self._tokens.put(key, cached)
        if cached[0] is None:
            raise Unauthenticated("invalid bearer token")
        return cached[0]

    def _review_token(self, token: str) -> Caller | None:
        body = {"apiVersion": TOKEN_REVIEWS.api_version, "kind": TOKEN_REVIEWS.kind, "spec": {"token": token}}
        status = self._post(_TOKEN_REVIEWS, body)
        if not status.get("authenticated"):
            if status.get("error"):
                log.log(V(4), "Token review rejected a token", extra={"error": status["error"]})
            return None
        return UserInfo.from_info(status.get("user") or {})

    def authorize(self, caller: Caller, verb: str, path: str) -> Decision:
        """May `caller` do `verb` (the lower-cased HTTP method) on `path`? Raises DelegationFailed
        when the API server cannot be asked."""
        key = (caller, verb, path)  # a user is a value: its extra is sorted pairs
        cached = self._decisions.get(key)
        if cached is not None:
            return cached
        spec: dict[str, Any] = {
            "user": caller.name,
            "groups": list(caller.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if caller.uid:
            spec["uid"] = caller.uid
        if caller.extra:
            spec["extra"] = {k: list(v) for k, v in caller.extra}
        body = {"apiVersion": SUBJECT_ACCESS_REVIEWS.api_version, "kind": SUBJECT_ACCESS_REVIEWS.kind, "spec": spec}
        status = self._post(_ACCESS_REVIEWS, body)
        decision = Decision(bool(status.get("allowed")) and not status.get("denied"), str(status.get("reason") or ""))
        self._decisions.put(key, decision)
        return decision

    def _post(self, path: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        try:
            answer = self._client.request("POST", path, body=body)
        except errors.APIError as e:
            raise DelegationFailed(f"asking the API server ({path.rsplit('/', 1)[1]}): {e}") from e
        status = (answer or {}).get("status") if isinstance(answer, Mapping) else None
        return status if isinstance(status, Mapping) else {}
