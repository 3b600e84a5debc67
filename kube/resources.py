"""REST access to one resource type, with objects as JSON dicts: the layer informers and typed
access build on.

`ResourceAPI` turns get/list/create/update/patch/delete/watch into the URL shapes of Kubernetes
(`/api/v1/namespaces/NS/pods/NAME/status`, `/apis/G/V/PLURAL`) and sends them through a
`kube.transport.Transport` (the `Client` that made it). It works the same for core types and
custom resources, so one code path serves pods, nodes, leases and Device CRs alike. The
GroupVersionResources of the built-in types Tessera uses are declared here (those of its CRDs in
`apis.extension.names`; `kube.catalogue` lists them all).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

import urllib3

from apis.extension import names
from apis.extension.names import GroupVersionResource
from kube import errors
from kube.patch import retry_on_conflict
from kube.transport import STREAM_ERRORS, Transport

__all__ = [
    "CLUSTER_ROLES",
    "CLUSTER_ROLE_BINDINGS",
    "CONFIG_MAPS",
    "CRON_JOBS",
    "CUSTOM_RESOURCE_DEFINITIONS",
    "DAEMON_SETS",
    "DEPLOYMENTS",
    "ENDPOINTS",
    "EVENTS",
    "JOBS",
    "JSON_PATCH",
    "LEASES",
    "MERGE_PATCH",
    "NAMESPACES",
    "NODES",
    "PODS",
    "POD_DISRUPTION_BUDGETS",
    "REPLICA_SETS",
    "ROLES",
    "ROLE_BINDINGS",
    "SECRETS",
    "SERVICES",
    "SERVICE_ACCOUNTS",
    "STATEFUL_SETS",
    "STRATEGIC_MERGE_PATCH",
    "SUBJECT_ACCESS_REVIEWS",
    "TOKEN_REVIEWS",
    "VALIDATING_WEBHOOK_CONFIGURATIONS",
    "ObjectList",
    "Patch",
    "ResourceAPI",
    "WatchEvent",
    "WatchStream",
    "object_key",
]

log = logging.getLogger(__name__)

# The built-in kinds Tessera reads or writes, declared here once (its CRDs are declared in
# `apis.extension.names`; `kube.catalogue` lists both). The last field: kube serves `NAME/status`.
NAMESPACES: Final = GroupVersionResource("", "v1", "namespaces", "Namespace", False, True)
NODES: Final = GroupVersionResource("", "v1", "nodes", "Node", False, True)
#: Declared with the protocol's names, as CONFIG_MAPS (the scheduling core's plugins name it).
PODS: Final = names.CORE_PODS
EVENTS: Final = GroupVersionResource("", "v1", "events", "Event", True)
#: Declared with the protocol's names (the scheduling core watches it and may not import kube).
CONFIG_MAPS: Final = names.CONFIG_MAPS
SECRETS: Final = GroupVersionResource("", "v1", "secrets", "Secret", True)
SERVICES: Final = GroupVersionResource("", "v1", "services", "Service", True, True)
ENDPOINTS: Final = GroupVersionResource("", "v1", "endpoints", "Endpoints", True)
SERVICE_ACCOUNTS: Final = GroupVersionResource("", "v1", "serviceaccounts", "ServiceAccount", True)
LEASES: Final = GroupVersionResource("coordination.k8s.io", "v1", "leases", "Lease", True)
POD_DISRUPTION_BUDGETS: Final = GroupVersionResource(
    "policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, True
)
CUSTOM_RESOURCE_DEFINITIONS: Final = GroupVersionResource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False, True
)
VALIDATING_WEBHOOK_CONFIGURATIONS: Final = GroupVersionResource(
    "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False
)
TOKEN_REVIEWS: Final = GroupVersionResource("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False)
SUBJECT_ACCESS_REVIEWS: Final = GroupVersionResource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False
)
_RBAC: Final = "rbac.authorization.k8s.io"
ROLES: Final = GroupVersionResource(_RBAC, "v1", "roles", "Role", True)
ROLE_BINDINGS: Final = GroupVersionResource(_RBAC, "v1", "rolebindings", "RoleBinding", True)
CLUSTER_ROLES: Final = GroupVersionResource(_RBAC, "v1", "clusterroles", "ClusterRole", False)
CLUSTER_ROLE_BINDINGS: Final = GroupVersionResource(_RBAC, "v1", "clusterrolebindings", "ClusterRoleBinding", False)
DEPLOYMENTS: Final = GroupVersionResource("apps", "v1", "deployments", "Deployment", True, True)
REPLICA_SETS: Final = GroupVersionResource("apps", "v1", "replicasets", "ReplicaSet", True, True)
STATEFUL_SETS: Final = GroupVersionResource("apps", "v1", "statefulsets", "StatefulSet", True, True)
DAEMON_SETS: Final = GroupVersionResource("apps", "v1", "daemonsets", "DaemonSet", True, True)
JOBS: Final = GroupVersionResource("batch", "v1", "jobs", "Job", True, True)
CRON_JOBS: Final = GroupVersionResource("batch", "v1", "cronjobs", "CronJob", True, True)

MERGE_PATCH: Final = "application/merge-patch+json"
JSON_PATCH: Final = "application/json-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"

Obj = dict[str, Any]
#: A patch body: an object (merge and strategic merge patches) or a list of operations (JSON patch).
Patch = dict[str, Any] | list[dict[str, Any]]


def object_key(obj: object) -> str:
    """`namespace/name` (or `name`) of a raw object; "" when it has no name."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        return ""
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if isinstance(namespace, str) and namespace else meta["name"]


