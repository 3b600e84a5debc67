"""NodeRestriction: a node's writes, confined to its own objects, as kube-apiserver's admission plugin.

The Node authorizer (`apiserver/authz/node.py`) allows a node to create Nodes, patch node and pod
status, delete pods and create Leases and its Device, because which object a write is about is
known only from the object itself (its name in the body, the pod's `spec.nodeName`). This plugin
sees it and refuses, with kube's messages, what is not the node's own:

- Nodes: only its own (`node "sim-1" is not allowed to modify node "sim-2"`); not its taints, and
  no labels outside the kubelet's set (`kubernetes.io/hostname`, `node.kubernetes.io/...`) in
  `kubernetes.io` / `k8s.io`, nor any `node-restriction.kubernetes.io` label — else a node could
  steer workloads to itself;
- pods: create only mirror pods bound to itself, delete and evict only pods bound to it, and
  update the status of those only (not their labels);
- Leases: only its own, in `kube-node-lease`;
- ResourceSlices: create only with `spec.nodeName` its own, delete only such a slice (kube's
  `admitResourceSlice`; the Node authorizer confines the other verbs to its own slices);
- Tessera's Device CR: only the one named after the node, whatever grants the write — a node
  that marks another node's GPUs unhealthy or healthy would steer pods.

Requests from other users pass untouched; a node user without a name is refused everything.
Pure: `admit(attrs)` raises the StatusError of a refusal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from apis.dra import RESOURCE_SLICES
from apis.extension.names import DEVICES, NAMESPACE_NODE_LEASE
from apiserver.admission.matching import Attributes
from apiserver.authz.identity import node_name
from apiserver.errors import StatusError

__all__ = ["admit"]

_MIRROR_POD: Final = "kubernetes.io/config.mirror"
_RESTRICTION_NAMESPACE: Final = "node-restriction.kubernetes.io"
#: kubelet's own labels (`k8s.io/kubelet/pkg/apis.IsKubeletLabel`).
_KUBELET_LABELS: Final = frozenset(
    {
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
    }
)
_KUBELET_LABEL_NAMESPACES: Final = ("kubelet.kubernetes.io", "node.kubernetes.io")


def _forbidden(attrs: Attributes, why: str) -> StatusError:
    """kube's `admission.NewForbidden`: `pods "web" is forbidden: WHY` (the name from the body on create)."""
    name = attrs.name or str(((attrs.obj or {}).get("metadata") or {}).get("name") or "")
    resource = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
    subject = f'{resource} "{name}"' if name else resource
    return StatusError.forbidden(f"{subject} is forbidden: {why}", group=attrs.group, kind=attrs.resource, name=name)


