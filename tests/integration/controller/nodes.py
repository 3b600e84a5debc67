"""The controller tests' helpers: Nodes as kubelet reports them, Device CRs as the agent builds
them, what the controller wrote on them, and its own /metrics read to wait for conditions ("the
controller processed every key it was given") instead of sleeping.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from agent.devices.cr import build_device
from agent.discovery.simulated import load_profile
from agent.health.tracker import Health
from apis.crds.device import Device
from cli.launchers.controller import ControllerProcess
from kube import crds
from kube.client import Client
from kube.errors import NotFound
from kube.resources import EVENTS, NODES
from tests.support.waiting import wait_for

#: Generous: a loaded 2-core machine runs other test suites at the same time.
TIMEOUT = 60.0


KUBELET_RESOURCES = {"cpu": "64", "memory": "512Gi", "pods": "110", "ephemeral-storage": "1Ti"}


def idle(process: ControllerProcess) -> bool:
    """Every key ever queued has been reconciled (each add leads to exactly one reconcile)."""
    samples = process.metrics()

    def total(name: str) -> float:
        return sum(v for (n, _), v in samples.items() if n == name)

    return total("tessera_controller_reconcile_total") == total("tessera_controller_workqueue_adds_total")


def adds(process: ControllerProcess) -> float:
    return process.metric("tessera_controller_workqueue_adds_total")


def writes(process: ControllerProcess) -> float:
    return process.metric("tessera_controller_node_writes_total")


def wait_processed(process: ControllerProcess, adds_before: float) -> None:
    """Wait until something was queued after `adds_before` was read and all of it is done."""
    wait_for(lambda: adds(process) > adds_before and idle(process), what="the controller to process the change")


# --- objects as kubelet and the agent write them ------------------------------------------------------
def create_node(client: Client, name: str) -> dict[str, Any]:
    status = {
        "capacity": dict(KUBELET_RESOURCES),
        "allocatable": dict(KUBELET_RESOURCES),
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
    }
    return client.resource(NODES).create(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": status}
    )


def build(
    node: str, profile: str = "a100-8x", *, unhealthy: tuple[int, ...] = (), unhealthy_rdma: tuple[int, ...] = ()
) -> Device:
    """The Device CR the agent writes for `node` with the simulated `profile`, GPUs/NICs by minor unhealthy."""
    inventory = load_profile(profile).inventory(node)
    health = {
        g.uuid: Health(False, "Xid79", "GPU has fallen off the bus") for g in inventory.gpus if g.minor in unhealthy
    }
    health |= {
        r.bus_id: Health(False, "PortNotActive", "port 1 is DOWN") for r in inventory.rdma if r.minor in unhealthy_rdma
    }
    return build_device(inventory, health, node_name=node)


def put_device(client: Client, device: Device) -> Device:
    """Create the Device or replace what is there (as the agent's reporter does)."""
    api = crds.devices(client)
    try:
        current = api.api.get(device.node_name)  # as JSON: what is there may not parse
    except NotFound:
        return api.create(device)
    version = current["metadata"]["resourceVersion"]
    return api.update(replace(device, meta=replace(device.meta, resource_version=version)))


def node_resources(client: Client, name: str, field: str = "allocatable") -> dict[str, str]:
    node = client.resource(NODES).get(name)
    return dict((node.get("status") or {}).get(field) or {})


def node_labels(client: Client, name: str) -> dict[str, str]:
    return dict(client.resource(NODES).get(name)["metadata"].get("labels") or {})


def events_about(client: Client, name: str, kind: str) -> list[dict[str, Any]]:
    items = client.resource(EVENTS).list(namespace="default", field_selector=f"involvedObject.name={name}").items
    return [e for e in items if e["involvedObject"]["kind"] == kind]


def managed(resources: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in resources.items() if k.startswith("koordinator.sh/")}
