"""Who each component of `tessera up` is to the API server, and what RBAC gives it.

As in a cluster, every component runs as its own ServiceAccount (`system:serviceaccount:
tessera-system:tessera-scheduler`), with its own token and kubeconfig, and may do what the RBAC
of `deploy/*-rbac.yaml` grants it: the same files a cluster applies, so a verb missing there
fails in `tessera up` and the e2e tests, not first in production. The user's kubeconfig
(`DATA_DIR/kubeconfig`) keeps the server's admin token (cluster-admin).

Adding a component is one line in `IDENTITIES` (its ServiceAccount; and a `deploy/NAME-rbac.yaml`
with its ServiceAccount, Roles and bindings). A component with no RBAC file yet gets a
ServiceAccount with no grants, so every call it makes is a 403 naming the missing verb: write
its role from those messages. `tessera up`-only needs (the agent's simulated kubelet creates
Nodes and Leases and writes pod status, which in a cluster the kubelet does under its own
identity) are granted by `LOCAL_ROLES` below, never by `deploy/`.
"""

from __future__ import annotations

import base64
import contextlib
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from apis.extension.names import GroupVersionResource
from apiserver.authz.identity import parse_token_file
from cli.localcluster import ownnames
from kube import errors
from kube.client import Client
from kube.kubeconfig import write_kubeconfig
from kube.patch import create_or_replace
from kube.resources import NAMESPACES

__all__ = [
    "DEPLOY",
    "IDENTITIES",
    "LOCAL_ROLES",
    "NAMESPACE",
    "Identity",
    "apply_manifests",
    "apply_rbac",
    "component_kubeconfigs",
    "ensure_tokens",
    "identity_of",
    "rbac_manifests",
]

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
NAMESPACE = "tessera-system"


@dataclass(frozen=True, slots=True)
class Identity:
    #: The ServiceAccount in `tessera-system` the component runs as.
    service_account: str
    #: Whether `deploy/` runs the component in a cluster (with its RBAC there); False for what
    #: only `tessera up` runs, whose rights are in `LOCAL_ROLES`.
    deployed: bool = True

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{NAMESPACE}:{self.service_account}"

    @property
    def groups(self) -> tuple[str, ...]:
        return ("system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}")


#: Component (the name `components.py` gives it, before any `/NODE`) → its identity.
IDENTITIES: Mapping[str, Identity] = {
    "controller": Identity("tessera-controller"),
    "descheduler": Identity("tessera-descheduler"),
    "scheduler": Identity("tessera-scheduler"),
    "agent": Identity("tessera-agent"),
    "kube-controller-manager": Identity("tessera-kube-controller-manager", deployed=False),
    "dashboard": Identity("tessera-dashboard"),
}

_RBAC = "rbac.authorization.k8s.io"
_LABELS = {"app.kubernetes.io/part-of": "tessera", "app.kubernetes.io/managed-by": "tessera-up"}