@dataclass(frozen=True, slots=True)
class ObjectList:
    items: list[Obj]
    resource_version: str
    continue_token: str = ""


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """`type` is ADDED, MODIFIED, DELETED, BOOKMARK or ERROR (then `object` is a Status)."""

    type: str
    object: Obj


class WatchStream:
    """The events of one watch request, as they arrive.

    `close()` may be called from any thread: it shuts the socket down so a thread blocked reading
    wakes up and the iteration ends quietly.
    """

    def __init__(self, response: urllib3.BaseHTTPResponse) -> None:
        self._response = response
        self._lock = threading.Lock()
        self._closed = False
        self._reading = False
        self._finished = False

    def __iter__(self) -> Iterator[WatchEvent]:
        with self._lock:
            if self._closed:
                return
            self._reading = True
        buffer = b""
        try:
            for chunk in self._response.stream(amt=None, decode_content=False):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield self._decode(line)
        except STREAM_ERRORS as e:
            if not self._closed:
                raise errors.Unreachable(f"the watch stream broke: {e}") from e
        finally:
            with self._lock:
                self._reading = False
                self._closed = True
            self._finish()

    @staticmethod
    def _decode(line: bytes) -> WatchEvent:
        try:
            doc = json.loads(line)
        except ValueError as e:
            raise errors.ServerError(f"malformed watch event: {e}") from e
        if not isinstance(doc, dict) or not isinstance(doc.get("type"), str) or not isinstance(doc.get("object"), dict):
            raise errors.ServerError("malformed watch event: expected {type, object}")
        return WatchEvent(doc["type"], doc["object"])

    def close(self) -> None:
        """End the stream. Idempotent."""
        with self._lock:
            if self._closed and not self._reading:
                return
            self._closed = True
            reading = self._reading
        if reading:
            with contextlib.suppress(OSError, ValueError, RuntimeError):
                self._response.shutdown()  # the reading thread wakes up and finishes
        else:
            self._finish()

    def _finish(self) -> None:
        with self._lock:
            if self._finished:
                return
            self._finished = True
        self._response.close()
        self._response.release_conn()


