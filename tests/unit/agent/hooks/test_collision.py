"""The device collision hook over real gRPC on a unix socket: which containers the node refuses, and how."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import grpc
import pytest
from prometheus_client import CollectorRegistry

from agent.hooks import DeviceCollisionPlugin, GPUEnvPlugin
from agent.hooks.gpu import ENV_VISIBLE_DEVICES
from agent.ledger import DeviceLedger, NodeSlots
from apis.extension import names
from proto.runtime.v1alpha1 import api_pb2, api_pb2_grpc
from tests.unit.agent.ledger.claims import make_node

Stub = api_pb2_grpc.RuntimeHookServiceStub
Serve = Callable[..., Stub]
MakeRequest = Callable[..., api_pb2.ContainerResourceHookRequest]
METRIC = "tessera_agent_device_collisions_total"


def gpu(minor: int, core: int, memory: str, ratio: int) -> dict[str, object]:
    resources = {names.GPU_CORE: str(core), names.GPU_MEMORY: memory, names.GPU_MEMORY_RATIO: str(ratio)}
    return {"minor": minor, "resources": resources, "id": f"GPU-{minor}"}


HALF = {"gpu": [gpu(0, 50, "40Gi", 50)]}
WHOLE = {"gpu": [gpu(0, 100, "80Gi", 100)]}


@dataclass
class Node:
    """The node's devices as the plugin sees them; tests change `slots` as a fault would."""

    slots: NodeSlots
    synced: bool = True


@dataclass
class Hooks:
    stub: Stub
    node: Node
    ledger: DeviceLedger
    registry: CollectorRegistry

    def create(self, request: api_pb2.ContainerResourceHookRequest) -> api_pb2.ContainerResourceHookResponse:
        response: api_pb2.ContainerResourceHookResponse = self.stub.PreCreateContainerHook(request, timeout=10)
        return response

    def refused(self, request: api_pb2.ContainerResourceHookRequest) -> grpc.RpcError:
        with pytest.raises(grpc.RpcError) as info:
            self.create(request)
        return info.value

    def collisions(self, reason: str = "overcommitted", device_type: str = "gpu") -> float | None:
        """The counter's value; None when the series is not exported."""
        return self.registry.get_sample_value(METRIC, {"type": device_type, "reason": reason})


@pytest.fixture
def hooks(serve: Serve) -> Hooks:
    """A hook server with the collision check before the GPU env plugin, on a node of 8 × 80Gi GPUs."""
    node = Node(make_node())
    ledger = DeviceLedger(synced=lambda: node.synced)
    registry = CollectorRegistry()
    plugin = DeviceCollisionPlugin(ledger, node=lambda: node.slots, registry=registry)
    return Hooks(serve(plugin, GPUEnvPlugin()), node, ledger, registry)


def test_the_colliding_pod_is_refused_naming_gpu_node_holder_and_shares(
    hooks: Hooks, container_request: MakeRequest, caplog: pytest.LogCaptureFixture
) -> None:
    hooks.create(container_request(HALF, name="infer-half-a", namespace="tessera-demo"))
    error = hooks.refused(container_request(WHOLE, name="x", namespace="tessera-demo"))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error.details() == (
        "device-collision: GPU 0 (GPU-0) of node sim-1 is already held by tessera-demo/infer-half-a "
        "(50% core, 40Gi): tessera-demo/x asks for 100% core, 80Gi, 50% core, 40Gi free"
    )
    assert hooks.collisions() == 1
    (record,) = [r for r in caplog.records if r.message == "Refused a container: its devices collide"]
    assert (record.levelno, record.pod, record.node, record.devices, record.holders, record.reasons) == (
        logging.WARNING,
        "tessera-demo/x",
        "sim-1",
        "gpu 0",
        "tessera-demo/infer-half-a",
        "overcommitted",
    )


