"""Who each component of `tessera up` is to the API server, and what RBAC gives it.

An identity is the pair (component, node), as in a cluster:

- every control-plane component runs as its own ServiceAccount (`system:serviceaccount:
  tessera-system:tessera-scheduler`), with its own token and kubeconfig, and may do what the RBAC
  of `deploy/*-rbac.yaml` grants it: the same files a cluster applies, so a verb missing there
  fails in `tessera up` and the e2e tests, not first in production;
- every agent runs as its node, `system:node:NAME` in group `system:nodes` — a kubelet's
  identity, with a token of its own — so the API server's Node authorizer and NodeRestriction
  admission confine it to its own Node, Lease, Device CR and the pods bound to it
  (docs/security.md). In a cluster the agent DaemonSet's ServiceAccount (`tessera-agent`,
  deploy/agent-rbac.yaml) is its identity instead; its table stays here for the tests of deploy/.

The user's kubeconfig (`DATA_DIR/kubeconfig`) keeps the server's admin token (cluster-admin).

Adding a component is one line in `IDENTITIES` (its ServiceAccount; and a `deploy/NAME-rbac.yaml`
with its ServiceAccount, Roles and bindings). A component with no RBAC file yet gets a
ServiceAccount with no grants, so every call it makes is a 403 naming the missing verb: write
its role from those messages. tessera up applies deploy/'s RBAC under names of its own
(`ownnames.py`), so the Helm chart installs beside it; what only `tessera up` runs (the workload
controllers, the metrics scraper's binding) is granted by `LOCAL_ROLES` below, never by `deploy/`.
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

from apiserver.authz.identity import NODE_USER_PREFIX, NODES_GROUP, parse_token_file
from cli.localcluster import ownnames
from kube import catalogue, errors
from kube.client import Client
from kube.kubeconfig import write_kubeconfig
from kube.patch import create_or_replace

__all__ = [
    "AGENT",
    "DEPLOY",
    "IDENTITIES",
    "LOCAL_ROLES",
    "METRICS_SCRAPER",
    "NAMESPACE",
    "Identity",
    "apply_manifests",
    "apply_rbac",
    "component_kubeconfigs",
    "ensure_tokens",
    "identity_of",
    "rbac_manifests",
    "up_identities",
]

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
NAMESPACE = "tessera-system"
#: The agent's component name (`agent/NODE` in `tessera up`'s component names).
AGENT = "agent"
#: The scraper's entry in IDENTITIES (a client of the components, not one of them).
METRICS_SCRAPER = "metrics-scraper"


@dataclass(frozen=True, slots=True)
class Identity:
    """Who one component is: a ServiceAccount (the control plane), or a node (an agent)."""

    #: The ServiceAccount in `tessera-system` the component runs as ("" for a node identity).
    service_account: str = ""
    #: Whether `deploy/` runs the component in a cluster (with its RBAC there); False for what
    #: only `tessera up` runs, whose rights are in `LOCAL_ROLES`.
    deployed: bool = True
    #: The node an agent acts for: its user is `system:node:NODE`.
    node: str = ""

    @classmethod
    def of_node(cls, node: str) -> Identity:
        """The agent of `node`: (component `agent`, node `node`)."""
        return cls(node=node, deployed=False)

    @property
    def component(self) -> str:
        """The component it is (`scheduler`, `agent`): the pair (component, node) is the identity."""
        return AGENT if self.node else self.service_account.removeprefix("tessera-")

    @property
    def user(self) -> str:
        if self.node:
            return f"{NODE_USER_PREFIX}{self.node}"
        return f"system:serviceaccount:{NAMESPACE}:{self.service_account}"

    @property
    def groups(self) -> tuple[str, ...]:
        if self.node:
            return (NODES_GROUP,)
        return ("system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}")

    @property
    def key(self) -> str:
        """Its name among the tokens and kubeconfigs: the ServiceAccount, or `node-NODE`."""
        return f"node-{self.node}" if self.node else self.service_account


#: Component (the name `components.py` gives it, before any `/NODE`) → its ServiceAccount.
#: `tessera up` runs each agent as its node instead (`identity_of`); the agent's ServiceAccount
#: is deploy/'s DaemonSet identity.
IDENTITIES: Mapping[str, Identity] = {
    "controller": Identity("tessera-controller"),
    "descheduler": Identity("tessera-descheduler"),
    "scheduler": Identity("tessera-scheduler"),
    AGENT: Identity("tessera-agent"),
    "kube-controller-manager": Identity("tessera-kube-controller-manager", deployed=False),
    "dashboard": Identity("tessera-dashboard"),
    # Not a process: the identity a Prometheus pointed at tessera up's components scrapes with
    # (DATA_DIR/metrics-token), bound to deploy/'s tessera-metrics-reader: get /metrics, nothing else.
    METRICS_SCRAPER: Identity("tessera-metrics-scraper", deployed=False),
}

_RBAC = "rbac.authorization.k8s.io"
_LABELS = {"app.kubernetes.io/part-of": "tessera", "app.kubernetes.io/managed-by": "tessera-up"}


def _binding(name: str, role: str, service_account: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{_RBAC}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": _LABELS},
        "roleRef": {"apiGroup": _RBAC, "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": NAMESPACE}],
    }


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
        _binding(role, role, service_account),
    ]


_READ = ["get", "list", "watch"]
_WRITE = ["get", "list", "watch", "create", "patch", "delete"]
#: What only `tessera up` needs, never granted by `deploy/`:
#: - the workload controllers (kubecontrollers/, kube-controller-manager's stand-in: in a
#:   cluster kube-controller-manager runs them under its own bootstrap roles) manage the
#:   workload kinds and their pods, and the garbage collector deletes or orphans dependents; its
#:   `/metrics` is authorized through the API server (kube/delegation.py), which takes kube's
#:   `system:auth-delegator`;
#: - the metrics scraper (`tessera-data/metrics-token`) reads `/metrics` through deploy/'s
#:   `tessera-metrics-reader`.
#: The agents need nothing here: each runs as its node, which the Node authorizer grants a
#: kubelet's rights and its own Device CR. tests/unit/deploy/test_rbac.py holds these (and deploy/'s
#: roles under tessera up's names) to the same table of calls as deploy/.
LOCAL_ROLES: list[dict[str, Any]] = [
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
            # One rule per group: RBAC grants every group of a rule with every resource of it.
            {
                "apiGroups": ["apps"],
                "resources": ["deployments/status", "replicasets/status", "statefulsets/status", "daemonsets/status"],
                "verbs": ["patch"],
            },
            {"apiGroups": ["batch"], "resources": ["jobs/status", "cronjobs/status"], "verbs": ["patch"]},
            {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets/status"], "verbs": ["patch"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
            # kubecontrollers/nodelifecycle.py: watch Nodes, read their Leases, mark them and their
            # pods not ready, taint them, evict (delete) their pods.
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
            {"apiGroups": [""], "resources": ["nodes/status", "pods/status"], "verbs": ["patch"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "watch"]},
            # kubecontrollers/resourceclaim.py: claims made from the pods' templates (create), their
            # consumers released and allocations cleared (patch resourceclaims/status), the
            # delete-protection finalizer lifted (patch), generated claims of pods that will not run
            # deleted; the templates read; the pods' status.resourceClaimStatuses (pods/status, above).
            {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": _WRITE},
            {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaimtemplates"], "verbs": ["list", "watch"]},
            {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/status"], "verbs": ["patch"]},
        ],
    ),
    _binding(
        "tessera-up:kube-controller-manager:auth-delegator", "system:auth-delegator", "tessera-kube-controller-manager"
    ),
    _binding(
        "tessera-up:metrics-scraper",
        ownnames.own_name("ClusterRole", "tessera-metrics-reader"),
        "tessera-metrics-scraper",
    ),
]


def identity_of(component: str) -> Identity:
    """`agent/sim-1` → the node's identity (`system:node:sim-1`); `scheduler` → its ServiceAccount.
    A component missing from the table gets its own ServiceAccount `tessera-NAME`, with whatever
    `deploy/NAME-rbac.yaml` grants (nothing if absent)."""
    kind, _, node = component.partition("/")
    if kind == AGENT and node:
        return Identity.of_node(node)
    return IDENTITIES.get(kind) or Identity(f"tessera-{kind}")


def up_identities(components: Iterable[str]) -> list[Identity]:
    """The identities `tessera up` issues for `components` (`scheduler`, `agent/sim-1`, ...)."""
    return list({identity_of(c).key: identity_of(c) for c in components}.values())


def ensure_tokens(path: Path, identities: Iterable[Identity]) -> dict[str, str]:
    """The token of each identity (by `Identity.key`), kept in kube's static token file at `path`.

    Tokens of these identities already there are kept, so components of an earlier run (and
    their kubeconfigs) stay valid; new identities get a fresh random token; identities no
    longer wanted (a node this run does not have) lose theirs. The file is the API server's
    `--token-auth-file`."""
    wanted = {i.key: i for i in identities}
    by_user = {i.user: i.key for i in wanted.values()}
    tokens: dict[str, str] = {}
    if path.exists():
        for token, user in parse_token_file(path.read_text(encoding="utf-8"), str(path)).items():
            if user.name in by_user:
                tokens[by_user[user.name]] = token
    for key in wanted:
        tokens.setdefault(key, secrets.token_urlsafe(32))
    lines = [f'{tokens[key]},{wanted[key].user},,"{",".join(wanted[key].groups)}"' for key in sorted(tokens)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tokens


def component_kubeconfigs(directory: Path, admin_kubeconfig: Path, tokens: Mapping[str, str]) -> dict[str, Path]:
    """A kubeconfig per identity (by `Identity.key`): the admin's server and CA, the identity's token."""
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


def apply_manifests(client: Client, docs: Iterable[Mapping[str, Any]]) -> None:
    """Create each object, or replace it when it exists (what `kubectl apply` ends with); a
    Namespace or ServiceAccount that exists is left as it is."""
    for doc in docs:
        gvr = catalogue.for_kind(str(doc.get("apiVersion")), str(doc.get("kind")))
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
