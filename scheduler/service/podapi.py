"""The scheduler's writes to pods: annotate, bind, read back, report unschedulable.

A binding writes the pod once: the Binding carries the annotations PreBind asked for, which the
API server sets together with `spec.nodeName` (kube-apiserver's Binding does the same), so no
pod is ever seen with its records of holdings but no node, or the other way round — and the API
server handles one request and sends each watcher one event per bound pod, not two.

One seam (`PodAPI`) between the scheduling service and the API server, so the binder and the
failure reporter say *what* they write and `KubePodAPI` says *how* (paths, patch types,
preconditions). Every write names the pod's UID, so a pod deleted and re-created under the same
name is never annotated or bound by mistake (409 Conflict instead). Tests wrap a `KubePodAPI` to
inject faults such as a binding whose response is lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from apis.k8s.core import CONDITION_POD_SCHEDULED, Pod
from apis.k8s.meta import now_rfc3339
from kube import Client, errors, resources

__all__ = ["KubePodAPI", "PodAPI"]


class PodAPI(Protocol):
    def annotate(self, pod: Pod, changes: Mapping[str, str | None], *, resource_version: str = "") -> None:
        """Set (or, for None, remove) annotations. With `resource_version`, only if the pod is still
        at that version (else kube.Conflict). Raises kube.APIError."""

    def bind(self, pod: Pod, node: str, annotations: Mapping[str, str] | None = None) -> None:
        """Post the Binding, which sets `annotations` on the pod in the same write (kube-apiserver
        copies a Binding's annotations onto its pod). Raises kube.Conflict when the pod is already
        bound (or was replaced)."""

    def get(self, namespace: str, name: str) -> Pod | None:
        """The pod as the API server has it now; None when it does not exist."""

    def set_condition(self, pod: Pod, *, status: str, reason: str, message: str) -> None:
        """Write the pod's PodScheduled condition (the status subresource)."""

    def nominate(self, pod: Pod, node: str) -> None:
        """Write `status.nominatedNodeName` (where preemption makes room for the pod)."""

    def delete(self, pod: Pod) -> None:
        """Delete the pod, this UID only (a preemption victim: kube-scheduler deletes, it does
        not go through the Eviction API, having weighed disruption budgets itself). Raises
        kube.NotFound when it is gone already."""


class KubePodAPI:
    """`PodAPI` over `kube` (merge patches carry the UID as a precondition)."""

    def __init__(self, client: Client) -> None:
        self._pods = client.resource(resources.PODS)

    def annotate(self, pod: Pod, changes: Mapping[str, str | None], *, resource_version: str = "") -> None:
        meta: dict[str, object] = {"uid": pod.uid, "annotations": dict(changes)}
        if resource_version:
            meta["resourceVersion"] = resource_version
        self._pods.patch(pod.name, {"metadata": meta}, namespace=pod.namespace)

    def bind(self, pod: Pod, node: str, annotations: Mapping[str, str] | None = None) -> None:
        meta: dict[str, object] = {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid}
        if annotations:
            meta["annotations"] = dict(annotations)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        self._pods.post(pod.name, "binding", body, namespace=pod.namespace)

    def get(self, namespace: str, name: str) -> Pod | None:
        try:
            return Pod.from_dict(self._pods.get(name, namespace=namespace))
        except errors.NotFound:
            return None

    def set_condition(self, pod: Pod, *, status: str, reason: str, message: str) -> None:
        condition = {
            "type": CONDITION_POD_SCHEDULED,
            "status": status,
            "reason": reason,
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": now_rfc3339(),
        }
        self._pods.patch(
            pod.name,
            {"metadata": {"uid": pod.uid}, "status": {"conditions": [condition]}},
            namespace=pod.namespace,
            patch_type=resources.STRATEGIC_MERGE_PATCH,
            subresource="status",
        )

    def nominate(self, pod: Pod, node: str) -> None:
        self._pods.patch(
            pod.name,
            {"metadata": {"uid": pod.uid}, "status": {"nominatedNodeName": node}},
            namespace=pod.namespace,
            subresource="status",
        )

    def delete(self, pod: Pod) -> None:
        self._pods.delete(pod.name, namespace=pod.namespace, uid=pod.uid)
