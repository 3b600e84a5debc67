"""Build the node's `Device` CR from what discovery found and what the health tracker says.

Pure and deterministic: the same inventory and health give an equal `Device` (and the same
`to_dict()`), so the reporter compares the built object with what the API server holds and skips
no-op writes. What goes in, per protocol.md:
- name = node name; owner reference to the Node (controller, blockOwnerDeletion, as koordlet
  writes it) when the node's uid is known;
- labels: GPU vendor, model (NVML name without `NVIDIA `, spaces as `-`; left out when the GPUs'
  models differ) and driver version; `koordinator.sh/gpu-isolation-provider` when the node has a
  GPU isolation layer installed (HAMi-core); `tessera.dev/simulated: "true"` for simulated devices;
- one entry per GPU (`id` = UUID) and per RDMA PF (`id` = PCI address), sorted by type then
  minor, with topology, VFs as one VF group, and `health`. A healthy GPU carries `gpu-core: 100`,
  `gpu-memory: <total>`, `gpu-memory-ratio: 100`, an RDMA PF `rdma: 100`; an unhealthy device
  carries no resources (nothing of it is allocatable) and a `Healthy=False` condition. A device
  that recovered keeps a `Healthy=True` condition saying so; one never unhealthy has none;
- NVLink: each GPU's NVLink peers among the GPUs reported (`Device.nvlink`, written as the
  `tessera.dev/gpu-nvlink-peers` annotation), whatever their health — a link is a fact of the
  board, and an unhealthy GPU has nothing allocatable anyway;
- GPU partitions (agent/devices/partitions.py): the `scheduling.koordinator.sh/gpu-partitions`
  annotation, for known Hopper models or from NVLink, with the
  `node.koordinator.sh/gpu-partition-policy` label (`partition_policy`); neither without a table.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from agent.devices.partitions import table_for
from agent.discovery.model import GPU, Inventory, RDMADevice
from agent.health.tracker import Health
from apis.crds.device import Device, DeviceInfo, DeviceType, VirtualFunctionGroup
from apis.extension import names, partitions
from apis.extension.partitions import PartitionPolicy
from apis.k8s.meta import Condition, ObjectMeta, OwnerReference

__all__ = ["build_device", "nvlink_peers"]

log = logging.getLogger(__name__)

_HEALTHY = Health()


def build_device(
    inventory: Inventory,
    health: Mapping[str, Health],
    *,
    node_name: str,
    node_uid: str = "",
    partition_policy: PartitionPolicy = PartitionPolicy.PREFER,
) -> Device:
    """The Device CR for `node_name`. `health` maps a device's `id` to its Health (missing means
    healthy). Without `node_uid` the owner reference is left out (the Node is not known yet).
    `partition_policy` labels a Device that has a GPU partition table."""
    owners = (
        (
            OwnerReference(
                api_version="v1",
                kind="Node",
                name=node_name,
                uid=node_uid,
                controller=True,
                block_owner_deletion=True,
            ),
        )
        if node_uid
        else ()
    )
    devices = [_gpu(g, health.get(g.uuid, _HEALTHY)) for g in inventory.gpus]
    devices += [_rdma(r, health.get(r.bus_id, _HEALTHY)) for r in inventory.rdma]
    labels = _labels(inventory, node_name)
    annotations: dict[str, str] = {}
    table = table_for(inventory.gpus) if inventory.gpus else None
    if table is not None:
        labels[names.LABEL_GPU_PARTITION_POLICY] = partition_policy.value
        annotations[names.ANNOTATION_GPU_PARTITIONS] = partitions.encode_table(table)
    return Device(
        meta=ObjectMeta(name=node_name, labels=labels, annotations=annotations, owner_references=owners),
        devices=tuple(sorted(devices, key=lambda d: d.sort_key)),
        nvlink=nvlink_peers(inventory),
        gpu_partitions=table,
    )


def nvlink_peers(inventory: Inventory) -> dict[int, frozenset[int]]:
    """GPU minor -> its NVLink peers, kept to GPUs in the inventory and made symmetric (a link
    either end reports joins both), so the CR always passes `Device.from_dict`'s rules."""
    minors = {g.minor for g in inventory.gpus}
    links: dict[int, set[int]] = {}
    for g in inventory.gpus:
        for peer in g.nvlink_peers:
            if peer != g.minor and peer in minors:
                links.setdefault(g.minor, set()).add(peer)
                links.setdefault(peer, set()).add(g.minor)
    return {minor: frozenset(peers) for minor, peers in sorted(links.items())}


def _labels(inventory: Inventory, node_name: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    if inventory.gpus:
        labels[names.LABEL_GPU_VENDOR] = inventory.gpus[0].vendor
        models = sorted({g.model for g in inventory.gpus})
        if len(models) == 1:
            labels[names.LABEL_GPU_MODEL] = models[0]
        else:
            log.warning(
                "GPUs of different models: no model label", extra={"node": node_name, "models": ",".join(models)}
            )
        if inventory.gpu_driver_version:
            labels[names.LABEL_GPU_DRIVER_VERSION] = inventory.gpu_driver_version
        if inventory.isolation_provider:
            labels[names.LABEL_GPU_ISOLATION_PROVIDER] = inventory.isolation_provider
    if inventory.simulated:
        labels[names.LABEL_SIMULATED] = "true"
    return labels


def _gpu(gpu: GPU, health: Health) -> DeviceInfo:
    resources = (
        {names.GPU_CORE: 100, names.GPU_MEMORY: gpu.memory_bytes, names.GPU_MEMORY_RATIO: 100} if health.healthy else {}
    )
    return DeviceInfo(
        type=DeviceType.GPU,
        minor=gpu.minor,
        id=gpu.uuid,
        module_id=gpu.module_id,
        health=health.healthy,
        resources=resources,
        topology=gpu.topology,
        conditions=_conditions(health),
    )


def _rdma(device: RDMADevice, health: Health) -> DeviceInfo:
    return DeviceInfo(
        type=DeviceType.RDMA,
        minor=device.minor,
        id=device.bus_id,
        health=health.healthy,
        resources={names.RDMA: 100} if health.healthy else {},
        topology=device.topology,
        vf_groups=(VirtualFunctionGroup(vfs=device.vfs),) if device.vfs else (),
        conditions=_conditions(health),
    )


def _conditions(health: Health) -> tuple[Condition, ...]:
    if not health.reason:
        return ()
    return (
        Condition(
            type=names.CONDITION_HEALTHY,
            status="True" if health.healthy else "False",
            reason=health.reason,
            message=health.message,
            last_transition_time=health.since,
        ),
    )
