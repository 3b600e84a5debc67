"""The descheduler tests' objects, written through the API: pods of a ReplicaSet, PodMigrationJobs
and their status, Reservations, and `StandIn`, which plays the scheduler's and kubelet's part
where a test needs a handle on timing (conftest.py says when).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from apis.extension import names
from kube.client import Client
from kube.errors import APIError, NotFound
from kube.resources import PODS

#: Generous: a loaded 2-core machine runs other test suites at the same time.
TIMEOUT = 60.0
RS = names.GroupVersionResource("apps", "v1", "replicasets", "ReplicaSet", True)


def owner_replicaset(client: Client, namespace: str, name: str) -> dict[str, Any]:
    """A ReplicaSet object (no controller runs it here): pods' controller reference."""
    rs = client.resource(RS).create(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "c", "image": "x"}]},
                },
            },
        },
        namespace=namespace,
    )
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": name,
        "uid": rs["metadata"]["uid"],
        "controller": True,
    }


def create_running_pod(
    client: Client,
    namespace: str,
    name: str,
    *,
    node: str,
    owner: dict[str, Any] | None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A pod bound to `node`, Running and Ready (as kubelet would report it)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {}}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    pods = client.resource(PODS)
    pods.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {
                "nodeName": node,
                "schedulerName": names.SCHEDULER_NAME,
                "containers": [
                    {
                        "name": "c",
                        "image": "x",
                        "resources": {"requests": {names.NVIDIA_GPU: "1"}, "limits": {names.NVIDIA_GPU: "1"}},
                    }
                ],
            },
        },
        namespace=namespace,
    )
    return mark_ready(client, namespace, name)


def mark_ready(client: Client, namespace: str, name: str) -> dict[str, Any]:
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return client.resource(PODS).patch(name, {"status": status}, namespace=namespace, subresource="status")


def create_job(
    client: Client, name: str, namespace: str, pod: str, *, mode: str = "ReservationFirst", ttl: str = ""
) -> dict[str, Any]:
    spec: dict[str, Any] = {"podRef": {"namespace": namespace, "name": pod}, "mode": mode}
    if ttl:
        spec["ttl"] = ttl
    return client.resource(names.POD_MIGRATION_JOBS).create(
        {
            "apiVersion": names.POD_MIGRATION_JOBS.api_version,
            "kind": "PodMigrationJob",
            "metadata": {"name": name},
            "spec": spec,
        }
    )


def job(client: Client, name: str) -> dict[str, Any]:
    return client.resource(names.POD_MIGRATION_JOBS).get(name)


def job_status(client: Client, name: str) -> dict[str, Any]:
    return job(client, name).get("status") or {}


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status.get("conditions") or ()}


def pod_exists(client: Client, namespace: str, name: str) -> bool:
    try:
        pod = client.resource(PODS).get(name, namespace=namespace)
    except NotFound:
        return False
    return not pod["metadata"].get("deletionTimestamp")


def reservation(client: Client, name: str) -> dict[str, Any] | None:
    try:
        return client.resource(names.RESERVATIONS).get(name)
    except NotFound:
        return None


def make_available(client: Client, name: str, node: str) -> dict[str, Any]:
    """What the scheduler writes once it placed a Reservation; the Reservation as written."""
    status = {
        "phase": "Available",
        "nodeName": node,
        "conditions": [
            {"type": "Scheduled", "status": "True", "reason": "Scheduled"},
            {"type": "Ready", "status": "True", "reason": "Available"},
        ],
    }
    return client.resource(names.RESERVATIONS).patch(name, {"status": status}, subresource="status")


def _allocated(rsv: dict[str, Any]) -> str:
    """The annotation the scheduler writes on a pod it placed onto `rsv`."""
    return json.dumps({"name": rsv["metadata"]["name"], "uid": rsv["metadata"]["uid"]})


def place_replacement(client: Client, rsv: dict[str, Any], name: str, *, owner: dict[str, Any] | None = None) -> None:
    """A replacement pod bound onto `rsv` (as the owner recreates it and the scheduler places it)."""
    template = rsv["spec"]["template"]
    namespace = template["metadata"]["namespace"]
    allocated = {names.ANNOTATION_RESERVATION_ALLOCATED: _allocated(rsv)}
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "annotations": allocated}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    spec = {**template["spec"], "nodeName": rsv["status"]["nodeName"]}
    client.resource(PODS).create(
        {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}, namespace=namespace
    )
    mark_ready(client, namespace, name)


class StandIn:
    """The scheduler's and kubelet's part, in a thread: Pending Reservations of `namespace` become
    Available on `node`; its unbound pods get bound — onto an Available Reservation whose owner
    is their controller when there is one (annotated, and the Reservation Succeeded, as the
    scheduler does), else onto `node` — and reported Ready `ready_delay` seconds later."""

    def __init__(self, client: Client, namespace: str, *, node: str = "n-target", ready_delay: float = 0.0) -> None:
        self.client = client
        self.namespace = namespace
        self.node = node
        self.ready_delay = ready_delay
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._bound: dict[str, float] = {}

    def __enter__(self) -> StandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            try:
                self._step()
            except APIError:
                continue

    def _step(self) -> None:
        available = []
        for rsv in self.client.resource(names.RESERVATIONS).list().items:
            if rsv["spec"]["template"]["metadata"].get("namespace") != self.namespace:
                continue
            phase = (rsv.get("status") or {}).get("phase", "Pending")
            if phase == "Pending":  # and Available from now on: its pod may be evicted at once
                available.append(make_available(self.client, rsv["metadata"]["name"], self.node))
            elif phase == "Available":
                available.append(rsv)
        now = time.monotonic()
        for pod in self.client.resource(PODS).list(namespace=self.namespace).items:
            name = pod["metadata"]["name"]
            if pod["metadata"].get("deletionTimestamp"):
                continue
            if not pod["spec"].get("nodeName"):
                self._bind(pod, available)
                self._bound[name] = now
            elif name in self._bound and now - self._bound[name] >= self.ready_delay:
                mark_ready(self.client, self.namespace, name)
                del self._bound[name]

    def _bind(self, pod: dict[str, Any], available: list[dict[str, Any]]) -> None:
        refs = {r.get("uid") for r in pod["metadata"].get("ownerReferences") or ()}
        mine = next((r for r in available if r["spec"]["owners"][0]["controller"]["uid"] in refs), None)
        name, namespace = pod["metadata"]["name"], self.namespace
        node = mine["status"]["nodeName"] if mine is not None else "n-old"
        if mine is not None:
            patch = {"metadata": {"annotations": {names.ANNOTATION_RESERVATION_ALLOCATED: _allocated(mine)}}}
            self.client.resource(PODS).patch(name, patch, namespace=namespace)
            owner = {"namespace": namespace, "name": name, "uid": pod["metadata"]["uid"]}
            rsv_patch = {"status": {"phase": "Succeeded", "currentOwners": [owner]}}
            self.client.resource(names.RESERVATIONS).patch(mine["metadata"]["name"], rsv_patch, subresource="status")
            available.remove(mine)
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"kind": "Node", "name": node},
        }
        self.client.resource(PODS).post(name, "binding", binding, namespace=namespace)
