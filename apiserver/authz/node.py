"""The Node authorizer: what an agent (a kubelet's identity, `system:node:NAME`) may do.

kube-apiserver's `--authorization-mode=Node` with `AuthorizeNodeWithSelectors`, for the kinds this
server keeps, plus the two objects a Tessera agent keeps for its node:

- **kube's**: the static node rules (`bootstrappolicy.NodeRules`: register and update Nodes, report
  pod status, create Events, TokenReviews and SubjectAccessReviews, ...), with the resources
  whose objects belong to one node subdivided: a node reads only its own Node (by name, or a
  list/watch with `fieldSelector=metadata.name=NAME`, which names it as kube's RequestInfo
  does), lists and watches pods only with `fieldSelector=spec.nodeName=NAME`, gets a pod,
  Secret, ConfigMap or PersistentVolumeClaim only when a pod bound to it uses it, and touches
  only its own Lease in `kube-node-lease`. Writes it may make to other objects of a kind (creating a Node,
  patching its status, deleting a pod) are allowed here and confined to its own by
  NodeRestriction admission (`apiserver/admission/noderestriction.py`), which sees the object.
- **kube's ResourceSlices** (`authorizeResourceSlice`): a node creates slices (their
  `spec.nodeName` checked by NodeRestriction), gets, updates, patches and deletes a slice whose
  `spec.nodeName` is its own (kube's graph edge), and lists, watches and deletes collections
  only with `fieldSelector=spec.nodeName=NAME` — so an agent, as a DRA driver, publishes its own
  node's devices and no other node's.
- **Tessera's**: the Device CR named after the node (`get`, `create` — its name checked by
  NodeRestriction — `update`, `patch`) and its NodeSLO (`get`, `list`, `watch`, by name:
  the agent's informer selects `metadata.name=NAME`).

Everything else gets no opinion, with kube's reason, so RBAC may still grant it and a 403 says
why (`... : node 'sim-1' cannot read 'sim-2', only its own Node object`). Other users get no
opinion at once: the Node authorizer is about nodes only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, Protocol

from apis.dra import RESOURCE_SLICES
from apis.extension.names import DEVICES, NAMESPACE_NODE_LEASE, NODE_SLOS
from apiserver.authz.attributes import Attributes
from apiserver.authz.authorizer import ALLOW, NO_OPINION, Decision, Verdict
from apiserver.authz.identity import User, node_name
from apiserver.authz.rbac import rules_allow

__all__ = ["NODE_RULES", "TESSERA_NODE_RESOURCES", "NodeAuthorizer", "NodeGraph"]

_READ = ["get", "list", "watch"]
_NAMED = ["get", "create", "update", "patch", "delete"]

#: kube's `bootstrappolicy.NodeRules()`: what every node may do before subdivision.
NODE_RULES: Final[tuple[Mapping[str, Any], ...]] = (
    {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
    {
        "apiGroups": ["authorization.k8s.io"],
        "resources": ["subjectaccessreviews", "localsubjectaccessreviews"],
        "verbs": ["create"],
    },
    {"apiGroups": [""], "resources": ["services"], "verbs": _READ},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["create", "get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["update", "patch"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["update", "patch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "update", "patch"]},
    {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "update", "patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": _READ},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["update", "patch"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["secrets", "configmaps"], "verbs": _READ},
    {"apiGroups": [""], "resources": ["persistentvolumeclaims", "persistentvolumes"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["endpoints"], "verbs": ["get"]},
    {
        "apiGroups": ["certificates.k8s.io"],
        "resources": ["certificatesigningrequests"],
        "verbs": ["create", "get", "list", "watch"],
    },
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": _NAMED},
    {"apiGroups": [""], "resources": ["persistentvolumeclaims/status"], "verbs": ["get", "update", "patch"]},
    {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]},
    {"apiGroups": ["storage.k8s.io"], "resources": ["csidrivers"], "verbs": _READ},
    {"apiGroups": ["storage.k8s.io"], "resources": ["csinodes"], "verbs": _NAMED},
    {"apiGroups": ["node.k8s.io"], "resources": ["runtimeclasses"], "verbs": _READ},
)

#: Tessera's per-node objects, (group, resource) → the verbs a node has on its own one (the
#: object named after the node). `create` is checked by NodeRestriction (the name is in the body).
TESSERA_NODE_RESOURCES: Final[Mapping[tuple[str, str], tuple[str, ...]]] = {
    (DEVICES.group, DEVICES.plural): ("get", "create", "update", "patch"),
    (NODE_SLOS.group, NODE_SLOS.plural): ("get", "list", "watch"),
}

_LEASES = ("coordination.k8s.io", "leases")
_RESOURCE_SLICES = (RESOURCE_SLICES.group, RESOURCE_SLICES.plural)
_CSI_NODES = ("storage.k8s.io", "csinodes")
#: Kinds a node may only read when a pod bound to it uses the object (kube's graph), by
#: (group, resource) → how many verbs: "get" only, or "get", "list", "watch" of one object.
_RELATED_GET_ONLY = {("", "persistentvolumeclaims"), ("", "persistentvolumes"), ("resource.k8s.io", "resourceclaims")}
_RELATED_READ = {("", "secrets"), ("", "configmaps")}


class NodeGraph(Protocol):
    """What ties an object to a node (kube's node authorizer graph), read from the store."""

    def related(self, node: str, group: str, resource: str, namespace: str, name: str) -> bool:
        """Whether the object is bound to `node` (a pod) or used by a pod bound to it (its
        Secrets, ConfigMaps, claims, ServiceAccount)."""
        ...


def _no(reason: str = "") -> Decision:
    return Decision(Verdict.NO_OPINION, reason)


def _selects(field_selector: str, field: str, value: str) -> bool:
    """Whether the selector requires `field=value` (or `==`), among its comma-separated terms."""
    for term in field_selector.split(","):
        key, op, wanted = term.partition("==") if "==" in term else term.partition("=")
        if op and not key.endswith("!") and key.strip() == field and wanted.strip() == value:
            return True
    return False


class NodeAuthorizer:
    def __init__(self, graph: NodeGraph) -> None:
        self._graph = graph

    def rules_for(self, user: User, namespace: str) -> Iterable[Mapping[str, Any]]:
        """None listed: kube's node authorizer "does not support user rule resolution"."""
        return ()

    def authorize(self, attrs: Attributes) -> Decision:
        node = node_name(attrs.user)
        if node is None:
            return NO_OPINION
        if not node:
            return _no(f'unknown node for user "{attrs.user.name}"')
        if attrs.resource_request:
            decided = self._subdivided(node, attrs)
            if decided is not None:
                return decided
        return ALLOW if rules_allow(NODE_RULES, attrs) else NO_OPINION

    # --- the subdivided resources ------------------------------------------------------------------
    def _subdivided(self, node: str, attrs: Attributes) -> Decision | None:
        key = (attrs.group, attrs.resource)
        if key in _RELATED_READ:
            return self._read_related(node, attrs)
        if key == ("", "persistentvolumeclaims") and attrs.subresource == "status":
            if attrs.verb not in ("update", "patch"):
                return _no("can only get/update/patch this type")
            return self._related(node, attrs)
        if key in _RELATED_GET_ONLY:
            if attrs.verb != "get":
                return _no("can only get individual resources of this type")
            if attrs.subresource:
                return _no("cannot get subresource")
            return self._related(node, attrs)
        if key == ("", "serviceaccounts"):
            if attrs.verb != "create" or not attrs.name:
                return _no("can only create tokens for individual service accounts")
            if attrs.subresource != "token":
                return _no("can only create token subresource of serviceaccount")
            return self._related(node, attrs)
        if key == _LEASES:
            return self._named(node, attrs, "node lease", tuple(_NAMED), lease=True)
        if key == _CSI_NODES:
            if attrs.subresource:
                return _no("cannot authorize CSINode subresources")
            return self._named(node, attrs, "CSINode", tuple(_NAMED))
        if key == ("", "nodes"):
            return self._node(node, attrs)
        if key == ("", "pods"):
            return self._pod(node, attrs)
        if key == _RESOURCE_SLICES:
            return self._resource_slice(node, attrs)
        if key in TESSERA_NODE_RESOURCES:
            return self._tessera(node, attrs, TESSERA_NODE_RESOURCES[key])
        return None

    def _resource_slice(self, node: str, attrs: Attributes) -> Decision:
        if attrs.subresource:
            return _no("cannot authorize ResourceSlice subresources")
        if attrs.verb == "create":
            return ALLOW  # NodeRestriction: spec.nodeName is its own
        if attrs.verb in ("get", "update", "patch", "delete"):
            return self._related(node, attrs)
        if attrs.verb in ("list", "watch", "deletecollection"):
            if _selects(attrs.field_selector, "spec.nodeName", node):
                return ALLOW
            return _no("can only list/watch/deletecollection resourceslices with nodeName field selector")
        return _no(
            "only the following verbs are allowed for a ResourceSlice: "
            "get, watch, list, create, update, patch, delete, deletecollection"
        )

    def _related(self, node: str, attrs: Attributes) -> Decision:
        if not attrs.name:
            return _no("No Object name found")
        if self._graph.related(node, attrs.group, attrs.resource, attrs.namespace, attrs.name):
            return ALLOW
        return _no(f"no relationship found between node '{node}' and this object")

    def _read_related(self, node: str, attrs: Attributes) -> Decision:
        if attrs.verb not in ("get", "list", "watch"):
            return _no("can only read resources of this type")
        if attrs.subresource:
            return _no("cannot read subresource")
        if not attrs.namespace:
            return _no("can only read namespaced object of this type")
        return self._related(node, attrs)

    @staticmethod
    def _named(node: str, attrs: Attributes, what: str, verbs: tuple[str, ...], *, lease: bool = False) -> Decision:
        """An object named after the node (its Lease, its CSINode); `create` is checked in admission."""
        if attrs.verb not in verbs:
            return _no(f"can only {', '.join(verbs[:-1])}, or {verbs[-1]} a {what}")
        if lease and attrs.namespace != NAMESPACE_NODE_LEASE:
            return _no(f'can only access leases in the "{NAMESPACE_NODE_LEASE}" system namespace')
        if attrs.verb != "create" and attrs.name != node:
            return _no(f"can only access {what} with the same name as the requesting node")
        return ALLOW

    @staticmethod
    def _node(node: str, attrs: Attributes) -> Decision:
        if attrs.subresource == "" and attrs.verb in ("create", "update", "patch"):
            return ALLOW  # NodeRestriction: only its own
        if attrs.subresource == "" and attrs.verb in ("get", "list", "watch"):
            if attrs.name == node:
                return ALLOW
            if not attrs.name:
                return _no(f"node '{node}' cannot read all nodes, only its own Node object")
            return _no(f"node '{node}' cannot read '{attrs.name}', only its own Node object")
        if attrs.subresource == "status" and attrs.verb in ("update", "patch"):
            return ALLOW  # NodeRestriction: only its own
        return NO_OPINION

    def _pod(self, node: str, attrs: Attributes) -> Decision:
        if attrs.subresource == "":
            if attrs.verb == "get":
                return self._related(node, attrs)
            if attrs.verb in ("list", "watch"):
                if _selects(attrs.field_selector, "spec.nodeName", node):
                    return ALLOW
                if attrs.name:
                    return self._related(node, attrs)
                return _no("can only list/watch pods with spec.nodeName field selector")
            if attrs.verb in ("create", "delete"):
                return ALLOW  # NodeRestriction: mirror pods, and pods bound to it
        # NodeRestriction: the status of pods bound to it, their eviction
        allowed = {"status": ("update", "patch"), "eviction": ("create",)}.get(attrs.subresource, ())
        return ALLOW if attrs.verb in allowed else NO_OPINION

    @staticmethod
    def _tessera(node: str, attrs: Attributes, verbs: tuple[str, ...]) -> Decision:
        kind = attrs.resource
        if attrs.subresource or attrs.verb not in verbs:
            return _no(f"can only {', '.join(verbs)} the {kind} object named after the node")
        if attrs.verb != "create" and attrs.name != node:
            if attrs.verb in ("list", "watch") and not attrs.name:
                return _no(f"can only list/watch {kind} with the field selector metadata.name={node}")
            return _no(f"can only access {kind} with the same name as the requesting node")
        return ALLOW