class ResourceAPI:
    """Dict-level access to one resource type. Methods raise `kube.errors.APIError`."""

    def __init__(self, client: Transport, gvr: GroupVersionResource) -> None:
        self.client = client
        self.gvr = gvr

    def path(self, namespace: str = "", name: str = "", subresource: str = "") -> str:
        """The URL path; a namespaced object needs its namespace (only lists may span all)."""
        gvr = self.gvr
        if gvr.namespaced and name and not namespace:
            raise ValueError(f"{gvr.plural} {name!r}: a namespace is required")
        parts = ["/api/v1" if not gvr.group else f"/apis/{gvr.group}/{gvr.version}"]
        if gvr.namespaced and namespace:
            parts.append(f"namespaces/{quote(namespace, safe='')}")
        parts.append(gvr.plural)
        if name:
            parts.append(quote(name, safe=""))
            if subresource:
                parts.append(subresource)
        return "/".join(parts)

    def _namespace_of(self, obj: Obj, namespace: str) -> str:
        if not self.gvr.namespaced:
            return ""
        return namespace or (obj.get("metadata") or {}).get("namespace") or "default"

    @staticmethod
    def _name_of(obj: Obj) -> str:
        name = (obj.get("metadata") or {}).get("name")
        if not isinstance(name, str) or not name:
            raise ValueError("the object has no metadata.name")
        return name

    def _call(self, method: str, path: str, **options: Any) -> Obj:
        result: Obj = self.client.request(method, path, **options)
        return result

    def get(self, name: str, *, namespace: str = "") -> Obj:
        return self._call("GET", self.path(namespace, name))

    def list(
        self,
        *,
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
        limit: int = 0,
        continue_token: str = "",
        resource_version: str = "",
    ) -> ObjectList:
        """One page (all items when limit is 0); `namespace=""` lists every namespace."""
        query = [("labelSelector", label_selector), ("fieldSelector", field_selector)]
        query += [("limit", str(limit)), ("continue", continue_token), ("resourceVersion", resource_version)]
        doc = self._call("GET", self.path(namespace), query=[(k, v) for k, v in query if v and v != "0"])
        meta = doc.get("metadata") or {}
        return ObjectList(
            list(doc.get("items") or []), str(meta.get("resourceVersion", "")), meta.get("continue") or ""
        )

    def list_all(
        self, *, namespace: str = "", label_selector: str = "", field_selector: str = "", page: int = 500
    ) -> ObjectList:
        """Every matching object, fetched `page` at a time."""
        items: list[Obj] = []
        token = ""
        rv = ""
        while True:
            result = self.list(
                namespace=namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                limit=page,
                continue_token=token,
            )
            items += result.items
            rv = rv or result.resource_version
            token = result.continue_token
            if not token:
                return ObjectList(items, rv)

    def create(self, obj: Obj, *, namespace: str = "", dry_run: bool = False) -> Obj:
        query = [("dryRun", "All")] if dry_run else []
        return self._call("POST", self.path(self._namespace_of(obj, namespace)), query=query, body=obj)

    def update(self, obj: Obj, *, namespace: str = "", subresource: str = "") -> Obj:
        """PUT the whole object; its metadata.resourceVersion makes it conditional (409 if stale)."""
        path = self.path(self._namespace_of(obj, namespace), self._name_of(obj), subresource)
        return self._call("PUT", path, body=obj)

    def update_status(self, obj: Obj, *, namespace: str = "") -> Obj:
        return self.update(obj, namespace=namespace, subresource="status")

    def patch(
        self, name: str, patch: Patch, *, namespace: str = "", patch_type: str = MERGE_PATCH, subresource: str = ""
    ) -> Obj:
        return self._call("PATCH", self.path(namespace, name, subresource), body=patch, content_type=patch_type)

    def delete(
        self,
        name: str,
        *,
        namespace: str = "",
        uid: str = "",
        resource_version: str = "",
        dry_run: bool = False,
        grace_period_seconds: int | None = None,
        propagation_policy: str = "",
    ) -> Obj:
        """Delete (preconditions: uid/resourceVersion). Returns the object's last state.

        `grace_period_seconds=0` removes a pod at once, as kubelet does once its containers are gone.
        `propagation_policy` (Foreground / Background / Orphan; "" for the type's default) is what
        the garbage collector does with the object's dependents.
        """
        options: Obj = {"kind": "DeleteOptions", "apiVersion": "v1"}
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
        if preconditions:
            options["preconditions"] = preconditions
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if dry_run:
            options["dryRun"] = ["All"]
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        return self._call("DELETE", self.path(namespace, name), body=options)

    def post(self, name: str, subresource: str, body: Obj, *, namespace: str = "") -> Obj:
        """POST to a subresource (`pods/NAME/binding`, `pods/NAME/eviction`)."""
        return self._call("POST", self.path(namespace, name, subresource), body=body)

    def watch(
        self,
        *,
        namespace: str = "",
        resource_version: str = "",
        label_selector: str = "",
        field_selector: str = "",
        timeout_seconds: int = 300,
        allow_bookmarks: bool = True,
    ) -> WatchStream:
        """Start a watch; iterate the stream for events. The read timeout allows for quiet periods."""
        query = [("watch", "true"), ("timeoutSeconds", str(timeout_seconds))]
        if allow_bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        for key, value in (
            ("resourceVersion", resource_version),
            ("labelSelector", label_selector),
            ("fieldSelector", field_selector),
        ):
            if value:
                query.append((key, value))
        response = self.client.open(
            "GET", self.path(namespace), query=query, timeout=(self.client.timeout, timeout_seconds + 30.0)
        )
        return WatchStream(response)

    def update_with_retry(
        self,
        name: str,
        mutate: Callable[[Obj], Obj | None],
        *,
        namespace: str = "",
        subresource: str = "",
        attempts: int = 5,
    ) -> Obj:
        """Read, change and write back, re-reading on 409 Conflict.

        `mutate` gets a fresh copy and returns the object to write (or None for no change, which
        writes nothing). Raises the last Conflict after `attempts` tries.
        """

        def attempt() -> Obj:
            current = self.get(name, namespace=namespace)
            changed = mutate(json.loads(json.dumps(current)))
            if changed is None or changed == current:
                return current
            return self.update(changed, namespace=namespace, subresource=subresource)

        return retry_on_conflict(attempt, attempts=attempts)
