"""RDMA devices hook: give a container the RDMA device nodes of the NICs allocated to its pod.

PreCreateContainer reads the pod's `device-allocated` annotation and, when it holds RDMA
devices, adds `/dev/infiniband/rdma_cm` plus the `uverbsN` node of each allocated function: the
virtual functions when the allocation lists VFs, else the physical function itself. A function's
`uverbsN` is found in sysfs under `<sysfs>/bus/pci/devices/<bdf>/infiniband_verbs/`.

The devices travel in `ContainerResourceHookResponse.container_devices` (field 100, a Tessera
extension that Koordinator's proxy skips); Tessera's runtime proxy appends them to the CRI
container config. `sysfs_root` and `dev_root` are parameters so tests and simulated nodes can
point them at fixture trees.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

from agent.hooks import _requests
from agent.hooks.plugin import HookError, HookPlugin
from apis.crds.device import DeviceType
from apis.extension import names
from apis.extension.allocation import DeviceAllocation
from proto.runtime.v1alpha1 import api_pb2

__all__ = ["CONTAINER_DIR", "RDMA_CM", "RDMADevicesPlugin"]

#: Where the nodes appear inside the container (and, under `dev_root`, on the host).
CONTAINER_DIR: Final = "/dev/infiniband"
RDMA_CM: Final = "rdma_cm"
_PERMISSIONS: Final = "rw"
_BDF: Final = re.compile(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")


class RDMADevicesPlugin(HookPlugin):
    """Adds RDMA device nodes (rdma_cm, uverbsN) to containers of pods with RDMA allocations."""

    name = "rdma-devices"

    def __init__(self, *, sysfs_root: Path = Path("/sys"), dev_root: Path = Path("/dev")) -> None:
        self._pci_devices = sysfs_root / "bus" / "pci" / "devices"
        self._host_dir = dev_root / "infiniband"

    def pre_create_container(
        self, request: api_pb2.ContainerResourceHookRequest, response: api_pb2.ContainerResourceHookResponse
    ) -> None:
        nics = _requests.device_allocations(request).get(DeviceType.RDMA, ())
        if not nics:
            return
        pod = _requests.pod_ref(request.pod_meta)
        nodes = [RDMA_CM]
        for index, nic in enumerate(nics):
            for bdf in _functions(nic, where=f"pod {pod}: rdma[{index}]"):
                nodes.extend(self._uverbs(bdf, pod=pod))
        present = {device.container_path for device in response.container_devices}
        for node in nodes:
            container_path = f"{CONTAINER_DIR}/{node}"
            if container_path in present:
                continue
            host_path = self._host_dir / node
            if not host_path.exists():
                raise HookError(f"pod {pod}: RDMA device node {host_path} does not exist on this node")
            response.container_devices.add(
                container_path=container_path, host_path=str(host_path), permissions=_PERMISSIONS
            )
            present.add(container_path)

    def _uverbs(self, bdf: str, *, pod: str) -> list[str]:
        verbs_dir = self._pci_devices / bdf / "infiniband_verbs"
        try:
            found = sorted(entry.name for entry in verbs_dir.iterdir() if entry.name.startswith("uverbs"))
        except OSError:
            found = []
        if not found:
            raise HookError(f"pod {pod}: RDMA function {bdf} has no uverbs device under {verbs_dir}")
        return found


def _functions(nic: DeviceAllocation, *, where: str) -> list[str]:
    """PCI addresses whose verbs devices the container gets: the VFs if any, else the PF."""
    addresses = [vf.bus_id for vf in nic.vfs] if nic.vfs else [nic.id]
    for address in addresses:
        if not _BDF.fullmatch(address):
            raise HookError(
                f"{where}: annotation {names.ANNOTATION_DEVICE_ALLOCATED}: expected a PCI address "
                f"such as 0000:3b:00.0, got {address!r}"
            )
    return addresses
