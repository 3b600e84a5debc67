"""What a Device CR written before a restart says about reset-waiting faults, and matching by UUID."""

from __future__ import annotations

import dataclasses

import pytest

from agent.devices.cr import build_device
from agent.discovery.model import GPU, Inventory
from agent.discovery.simulated import load_profile
from agent.health.restore import Restore, Source, faults_in_cr, plan
from agent.health.tracker import Health, ResetFault

NODE = "sim-restore"
SINCE = "2024-05-01T10:00:00Z"


@pytest.fixture
def inventory() -> Inventory:
    return load_profile("a100-8x").inventory(NODE)


def gpu(inventory: Inventory, minor: int) -> GPU:
    return next(g for g in inventory.gpus if g.minor == minor)


@pytest.mark.parametrize(
    ("health", "kept"),
    [
        (Health(False, "Xid79", "XID 79: GPU has fallen off the bus", SINCE), True),
        (Health(False, "Xid48", "XID 48: Double-bit ECC error", SINCE), True),
        (Health(False, "Xid32", "XID 32: push buffer", SINCE), False),
        (Health(False, "Xid999", "an unlisted XID recovers", SINCE), False),
        (Health(False, "GPULost", "NVML cannot reach the GPU", SINCE), False),
        (Health(True, "Recovered", "no device error for 300s", SINCE), False),
        (Health(True, "Cleared", "cleared by an operator (was Xid79: ...)", SINCE), False),
    ],
    ids=["xid79", "xid48", "recover-xid", "unlisted-xid", "gpu-lost", "recovered", "cleared"],
)
def test_only_unhealthy_gpus_whose_xid_needs_a_reset_are_carried_over(
    inventory: Inventory, health: Health, kept: bool
) -> None:
    broken = gpu(inventory, 3)
    cr = build_device(inventory, {broken.uuid: health}, node_name=NODE)
    expected = {broken.uuid: ResetFault(health.reason, health.message, SINCE)} if kept else {}
    assert faults_in_cr(cr) == expected


def test_rdma_devices_are_not_gpus(inventory: Inventory) -> None:
    nic = inventory.rdma[0]
    cr = build_device(inventory, {nic.bus_id: Health(False, "Xid79", "not a GPU", SINCE)}, node_name=NODE)
    assert faults_in_cr(cr) == {}


def test_faults_are_matched_by_uuid_never_by_minor(inventory: Inventory) -> None:
    fault = ResetFault("Xid79", "off the bus", SINCE)
    three = gpu(inventory, 3)
    # The GPU in slot 3 was replaced: the old UUID's fault must not land on the new GPU.
    result = plan(inventory.gpus, {three.uuid: fault, "GPU-replaced-one": fault}, Source.STATE_FILE)
    assert result.restore == (Restore(three, fault, Source.STATE_FILE),)
    assert result.dropped == (("GPU-replaced-one", fault),)
    swapped = [dataclasses.replace(g, uuid=f"GPU-new-{g.minor}") if g.minor == 3 else g for g in inventory.gpus]
    assert plan(swapped, {three.uuid: fault}, Source.DEVICE_CR).restore == ()


def test_the_plan_restores_in_minor_order(inventory: Inventory) -> None:
    fault = ResetFault("Xid48", "ecc", SINCE)
    faults = {gpu(inventory, m).uuid: fault for m in (6, 1, 4)}
    assert [r.gpu.minor for r in plan(inventory.gpus, faults, Source.DEVICE_CR).restore] == [1, 4, 6]
