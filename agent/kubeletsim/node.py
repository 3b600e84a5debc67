"""The Node half of the simulated kubelet: register the Node, renew its Lease, report it Ready.

A real kubelet registers its Node (labels, capacity, addresses, nodeInfo), renews a Lease in
`kube-node-lease` every 10 s (the heartbeat the node lifecycle controller watches) and posts the
Node's status with a Ready condition. `NodeHeartbeat` does the same for a node that has no real
kubelet, and says so: the label `tessera.dev/simulated-kubelet`, the kubelet version
`…-tessera-simulated`, the Ready condition's message, and the logs.

Writes touch only what kubelet owns, so others' writes survive: capacity and allocatable are
patched key by key (cpu, memory, pods — the controller's `koordinator.sh/*` resources stay), and
conditions are merged by type (a strategic merge patch). A Node deleted behind its back is
registered again at the next step (each step reads the Node), and a Node whose Ready condition
someone else changed (the node lifecycle controller, after missed heartbeats) gets its status
reported at once, as kubelet does when the status it would post differs from the API server's;
an API server that does not answer is logged and tried again at the next step.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from agent.discovery.simulated import NodeCapacity
from agent.periodic import Periodic
from apis.extension import names
from apis.k8s.core import Taint
from apis.k8s.meta import now_rfc3339
from apis.k8s.resources import format_quantity
from kube import errors
from kube.client import Client
from kube.logs import V
from kube.resources import LEASES, NODES, STRATEGIC_MERGE_PATCH

__all__ = ["KUBELET_VERSION", "LEASE_DURATION_S", "NodeHeartbeat", "fake_ip"]

log = logging.getLogger(__name__)

KUBELET_VERSION: Final = "v1.30.0-tessera-simulated"
#: kubelet's default lease duration; the Lease is renewed well within it.
LEASE_DURATION_S: Final = 40
_READY_MESSAGE: Final = "SIMULATED kubelet is posting ready status (no containers run on this node)"
_PRESSURE_CONDITIONS: Final = (
    ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
)


def fake_ip(prefix: str, key: str) -> str:
    """A stable made-up IPv4 address in `prefix` (two octets, `10.250`), derived from `key`."""
    digest = hashlib.sha256(key.encode()).digest()
    return f"{prefix}.{digest[0]}.{1 + digest[1] % 254}"


class NodeHeartbeat:
    """Registers `node_name` and keeps it Ready; `step()` once, or `start()`/`stop()` a loop."""

    def __init__(
        self,
        client: Client,
        *,
        node_name: str,
        capacity: NodeCapacity,
        node_ip: str,
        lease_renew_s: float = 10.0,
        status_report_s: float = 60.0,
        on_registered: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        taints: Sequence[Taint] = (),
        labels: Mapping[str, str] | None = None,
    ) -> None:
        """`taints` and `labels`: what the Node is registered with (kubelet's
        --register-with-taints and --node-labels); taints only when this creates the Node, as
        kubelet does, labels also onto a Node that exists."""
        self.node_name = node_name
        self.node_ip = node_ip
        self.taints = tuple(taints)
        self.labels = dict(labels or {})
        self._nodes = client.resource(NODES)
        self._leases = client.resource(LEASES)
        self._capacity = capacity
        self._status_report_s = status_report_s
        self._on_registered = on_registered
        self._clock = clock
        self._uid = ""  # of the Node as registered; "" until then (or after it vanished)
        self._ready_since = ""
        self._next_report = 0.0
        self._failing = False
        self._loop = Periodic("simulated-kubelet-node", self.step, lease_renew_s)

    @property
    def registered(self) -> bool:
        return bool(self._uid)

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop()

    def step(self) -> None:
        """Register if needed, renew the Lease, and report status when due. Never raises APIError."""
        try:
            node = self._current()
            if self._uid and str(((node or {}).get("metadata") or {}).get("uid", "")) != self._uid:
                log.warning("Node vanished; registering it again (SIMULATED kubelet)", extra={"node": self.node_name})
                self._uid = ""
            if not self._uid:
                self._register()
                node = None  # registering reported the status
            self._renew_lease()
            marked = node is not None and not _ready(node)
            if marked:  # the node lifecycle controller marked it while this kubelet was away
                log.info("Node was marked not ready; reporting Ready again", extra={"node": self.node_name})
                self._ready_since = now_rfc3339()
            if marked or self._clock() >= self._next_report:
                self._report_status()
        except errors.APIError as e:
            level = V(4) if self._failing else logging.WARNING
            log.log(level, "Node heartbeat failed; retrying", extra={"node": self.node_name, "error": str(e)})
            self._failing = True
            return
        if self._failing:
            log.info("Node heartbeat works again", extra={"node": self.node_name})
            self._failing = False

    # --- the requests ------------------------------------------------------------------------------
    def _current(self) -> dict[str, Any] | None:
        """The Node on the server now; None when there is none (deleted behind our back)."""
        try:
            return self._nodes.get(self.node_name)
        except errors.NotFound:
            return None

    def _register(self) -> None:
        labels = {
            **self.labels,
            names.LABEL_HOSTNAME: self.node_name,
            names.LABEL_OS: "linux",
            names.LABEL_ARCH: "amd64",
            names.LABEL_SIMULATED_KUBELET: "true",
        }
        try:
            manifest: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": self.node_name}}
            manifest["metadata"]["labels"] = labels
            if self.taints:
                manifest["spec"] = {"taints": [_taint(t) for t in self.taints]}
            node = self._nodes.create(manifest)
            log.warning(
                "Registered Node with a SIMULATED kubelet: pods bound to it are marked Running, no containers run",
                extra={"node": self.node_name, "ip": self.node_ip},
            )
        except errors.AlreadyExists:
            node = self._nodes.patch(self.node_name, {"metadata": {"labels": labels}})
            log.warning("Node exists; its kubelet is now SIMULATED by this agent", extra={"node": self.node_name})
        self._uid = str(node["metadata"]["uid"])
        self._ready_since = now_rfc3339()
        self._report_status()
        if self._on_registered is not None:
            self._on_registered()

    def _renew_lease(self) -> None:
        now = _micro_time()
        try:
            self._leases.patch(self.node_name, {"spec": {"renewTime": now}}, namespace=names.NAMESPACE_NODE_LEASE)
        except errors.NotFound:
            self._leases.create(self._lease(now), namespace=names.NAMESPACE_NODE_LEASE)
            log.log(V(2), "Created node Lease", extra={"node": self.node_name})

    def _lease(self, now: str) -> dict[str, Any]:
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": self.node_name,
                "namespace": names.NAMESPACE_NODE_LEASE,
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": self.node_name, "uid": self._uid}],
            },
            "spec": {
                "holderIdentity": self.node_name,
                "leaseDurationSeconds": LEASE_DURATION_S,
                "renewTime": now,
            },
        }

    def _report_status(self) -> None:
        self._nodes.patch(
            self.node_name, self._status(now_rfc3339()), patch_type=STRATEGIC_MERGE_PATCH, subresource="status"
        )
        self._next_report = self._clock() + self._status_report_s
        log.log(V(4), "Reported node status", extra={"node": self.node_name})

    def _status(self, now: str) -> dict[str, Any]:
        capacity = {
            names.CPU: format_quantity(names.CPU, self._capacity.cpus * 1000),
            names.MEMORY: format_quantity(names.MEMORY, self._capacity.memory_bytes),
            names.PODS: format_quantity(names.PODS, self._capacity.pods),
        }
        ready = {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": _READY_MESSAGE,
            "lastHeartbeatTime": now,
            "lastTransitionTime": self._ready_since or now,
        }
        pressure = [
            {
                "type": kind,
                "status": "False",
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": now,
                "lastTransitionTime": self._ready_since or now,
            }
            for kind, reason, message in _PRESSURE_CONDITIONS
        ]
        machine = hashlib.sha256(self.node_name.encode()).hexdigest()[:32]
        return {
            "status": {
                "capacity": capacity,
                "allocatable": capacity,
                "conditions": [*pressure, ready],
                "addresses": [
                    {"type": "InternalIP", "address": self.node_ip},
                    {"type": "Hostname", "address": self.node_name},
                ],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
                "nodeInfo": {
                    "machineID": machine,
                    "systemUUID": machine,
                    "bootID": machine,
                    "kernelVersion": platform.release(),
                    "osImage": "Tessera simulated node",
                    "containerRuntimeVersion": "simulated://0",
                    "kubeletVersion": KUBELET_VERSION,
                    "kubeProxyVersion": "",
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                },
            }
        }


def _ready(node: dict[str, Any]) -> bool:
    """Whether the Node's Ready condition is True (a Node without one yet counts as ready: its
    first status report is on its way)."""
    for c in (node.get("status") or {}).get("conditions") or ():
        if isinstance(c, dict) and c.get("type") == "Ready":
            return c.get("status") == "True"
    return True


def _micro_time() -> str:
    """metav1.MicroTime, as Lease renewTime carries it (`2024-01-02T03:04:05.123456Z`)."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _taint(taint: Taint) -> dict[str, str]:
    out = {"key": taint.key, "effect": taint.effect}
    if taint.value:
        out["value"] = taint.value
    return out
