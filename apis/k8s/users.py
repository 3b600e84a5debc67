"""Who a request is from, as Kubernetes says it: `UserInfo` (client-go's `user.Info`).

A name, a uid, groups and `extra` (keys to lists of values) — what TokenReview's `status.user`,
SubjectAccessReview's `spec`, AdmissionReview's `userInfo` and SelfSubjectReview carry. The
embedded API server authenticates requests into one (`apiserver.authz.identity`), and a component
learns its callers' from the API server (`kube.delegation`): one type on both sides of the
TokenReview.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["ANONYMOUS", "UNAUTHENTICATED", "UserInfo"]

UNAUTHENTICATED: Final = "system:unauthenticated"


@dataclass(frozen=True, slots=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    #: Keys to their values (a node-bound token's `authentication.kubernetes.io/node-name`).
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict, hash=False)

    def info(self) -> dict[str, object]:
        """As the API spells a user (`username`, `uid`, `groups`, `extra`)."""
        out: dict[str, object] = {"username": self.name, "groups": list(self.groups)}
        if self.uid:
            out["uid"] = self.uid
        if self.extra:
            out["extra"] = {key: list(values) for key, values in self.extra.items()}
        return out

    @classmethod
    def from_info(cls, raw: Mapping[str, Any]) -> UserInfo:
        """From the API's spelling (TokenReview's `status.user`); missing fields are empty."""
        extra = raw.get("extra") or {}
        return cls(
            str(raw.get("username") or ""),
            str(raw.get("uid") or ""),
            tuple(str(g) for g in raw.get("groups") or ()),
            {str(k): tuple(str(v) for v in values or ()) for k, values in extra.items()},
        )


#: A request without credentials, where it is let through to be authorized (kube's anonymous).
ANONYMOUS: Final = UserInfo("system:anonymous", groups=(UNAUTHENTICATED,))
