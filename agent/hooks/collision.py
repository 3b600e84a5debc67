"""Device collision hook: refuse a container whose devices other pods on this node already hold.

PreCreateContainer reads the pod's `device-allocated` annotation and asks the node's device
ledger (`agent.ledger`) whether the pod may have those devices beside what the pods running here
hold. When it may not — the shares on a GPU would add up past 100 % or past its memory, an RDMA
VF is taken, a GPU is unhealthy and the pod did not hold it before the fault, a minor the node
does not have — the hook fails with `HookRefused` (FAILED_PRECONDITION), whose message names each
device (minor and UUID), the node, the pods that hold it and what the new pod asks for:

    GPU 0 (GPU-…) of node sim-1 is already held by tessera-demo/infer-half-a (50% core, 40Gi):
    tessera-demo/x asks for 100% core, 80Gi, 50% core, 40Gi free

Under the runtime proxy's `Fail` policy that fails kubelet's CreateContainer with the message, so
the pod shows it (CreateContainerError) and kubelet retries with back-off. The refusal is also
logged, counted (`tessera_agent_device_collisions_total{type,reason}`) and, when an
EventRecorder is given, recorded as a Warning event `DeviceCollision` on the pod.

PostStopContainer and PostStopPodSandbox tell the ledger that the pod's containers stopped. Until
the agent's pod informer has listed the node's pods the ledger does not know what runs here, and
the hook answers UNAVAILABLE ("retry") for pods with devices instead of admitting them blindly.
Pods without GPU or RDMA allocations are never looked at. Must run before the plugins that inject
devices, so a refused container is refused for this reason first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter

from agent.hooks import _requests
from agent.hooks.plugin import HookNotReady, HookPlugin, HookRefused
from agent.ledger import Claim, Collision, CollisionKind, DeviceLedger, NodeSlots, counted, pod_key
from apis.crds.device import DeviceType
from proto.runtime.v1alpha1 import api_pb2

if TYPE_CHECKING:  # kube.events loads the kubernetes client library: only an agent with a recorder pays for it
    from kube.events import EventRecorder

__all__ = ["EVENT_REASON", "DeviceCollisionPlugin"]

log = logging.getLogger(__name__)

EVENT_REASON = "DeviceCollision"


class DeviceCollisionPlugin(HookPlugin):
    """Refuses containers whose devices collide with what this node's running pods hold."""

    name = "device-collision"

    def __init__(
        self,
        ledger: DeviceLedger,
        *,
        node: Callable[[], NodeSlots],
        registry: CollectorRegistry | None = None,
        events: EventRecorder | None = None,
    ) -> None:
        """`node` gives the node's devices and health now (called once per create of a pod with
        devices; must be quick). Metrics go to `registry` (a private one when None)."""
        self._ledger = ledger
        self._node = node
        self._events = events
        self._collisions = Counter(
            "tessera_agent_device_collisions",
            "Containers refused because their devices collide with what pods on the node hold, "
            "by device type and reason (overcommitted, vf_taken, unhealthy, unknown_device).",
            ["type", "reason"],
            registry=registry if registry is not None else CollectorRegistry(),
        )
        for dtype in (DeviceType.GPU, DeviceType.RDMA):
            for kind in CollisionKind:
                self._collisions.labels(dtype.value, kind.value)  # exported as 0 from the start

    def pre_create_container(
        self, request: api_pb2.ContainerResourceHookRequest, response: api_pb2.ContainerResourceHookResponse
    ) -> None:
        devices = counted(_requests.device_allocations(request))
        if not devices:
            return
        meta = request.pod_meta
        pod = _requests.pod_ref(meta)
        node = self._node()
        if not self._ledger.ready:
            raise HookNotReady(
                f"pod {pod}: the agent has not yet read which pods run on node {node.node}, so it cannot "
                "check the pod's devices; retry"
            )
        claim = Claim(pod_key(meta.uid, meta.namespace, meta.name), pod, devices)
        found = self._ledger.admit(claim, container=request.container_meta.name, node=node)
        if found:
            message = "; ".join(c.message for c in found)
            self._report(meta, request.container_meta.name, node.node, found, message)
            raise HookRefused(message)

    def post_stop_container(
        self, request: api_pb2.ContainerResourceHookRequest, response: api_pb2.ContainerResourceHookResponse
    ) -> None:
        meta = request.pod_meta
        self._ledger.container_stopped(pod_key(meta.uid, meta.namespace, meta.name), request.container_meta.name)

    def post_stop_pod_sandbox(
        self, request: api_pb2.PodSandboxHookRequest, response: api_pb2.PodSandboxHookResponse
    ) -> None:
        meta = request.pod_meta
        self._ledger.sandbox_stopped(pod_key(meta.uid, meta.namespace, meta.name))

    def _report(
        self,
        meta: api_pb2.PodSandboxMetadata,
        container: str,
        node: str,
        found: Sequence[Collision],
        message: str,
    ) -> None:
        for collision in found:
            self._collisions.labels(collision.type.value, collision.kind.value).inc()
        holders = sorted({pod for c in found for pod in c.holders})
        log.warning(
            "Refused a container: its devices collide",
            extra={
                "pod": _requests.pod_ref(meta),
                "container": container,
                "node": node,
                "devices": ",".join(f"{c.type.value} {c.minor}" for c in found),
                "reasons": ",".join(sorted({c.kind.value for c in found})),
                "holders": ",".join(holders),
                "err": message,
            },
        )
        if self._events is not None:
            from kube.events import ObjectReference  # already loaded: the recorder comes from it

            ref = ObjectReference("Pod", meta.name, meta.namespace, meta.uid, "v1")
            self._events.warning(ref, EVENT_REASON, message)
