"""What the authorizers read, straight from the registry's memory: the RBAC objects, and the
pods that tie objects to a node (the Node authorizer's graph)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from apis.dra import RESOURCE_SLICES
from apiserver.authz.rbac import Obj
from apiserver.catalog import RBAC_GROUP, ResourceType
from apiserver.errors import StatusError
from apiserver.registry import Registry
from apiserver.selectors import ObjectFilter

__all__ = ["RegistryGraph", "RegistryPolicy", "pod_references"]


class RegistryPolicy:
    def __init__(self, registry: Registry) -> None:
        self._registry = registry

    def _type(self, plural: str) -> ResourceType:
        rt = self._registry.catalog.lookup(RBAC_GROUP, "v1", plural)
        assert rt is not None, plural
        return rt

    def objects(self, plural: str, namespace: str = "") -> Sequence[Obj]:
        return [e.obj for e in self._registry.snapshot(self._type(plural), ObjectFilter(namespace))]

    def get(self, plural: str, namespace: str, name: str) -> Obj | None:
        try:
            return self._registry.get(self._type(plural), namespace, name).obj
        except StatusError:
            return None


def _containers(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(key) or ():
            if isinstance(container, Mapping):
                yield container


def pod_references(pod: Mapping[str, Any], resource: str) -> set[str]:
    """The names of the `resource` objects (secrets, configmaps, persistentvolumeclaims,
    serviceaccounts, resourceclaims) the pod uses, as kube's node graph records them."""
    spec = pod.get("spec") or {}
    found: set[str] = set()
    volumes = [v for v in spec.get("volumes") or () if isinstance(v, Mapping)]
    if resource == "serviceaccounts":
        found.add(str(spec.get("serviceAccountName") or "default"))
    elif resource == "persistentvolumeclaims":
        found |= {str((v.get("persistentVolumeClaim") or {}).get("claimName") or "") for v in volumes}
    elif resource == "resourceclaims":
        found |= {str(c.get("resourceClaimName") or "") for c in spec.get("resourceClaims") or ()}
        statuses = (pod.get("status") or {}).get("resourceClaimStatuses") or ()
        found |= {str(c.get("resourceClaimName") or "") for c in statuses}
    elif resource in ("secrets", "configmaps"):
        secret = resource == "secrets"
        volume_key, name_key = ("secret", "secretName") if secret else ("configMap", "name")
        ref_key, env_key = ("secretKeyRef", "secretRef") if secret else ("configMapKeyRef", "configMapRef")
        found |= {str((v.get(volume_key) or {}).get(name_key) or "") for v in volumes}
        for volume in volumes:
            for source in (volume.get("projected") or {}).get("sources") or ():
                found.add(str((source.get(volume_key) or {}).get("name") or ""))
        for container in _containers(spec):
            for env in container.get("env") or ():
                found.add(str(((env.get("valueFrom") or {}).get(ref_key) or {}).get("name") or ""))
            for env_from in container.get("envFrom") or ():
                found.add(str((env_from.get(env_key) or {}).get("name") or ""))
        if secret:
            found |= {str(s.get("name") or "") for s in spec.get("imagePullSecrets") or ()}
    found.discard("")
    return found


class RegistryGraph:
    """kube's node authorizer graph, read from the store when asked: a pod is related to the
    node it is bound to, and what a pod uses is related to that node too; a ResourceSlice is
    related to the node its `spec.nodeName` names."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry

    def related(self, node: str, group: str, resource: str, namespace: str, name: str) -> bool:
        if group == "" and resource == "pods":
            pod = self._registry.peek("pods", namespace, name)
            return pod is not None and (pod.get("spec") or {}).get("nodeName") == node
        if (group, resource) == (RESOURCE_SLICES.group, RESOURCE_SLICES.plural):
            # kube's graph: an edge from a ResourceSlice to the node of its spec.nodeName
            slice_ = self._registry.peek(f"{resource}.{group}", "", name)
            return slice_ is not None and (slice_.get("spec") or {}).get("nodeName") == node
        if group not in ("", "resource.k8s.io"):
            return False
        pods = self._registry.catalog.lookup("", "v1", "pods")
        assert pods is not None
        return any(
            (entry.obj.get("spec") or {}).get("nodeName") == node and name in pod_references(entry.obj, resource)
            for entry in self._registry.snapshot(pods, ObjectFilter(namespace))
        )