def _meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def _spec(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (obj or {}).get("spec") or {}


def admit(attrs: Attributes) -> None:
    """Raise the refusal of a node's write that is not about its own objects; else return."""
    node = node_name(attrs.user)
    if node is None:
        return
    if not node:
        raise _forbidden(attrs, f'could not determine node from user "{attrs.user.name}"')
    key = (attrs.group, attrs.resource)
    if key == ("", "pods"):
        _pod(node, attrs)
    elif key == ("", "nodes"):
        _node(node, attrs)
    elif key == ("coordination.k8s.io", "leases"):
        _lease(node, attrs)
    elif key == (RESOURCE_SLICES.group, RESOURCE_SLICES.plural):
        _resource_slice(node, attrs)
    elif key == (DEVICES.group, DEVICES.plural):
        name = attrs.name or str(_meta(attrs.obj).get("name") or "")
        if name != node:
            raise _forbidden(attrs, f'node "{node}" can only modify the {DEVICES.kind} named after itself')


def _pod(node: str, attrs: Attributes) -> None:
    itself = "with spec.nodeName set to itself"
    if attrs.subresource == "status":
        if attrs.operation != "UPDATE":
            raise _forbidden(attrs, f'unexpected operation "{attrs.operation}"')
        if _spec(attrs.old).get("nodeName") != node:
            raise _forbidden(attrs, f'node "{node}" can only update pod status for pods {itself}')
        if (_meta(attrs.old).get("labels") or {}) != (_meta(attrs.obj).get("labels") or {}):
            raise _forbidden(attrs, f'node "{node}" cannot update labels through pod status')
        return
    if attrs.subresource == "eviction":
        if _spec(attrs.old).get("nodeName") != node:
            raise _forbidden(attrs, f"node {node} can only evict pods {itself}")
        return
    if attrs.subresource:
        only = "only 'status' and 'eviction' are allowed"
        raise _forbidden(attrs, f'unexpected pod subresource "{attrs.subresource}", {only}')
    if attrs.operation == "DELETE":
        if _spec(attrs.old).get("nodeName") != node:
            raise _forbidden(attrs, f'node "{node}" can only delete pods {itself}')
        return
    if attrs.operation == "CREATE":
        mirror = f'node "{node}" can only create mirror pods'
        annotations = _meta(attrs.obj).get("annotations") or {}
        if _MIRROR_POD not in annotations:
            raise _forbidden(attrs, f'pod does not have "{_MIRROR_POD}" annotation, {mirror}')
        if _spec(attrs.obj).get("nodeName") != node:
            raise _forbidden(attrs, f'node "{node}" can only create pods {itself}')
        return
    only = f'node "{node}" can only create and delete mirror pods'
    raise _forbidden(attrs, f'unexpected operation "{attrs.operation}", {only}')


def _modified_labels(new: Mapping[str, str], old: Mapping[str, str]) -> set[str]:
    return {k for k in {*new, *old} if new.get(k) != old.get(k) or (k in new) != (k in old)}


def _label_namespace(key: str) -> str:
    prefix, slash, _ = key.partition("/")
    return prefix if slash else ""


def _forbidden_labels(keys: set[str]) -> list[str]:
    out = []
    for key in keys:
        namespace = _label_namespace(key)
        if namespace == _RESTRICTION_NAMESPACE or namespace.endswith("." + _RESTRICTION_NAMESPACE):
            out.append(key)
            continue
        kubernetes = any(namespace == d or namespace.endswith("." + d) for d in ("kubernetes.io", "k8s.io"))
        kubelet = key in _KUBELET_LABELS or any(
            namespace == d or namespace.endswith("." + d) for d in _KUBELET_LABEL_NAMESPACES
        )
        if kubernetes and not kubelet:
            out.append(key)
    return sorted(out)


def _node(node: str, attrs: Attributes) -> None:
    name = attrs.name or str(_meta(attrs.obj).get("name") or "")
    if name != node:
        raise _forbidden(attrs, f'node "{node}" is not allowed to modify node "{name}"')
    new_labels = _meta(attrs.obj).get("labels") or {}
    if attrs.operation == "CREATE":
        if _spec(attrs.obj).get("configSource") is not None:
            raise _forbidden(attrs, f'node "{node}" is not allowed to create pods with a non-nil configSource')
        if bad := _forbidden_labels(set(new_labels)):
            raise _forbidden(attrs, f'node "{node}" is not allowed to set the following labels: {", ".join(bad)}')
    elif attrs.operation == "UPDATE":
        config = _spec(attrs.obj).get("configSource")
        if config is not None and config != _spec(attrs.old).get("configSource"):
            why = "is not allowed to update configSource to a new non-nil configSource"
            raise _forbidden(attrs, f'node "{node}" {why}')
        if (_spec(attrs.obj).get("taints") or []) != (_spec(attrs.old).get("taints") or []):
            raise _forbidden(attrs, f'node "{node}" is not allowed to modify taints')
        if bad := _forbidden_labels(_modified_labels(new_labels, _meta(attrs.old).get("labels") or {})):
            raise _forbidden(attrs, f"is not allowed to modify labels: {', '.join(bad)}")


def _lease(node: str, attrs: Attributes) -> None:
    if attrs.namespace != NAMESPACE_NODE_LEASE:
        raise _forbidden(attrs, f'can only access leases in the "{NAMESPACE_NODE_LEASE}" system namespace')
    name = str(_meta(attrs.obj).get("name") or "") if attrs.operation == "CREATE" else attrs.name
    if name != node:
        raise _forbidden(attrs, "can only access node lease with the same name as the requesting node")


def _resource_slice(node: str, attrs: Attributes) -> None:
    """Create and delete name the node in the object (the new one, the deleted one); the Node
    authorizer, which cannot see them, leaves these two to here."""
    if attrs.operation == "CREATE" and _spec(attrs.obj).get("nodeName") != node:
        raise _forbidden(attrs, "can only create ResourceSlice with the same NodeName as the requesting node")
    if attrs.operation == "DELETE" and _spec(attrs.old).get("nodeName") != node:
        raise _forbidden(attrs, "can only delete ResourceSlice with the same NodeName as the requesting node")
