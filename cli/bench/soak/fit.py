"""Would a pending pod fit now? A small model of the free devices, for the "no pod that fits stays
pending" invariant.

Free is each healthy GPU's capacity (its Device CR's resources) less what the pods' annotations
hold (and what Available Reservations hold), and each healthy NIC's virtual functions less those
held, on nodes that are Ready, schedulable and without the node lifecycle controller's taints. A
pod fits when one node has `count` GPUs each with its per-GPU request free (for `device-joint-allocate`, GPUs on a PCIe
switch with a free VF) and enough free VFs. Placing a pod takes what it fits into, so two pending
pods never both "fit" into the last GPU; a gang fits only when every pending member does,
together. CPU and memory are not modelled: the soak's pods ask for little of either. The model
errs towards "does not fit", so it can miss a stuck pod but not accuse a pod that could not be
placed.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Iterable, Mapping

from apis.crds.device import DeviceInfo, DeviceType
from apis.errors import TesseraError
from apis.extension import names
from apis.extension.devicerequest import pod_device_requests
from apis.k8s.core import Pod
from cli.bench.soak.holdings import holding_reservations, holdings, reservation_holdings
from cli.bench.soak.state import LIFECYCLE_TAINTS, ClusterState

__all__ = ["FreeDevices"]


class FreeDevices:
    """What is free on each node now; `place` takes from it."""

    def __init__(self, state: ClusterState) -> None:
        held, _ = holdings(state.pods)
        # Reserved devices are not free (to a pod that is no owner): any Reservation holding in
        # either listing counts, so the model errs towards "does not fit".
        held += reservation_holdings(
            holding_reservations(state.reservations, state.pods, also=state.reservations_before)
        )
        used: dict[tuple[str, DeviceType, int], dict[str, int]] = defaultdict(lambda: defaultdict(int))
        taken_vfs: set[tuple[str, int, int]] = set()
        for h in held:
            for name, amount in h.resources.items():
                used[(h.node, h.type, h.minor)][name] += amount
            taken_vfs.update((h.node, h.minor, vf) for vf in h.vfs)
        usable = {
            n.name
            for n in state.nodes
            if n.ready and not n.unschedulable and not any(t.key in LIFECYCLE_TAINTS for t in n.taints)
        }
        #: node → GPU minor → (its PCIe switch, free resources)
        self._gpus: dict[str, dict[int, tuple[str, dict[str, int]]]] = {}
        #: node → PCIe switch → free VF minors
        self._vfs: dict[str, dict[str, list[int]]] = {}
        for device in state.devices:
            node = device.node_name
            if node not in usable:
                continue
            self._gpus[node] = {
                g.minor: (_switch(g), _less(g.resources, used.get((node, DeviceType.GPU, g.minor), {})))
                for g in device.of_type(DeviceType.GPU)
                if g.health
            }
            vfs: dict[str, list[int]] = defaultdict(list)
            for nic in device.of_type(DeviceType.RDMA):
                if nic.health:
                    vfs[_switch(nic)] += [
                        vf.minor for g in nic.vf_groups for vf in g.vfs if (node, nic.minor, vf.minor) not in taken_vfs
                    ]
            self._vfs[node] = vfs

    def place(self, pod: Pod) -> bool:
        """Take what `pod` needs from one node and say True; False (nothing taken) if none has it."""
        try:
            requests = pod_device_requests(pod)
        except TesseraError:
            return False
        gpu, rdma = requests.get(DeviceType.GPU), requests.get(DeviceType.RDMA)
        joint = names.ANNOTATION_DEVICE_JOINT_ALLOCATE in pod.annotations
        for node, gpus in sorted(self._gpus.items()):
            vfs = self._vfs.get(node, {})
            candidates = sorted(
                minor
                for minor, (switch, free) in gpus.items()
                if gpu is not None
                and all(free.get(name, 0) >= amount for name, amount in gpu.per_device.items())
                and (not joint or vfs.get(switch))
            )
            if gpu is not None and len(candidates) < gpu.count:
                continue
            chosen = candidates[: gpu.count] if gpu is not None else []
            switches = [gpus[m][0] for m in chosen] if joint else list(vfs)
            free_vfs = [(s, vf) for s in switches for vf in vfs.get(s, [])]
            if rdma is not None and len(free_vfs) < rdma.count:
                continue
            for minor in chosen:
                free = gpus[minor][1]
                for name, amount in gpu.per_device.items() if gpu is not None else ():
                    free[name] -= amount
            for switch, vf in free_vfs[: rdma.count if rdma is not None else 0]:
                vfs[switch].remove(vf)
            return True
        return False

    def place_all(self, pods: Iterable[Pod]) -> bool:
        """Place every pod (a gang's pending members) or none: True when all fit together."""
        trial = copy.deepcopy(self)
        if all(trial.place(pod) for pod in pods):
            self._gpus, self._vfs = trial._gpus, trial._vfs
            return True
        return False


def _switch(info: DeviceInfo) -> str:
    return info.topology.pcie_id if info.topology else ""


def _less(capacity: Mapping[str, int], held: Mapping[str, int]) -> dict[str, int]:
    return {name: amount - held.get(name, 0) for name, amount in capacity.items()}