def test_shares_adding_up_to_100_are_admitted_and_101_refused(hooks: Hooks, container_request: MakeRequest) -> None:
    hooks.create(container_request({"gpu": [gpu(0, 60, "48Gi", 60)]}, name="a"))
    response = hooks.create(container_request({"gpu": [gpu(0, 40, "32Gi", 40)]}, name="b"))
    assert response.container_envs[ENV_VISIBLE_DEVICES] == "0"
    hooks.refused(container_request({"gpu": [gpu(0, 1, "0", 0)]}, name="c"))
    assert hooks.collisions() == 1


def test_a_pods_second_container_and_a_recreated_one_are_admitted(hooks: Hooks, container_request: MakeRequest) -> None:
    hooks.create(container_request(WHOLE, name="a"))
    hooks.create(container_request(WHOLE, name="a", container="sidecar"))
    hooks.create(container_request(WHOLE, name="a"))  # the main container, restarted
    assert hooks.collisions() == 0


def test_a_refused_pod_never_blocks_the_pod_that_was_there_first(hooks: Hooks, container_request: MakeRequest) -> None:
    hooks.create(container_request(HALF, name="a"))
    for _ in range(3):  # kubelet retries the refused pod
        hooks.refused(container_request(WHOLE, name="x"))
    assert hooks.create(container_request(HALF, name="a")).container_envs[ENV_VISIBLE_DEVICES] == "0"


def test_post_stop_container_and_sandbox_free_the_share(hooks: Hooks, container_request: MakeRequest) -> None:
    first = container_request(WHOLE, name="a")
    hooks.create(first)
    hooks.stub.PostStopContainerHook(first, timeout=10)
    hooks.create(container_request(WHOLE, name="b"))
    hooks.refused(container_request(WHOLE, name="c"))
    hooks.stub.PostStopPodSandboxHook(api_pb2.PodSandboxHookRequest(pod_meta=first.pod_meta), timeout=10)  # not b
    hooks.refused(container_request(WHOLE, name="c"))
    sandbox_of_b = container_request(WHOLE, name="b").pod_meta
    hooks.stub.PostStopPodSandboxHook(api_pb2.PodSandboxHookRequest(pod_meta=sandbox_of_b), timeout=10)
    hooks.create(container_request(WHOLE, name="c"))


def test_an_unhealthy_gpu_takes_no_new_pod_but_keeps_the_one_it_had(
    hooks: Hooks, container_request: MakeRequest
) -> None:
    hooks.create(container_request(HALF, name="before-the-fault"))
    fault = "Xid79: GPU has fallen off the bus"
    hooks.node.slots = make_node(faults={0: fault})
    error = hooks.refused(container_request(HALF, name="new"))
    assert f"GPU 0 (GPU-0) of node sim-1 is unhealthy ({fault}): no new pod may start on it" in error.details()
    assert hooks.collisions("unhealthy") == 1
    hooks.create(container_request(HALF, name="before-the-fault"))  # its container restarts


def test_until_the_pods_are_listed_devices_are_not_admitted_blindly(
    hooks: Hooks, container_request: MakeRequest
) -> None:
    hooks.node.synced = False
    error = hooks.refused(container_request(HALF, name="a"))
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    assert error.details() == (
        "device-collision: pod default/a: the agent has not yet read which pods run on node sim-1, so it "
        "cannot check the pod's devices; retry"
    )
    assert hooks.create(container_request(name="no-devices")).ByteSize() == 0
    hooks.node.synced = True
    assert hooks.create(container_request(HALF, name="a")).container_envs[ENV_VISIBLE_DEVICES] == "0"
    assert hooks.ledger.held().keys() == {"uid-a"}


def test_a_malformed_annotation_is_bad_input_not_a_collision(hooks: Hooks, container_request: MakeRequest) -> None:
    error = hooks.refused(container_request(raw_annotation='{"gpu": 3}', name="bad"))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details().startswith("device-collision: pod default/bad: annotation ")


def test_every_reason_is_exported_from_the_start(hooks: Hooks) -> None:
    reasons = ("overcommitted", "vf_taken", "unhealthy", "unknown_device")
    assert [hooks.collisions(r, t) for t in ("gpu", "rdma") for r in reasons] == [0.0] * 8
