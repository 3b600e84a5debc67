"""Who a request is from, as Kubernetes says it: `UserInfo` (client-go's `user.Info`).

A name, a uid, groups and `extra` (keys to lists of values) — what TokenReview's `status.user`,
SubjectAccessReview's `spec`, AdmissionReview's `userInfo` and SelfSubjectReview carry. The
embedded API server authenticates requests into one (`apiserver.authz.identity`), and a component
learns its callers' from the API server (`kube.delegation`): one type on both sides of the
TokenReview.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["ANONYMOUS", "UNAUTHENTICATED", "Extra", "UserInfo", "extra_of"]

UNAUTHENTICATED: Final = "system:unauthenticated"
#: user.Info's extra: (key, values) pairs sorted by key, so a user is a value (hashable, a cache key).
Extra = tuple[tuple[str, tuple[str, ...]], ...]


def extra_of(pairs: Mapping[str, Iterable[Any]] | Iterable[tuple[str, Iterable[Any]]]) -> Extra:
    """`Extra` from a mapping or pairs of key to values (each value as a string)."""
    items = pairs.items() if isinstance(pairs, Mapping) else pairs
    return tuple(sorted((str(k), tuple(str(v) for v in values or ())) for k, values in items))


@dataclass(frozen=True, slots=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    #: Keys to their values, sorted by key (a node-bound token's
    #: `authentication.kubernetes.io/node-name`; impersonation's `Impersonate-Extra-*`).
    extra: Extra = ()

    def extra_values(self, key: str) -> tuple[str, ...]:
        return next((values for k, values in self.extra if k == key), ())

    def info(self) -> dict[str, object]:
        """As the API spells a user (`username`, `uid`, `groups`, `extra`)."""
        out: dict[str, object] = {"username": self.name, "groups": list(self.groups)}
        if self.uid:
            out["uid"] = self.uid
        if self.extra:
            out["extra"] = {key: list(values) for key, values in self.extra}
        return out

    @classmethod
    def from_info(cls, raw: Mapping[str, Any]) -> UserInfo:
        """From the API's spelling (TokenReview's `status.user`); missing fields are empty."""
        extra = raw.get("extra")
        return cls(
            str(raw.get("username") or ""),
            str(raw.get("uid") or ""),
            tuple(str(g) for g in raw.get("groups") or ()),
            extra_of(extra) if isinstance(extra, Mapping) else (),
        )


#: A request without credentials, where it is let through to be authorized (kube's anonymous).
ANONYMOUS: Final = UserInfo("system:anonymous", groups=(UNAUTHENTICATED,))