def _local_role(name: str, service_account: str, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A ClusterRole `tessera-up:NAME` with `rules`, bound to the ServiceAccount."""
    role = f"tessera-up:{name}"
    return [
        {
            "apiVersion": f"{_RBAC}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role, "labels": _LABELS},
            "rules": rules,
        },
        {
            "apiVersion": f"{_RBAC}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": role, "labels": _LABELS},
            "roleRef": {"apiGroup": _RBAC, "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": NAMESPACE}],
        },
    ]


_READ = ["get", "list", "watch"]
_WRITE = ["get", "list", "watch", "create", "patch", "delete"]
#: What only `tessera up` needs, never granted by `deploy/`:
#: - the agent's simulated kubelet (agent/kubeletsim) registers its Node, renews its node Lease
#:   and reports pod status, as a kubelet does as `system:node:NAME`;
#: - the workload controllers (kubecontrollers/, kube-controller-manager's stand-in: in a
#:   cluster kube-controller-manager runs them under its own bootstrap roles) manage the
#:   workload kinds and their pods, and the garbage collector deletes or orphans dependents;
LOCAL_ROLES: list[dict[str, Any]] = [
    *_local_role(
        "simulated-kubelet",
        "tessera-agent",
        [
            # agent/kubeletsim/node.py NodeHeartbeat: register (get, create, patch labels), report
            # status, renew the node Lease in kube-node-lease.
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "create", "patch"]},
            {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create", "patch"]},
            # agent/kubeletsim/pods.py PodLifecycle: read a pod, report it Running, delete it.
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "delete"]},
            {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
        ],
    ),
    *_local_role(
        "kube-controller-manager",
        "tessera-kube-controller-manager",
        [
            # kubecontrollers/app.py: informers on every kind below; loop.py performs the plans
            # (create, patch, status patch, delete with propagation).
            {"apiGroups": [""], "resources": ["pods"], "verbs": _WRITE},
            {
                "apiGroups": ["apps"],
                "resources": ["deployments", "replicasets", "statefulsets", "daemonsets"],
                "verbs": _WRITE,
            },
            {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": _WRITE},
            {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": _READ},
            {
                "apiGroups": ["apps", "batch", "policy"],
                "resources": [
                    "deployments/status",
                    "replicasets/status",
                    "statefulsets/status",
                    "daemonsets/status",
                    "jobs/status",
                    "cronjobs/status",
                    "poddisruptionbudgets/status",
                ],
                "verbs": ["patch"],
            },
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
            # kubecontrollers/nodelifecycle.py: watch Nodes, read their Leases, mark them and their
            # pods not ready, taint them, evict (delete) their pods.
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
            {"apiGroups": [""], "resources": ["nodes/status", "pods/status"], "verbs": ["patch"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "watch"]},
        ],
    ),
]


def identity_of(component: str) -> Identity:
    """`agent/sim-1` → the agent's identity; a component missing from the table gets its own
    ServiceAccount `tessera-NAME`, with whatever `deploy/NAME-rbac.yaml` grants (nothing if absent)."""
    kind = component.split("/", 1)[0]
    return IDENTITIES.get(kind) or Identity(f"tessera-{kind}")


def ensure_tokens(path: Path, identities: Iterable[Identity]) -> dict[str, str]:
    """The token of each identity (by ServiceAccount), kept in kube's static token file at `path`.

    Tokens already there are kept, so components of an earlier run (and their kubeconfigs)
    stay valid; new identities get a fresh random token. The file is the API server's
    `--token-auth-file`."""
    tokens: dict[str, str] = {}
    if path.exists():
        for token, user in parse_token_file(path.read_text(encoding="utf-8"), str(path)).items():
            if user.name.startswith(f"system:serviceaccount:{NAMESPACE}:"):
                tokens[user.name.rsplit(":", 1)[1]] = token
    wanted = {i.service_account: i for i in identities}
    for name in wanted:
        tokens.setdefault(name, secrets.token_urlsafe(32))
    lines = []
    for name, token in sorted(tokens.items()):
        identity = wanted.get(name) or Identity(name)
        lines.append(f'{token},{identity.user},,"{",".join(identity.groups)}"')
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tokens


def component_kubeconfigs(directory: Path, admin_kubeconfig: Path, tokens: Mapping[str, str]) -> dict[str, Path]:
    """A kubeconfig per ServiceAccount: the admin's server and CA, the component's token."""
    config = yaml.safe_load(admin_kubeconfig.read_text(encoding="utf-8"))
    cluster = config["clusters"][0]["cluster"]
    ca_data = cluster.get("certificate-authority-data")
    ca_pem = base64.b64decode(ca_data) if ca_data else None
    out = {}
    for name, token in tokens.items():
        path = directory / f"{name}.kubeconfig"
        write_kubeconfig(path, cluster["server"], token=token, ca_pem=ca_pem, name=name)
        out[name] = path
    return out


def rbac_manifests(deploy: Path = DEPLOY) -> list[dict[str, Any]]:
    """The namespace and every object of `deploy/*-rbac.yaml` and `deploy/dashboard/*-rbac.yaml`
    (the optional dashboard's), in file order."""
    docs: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}]
    for path in [*sorted(deploy.glob("*-rbac.yaml")), *sorted(deploy.glob("dashboard/*-rbac.yaml"))]:
        docs += [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if isinstance(d, dict)]
    return docs


#: What `apply_manifests` knows how to store, by (apiVersion, kind).
_RESOURCES = {
    ("v1", "Namespace"): NAMESPACES,
    ("v1", "ServiceAccount"): GroupVersionResource("", "v1", "serviceaccounts", "ServiceAccount", True),
    **{
        (f"{_RBAC}/v1", kind): GroupVersionResource(_RBAC, "v1", plural, kind, namespaced)
        for kind, plural, namespaced in (
            ("Role", "roles", True),
            ("RoleBinding", "rolebindings", True),
            ("ClusterRole", "clusterroles", False),
            ("ClusterRoleBinding", "clusterrolebindings", False),
        )
    },
}


def apply_manifests(client: Client, docs: Iterable[Mapping[str, Any]]) -> None:
    """Create each object, or replace it when it exists (what `kubectl apply` ends with); a
    Namespace or ServiceAccount that exists is left as it is."""
    for doc in docs:
        gvr = _RESOURCES.get((str(doc.get("apiVersion")), str(doc.get("kind"))))
        if gvr is None:
            raise errors.APIError(f"cannot apply a {doc.get('kind')} ({doc.get('apiVersion')})")
        api = client.resource(gvr)
        namespace = (doc["metadata"].get("namespace") or "default") if gvr.namespaced else ""
        if gvr.kind in ("Namespace", "ServiceAccount"):
            with contextlib.suppress(errors.AlreadyExists):
                api.create(dict(doc), namespace=namespace)
        else:
            create_or_replace(api, doc, namespace=namespace)


def apply_rbac(client: Client, deploy: Path = DEPLOY) -> list[dict[str, Any]]:
    """deploy/'s RBAC, under `tessera up`'s own names (ownnames.py: the Helm chart installs beside
    it), plus `tessera up`'s own grants (`LOCAL_ROLES`); what it applied."""
    docs = [*ownnames.own(rbac_manifests(deploy)), *LOCAL_ROLES]
    apply_manifests(client, docs)
    return docs
