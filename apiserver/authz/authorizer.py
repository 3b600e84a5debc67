"""What an authorizer answers, and the chain of them a request goes through.

kube-apiserver asks its authorizers in turn (`--authorization-mode=Node,RBAC`): each says allow,
deny or "no opinion", with a reason; the first allow or deny ends it, and when every one has no
opinion the request is forbidden, with the reasons joined into the 403's message
(`...: node 'sim-1' cannot read 'sim-2', only its own Node object`). `Decision` is that answer and
`Chain` that order, so a request, a SubjectAccessReview and `kubectl auth can-i` all get the same
one. RBAC never denies (it only adds grants); the Node authorizer never denies either, it allows
a node's own objects and has no opinion on the rest, which RBAC may still grant.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from apiserver.authz.attributes import Attributes
from apiserver.authz.identity import User

__all__ = ["ALLOW", "NO_OPINION", "Authorizer", "Chain", "Decision", "Verdict"]


class Verdict(enum.Enum):
    ALLOW = "allow"
    DENY = "deny"
    NO_OPINION = "no opinion"


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Verdict
    #: Why, in kube's words (appended to a 403's message; SubjectAccessReview's `status.reason`).
    reason: str = ""

    @property
    def allowed(self) -> bool:
        return self.verdict is Verdict.ALLOW

    def __bool__(self) -> bool:
        return self.allowed


ALLOW = Decision(Verdict.ALLOW)
NO_OPINION = Decision(Verdict.NO_OPINION)


class Authorizer(Protocol):
    def authorize(self, attrs: Attributes) -> Decision: ...

    def rules_for(self, user: User, namespace: str) -> Iterable[Mapping[str, Any]]:
        """The rules that apply to `user` in `namespace`, as far as this authorizer can list them
        (what `kubectl auth can-i --list` shows, and what escalation checks cover)."""
        ...


class Chain:
    """kube's union authorizer: the first allow or deny wins; otherwise no opinion, with every
    authorizer's reason."""

    def __init__(self, authorizers: Sequence[Authorizer]) -> None:
        self.authorizers = tuple(authorizers)

    def authorize(self, attrs: Attributes) -> Decision:
        reasons = []
        for authorizer in self.authorizers:
            decision = authorizer.authorize(attrs)
            if decision.verdict is not Verdict.NO_OPINION:
                return decision
            if decision.reason:
                reasons.append(decision.reason)
        return Decision(Verdict.NO_OPINION, "\n".join(reasons))

    def rules_for(self, user: User, namespace: str) -> Iterable[Mapping[str, Any]]:
        """Every member's listable rules (the Node authorizer lists none, as kube's)."""
        return [rule for authorizer in self.authorizers for rule in authorizer.rules_for(user, namespace)]
