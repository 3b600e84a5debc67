"""Authentication: a bearer token names a user, as kube-apiserver's token authenticators do.

Who a request is from is a `User` (`apis.k8s.users.UserInfo`, kube's `user.Info`: a name, a uid,
groups and `extra`, keys to lists of values, as TokenReview and SubjectAccessReview carry them;
the components' `kube.delegation` reads the same type from TokenReviews). Tessera's components are
identified the way kube identifies its own, as the pair (component, node):

- a component of the control plane is a ServiceAccount user
  (`system:serviceaccount:tessera-system:tessera-scheduler`), one identity for all its replicas;
- an agent acts for one node, and is `system:node:NAME` in group `system:nodes` — a kubelet's
  identity, which the Node authorizer (`node.py`) and NodeRestriction admission
  (`apiserver/admission/noderestriction.py`) confine to that node's objects. `node_name(user)`
  is kube's NodeIdentifier. On a cluster whose agents run as a DaemonSet's ServiceAccount, the
  node comes in the token instead: kube (1.30+) puts the node a bound token's pod runs on in
  `extra["authentication.kubernetes.io/node-name"]` (`NODE_NAME_EXTRA`), and a
  ValidatingAdmissionPolicy can confine the agent with it (docs/security.md#real-clusters).

The server's own token (`--token-file`) is the administrator: user `tessera-admin` in group
`system:masters`, which RBAC's bootstrap policy makes cluster-admin (so the user's kubeconfig
can do anything, as a cluster's admin kubeconfig can). More identities come from a file in kube's
`--token-auth-file` format, one CSV line per user: `token,user,uid,"group1,group2"`. `tessera up`
writes one for its components, each a ServiceAccount-style user
(`system:serviceaccount:tessera-system:tessera-scheduler`), so RBAC applies to them as in a
cluster. Every authenticated user is also in `system:authenticated`.
"""

from __future__ import annotations

import csv
import hmac
import io
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from apis.errors import ConfigError
from apis.k8s.users import ANONYMOUS, UserInfo

__all__ = [
    "ADMIN",
    "ANONYMOUS",
    "AUTHENTICATED",
    "MASTERS",
    "NODES_GROUP",
    "NODE_NAME_EXTRA",
    "NODE_USER_PREFIX",
    "TokenAuthenticator",
    "User",
    "node_name",
    "node_user",
    "parse_token_file",
    "service_account_groups",
    "service_account_user",
]

AUTHENTICATED: Final = "system:authenticated"
#: kube's privileged group: its members pass every authorization check (RBAC is not consulted).
MASTERS: Final = "system:masters"
SERVICE_ACCOUNT_PREFIX: Final = "system:serviceaccount:"
#: kube's node identities: `system:node:NAME` in this group (kubelet's client certificate).
NODES_GROUP: Final = "system:nodes"
NODE_USER_PREFIX: Final = "system:node:"
#: The extra key under which kube-apiserver (1.30+) names the node a bound ServiceAccount
#: token's pod runs on (`authentication.kubernetes.io/node-name`).
NODE_NAME_EXTRA: Final = "authentication.kubernetes.io/node-name"

#: kube's `user.Info` (apis.k8s.users): name, uid, groups and extra.
User = UserInfo


ADMIN = User("tessera-admin", "", (MASTERS, AUTHENTICATED))
#: Who a server without authentication (plain HTTP on loopback) treats every request as.
UNAUTHENTICATED_ADMIN = User("system:admin", "", (MASTERS, AUTHENTICATED))


def service_account_groups(namespace: str) -> tuple[str, ...]:
    """The groups kube gives a ServiceAccount's user (without system:authenticated)."""
    return ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")


def node_user(node: str) -> User:
    """The identity of the agent (kubelet) of `node`."""
    return User(f"{NODE_USER_PREFIX}{node}", "", (NODES_GROUP, AUTHENTICATED))


def node_name(user: User) -> str | None:
    """The node `user` acts for, as kube's NodeIdentifier reads it: `system:node:NAME` in group
    `system:nodes` → NAME ("" for a node user without a name); None for any other user."""
    if not user.name.startswith(NODE_USER_PREFIX) or NODES_GROUP not in user.groups:
        return None
    return user.name.removeprefix(NODE_USER_PREFIX)


def service_account_user(namespace: str, name: str) -> User:
    """The user a ServiceAccount's token authenticates as, with kube's groups."""
    return User(f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}", "", (*service_account_groups(namespace), AUTHENTICATED))


def parse_token_file(text: str, source: str = "token file") -> dict[str, User]:
    """kube's static token file: `token,user,uid[,"group1,group2,..."]` per line."""
    users: dict[str, User] = {}
    for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or (len(row) == 1 and not row[0].strip()) or row[0].startswith("#"):
            continue
        if len(row) < 3 or not row[0] or not row[1]:
            raise ConfigError(f"{source} line {number}: want token,user,uid[,groups], got {len(row)} fields")
        token, name, uid = (f.strip() for f in row[:3])
        groups = tuple(g.strip() for g in row[3].split(",") if g.strip()) if len(row) > 3 else ()
        if token in users:
            raise ConfigError(f"{source} line {number}: a token is listed twice")
        users[token] = User(name, uid, (*groups, AUTHENTICATED) if AUTHENTICATED not in groups else groups)
    return users


class TokenAuthenticator:
    """Bearer tokens to users; constant-time comparison against each known token."""

    def __init__(self, admin_token: str, others: Mapping[str, User] | None = None) -> None:
        self._tokens = [(admin_token.encode(), ADMIN)]
        self._tokens += [(t.encode(), u) for t, u in (others or {}).items()]

    @classmethod
    def from_files(cls, admin_token: str, token_auth_file: Path | None) -> TokenAuthenticator:
        if token_auth_file is None:
            return cls(admin_token)
        try:
            text = token_auth_file.read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"cannot read token auth file {token_auth_file}: {e.strerror}") from None
        return cls(admin_token, parse_token_file(text, str(token_auth_file)))

    def authenticate(self, authorization: str) -> User | None:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        given = token.strip().encode()
        found = None
        for known, user in self._tokens:
            if hmac.compare_digest(given, known):
                found = user
        return found
