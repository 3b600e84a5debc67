"""Devices: no device is over-committed, none is given twice, every held device exists.

Capacity is each device's `resources` in its node's Device CR (gpu-core 100, gpu-memory-ratio 100,
gpu-memory in bytes; rdma per NIC); what is held is the sum over the pods' annotations. An
unhealthy device has no resources in its CR (nothing is allocatable on it), yet the pods placed
before it failed still hold it: its capacity is then what every device of its type has by the
protocol (`_NOMINAL`), and its memory in bytes is not judged. A whole
GPU (a holder with all its gpu-core) or an RDMA virtual function held by two pods is "given
twice", reported on its own because it is the worst case of over-commitment.

Available Reservations hold their devices beside the pods (`holdings.reservation_holdings`, named
`reservation/NAME`): a pod placed onto reserved devices other than by consuming the Reservation is
over-commitment too. Only Reservations that held both before and after the pods were listed count,
so one that expired (or was placed) while they were listed is not judged against pods of another
moment.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Final

from apis.crds.device import DeviceInfo, DeviceType
from apis.extension import names
from cli.bench.soak.holdings import Holding, holding_reservations, holdings, reservation_holdings
from cli.bench.soak.invariants.base import Bounds, Invariant, Violation
from cli.bench.soak.state import ClusterState

__all__ = ["invariants"]


def invariants(_bounds: Bounds) -> list[Invariant]:
    return [
        Invariant("device-over-committed", over_committed),
        Invariant("device-given-twice", given_twice),
        Invariant("device-unknown", unknown),
    ]


#: What a device has by the protocol, whatever its model: percent of it.
_NOMINAL: Final = {
    DeviceType.GPU: {names.GPU_CORE: 100, names.GPU_MEMORY_RATIO: 100},
    DeviceType.RDMA: {names.RDMA: 100},
}


def _capacity(info: DeviceInfo) -> Mapping[str, int]:
    if info.resources:
        return info.resources
    return _NOMINAL.get(info.type, {})


def _held(state: ClusterState) -> tuple[list[Holding], dict[str, str]]:
    """The pods' holdings and the Reservations' that held all the while the pods were listed."""
    held, malformed = holdings(state.pods)
    before = {r.uid for r in holding_reservations(state.reservations_before, state.pods)}
    reserved = [r for r in holding_reservations(state.reservations, state.pods) if r.uid in before]
    return held + reservation_holdings(reserved), malformed


def _by_device(state: ClusterState) -> dict[tuple[str, DeviceType, int], list[Holding]]:
    held, _ = _held(state)
    out: dict[tuple[str, DeviceType, int], list[Holding]] = defaultdict(list)
    for h in held:
        out[(h.node, h.type, h.minor)].append(h)
    return out


def over_committed(state: ClusterState) -> list[Violation]:
    """A device whose holders together hold more of a resource than it has."""
    capacity = {(d.node_name, info.type, info.minor): _capacity(info) for d in state.devices for info in d.devices}
    violations = []
    for key, held in _by_device(state).items():
        if key not in capacity:
            continue  # `unknown`
        totals: dict[str, int] = defaultdict(int)
        for h in held:
            for name, amount in h.resources.items():
                totals[name] += amount
        limits = capacity[key]
        over = {
            name: f"{amount} > {limits[name]}" for name, amount in totals.items() if amount > limits.get(name, amount)
        }
        if over:
            violations.append(
                Violation(
                    "device-over-committed",
                    (held[0].device, *sorted(h.pod for h in held)),
                    f"{held[0].device} is held beyond its capacity: {over}",
                )
            )
    return violations


def given_twice(state: ClusterState) -> list[Violation]:
    """A whole GPU shared with another pod, or an RDMA virtual function held by two pods."""
    violations = []
    vf_holders: dict[tuple[str, int, int], list[str]] = defaultdict(list)
    for (_node, dtype, _minor), held in _by_device(state).items():
        whole = [h for h in held if dtype is DeviceType.GPU and h.resources.get(names.GPU_CORE, 0) >= 100]
        if whole and len(held) > 1:
            violations.append(
                Violation(
                    "device-given-twice",
                    (held[0].device, *sorted(h.pod for h in held)),
                    f"{held[0].device} is given whole to {whole[0].pod} and also to "
                    f"{', '.join(sorted(h.pod for h in held if h is not whole[0]))}",
                )
            )
        for h in held:
            for vf in h.vfs:
                vf_holders[(h.node, h.minor, vf)].append(h.pod)
    for (node, nic, vf), pods in vf_holders.items():
        if len(pods) > 1:
            device = f"{node}/rdma-{nic}/vf-{vf}"
            violations.append(
                Violation("device-given-twice", (device, *sorted(pods)), f"{device} is held by {len(pods)} pods")
            )
    return violations


def unknown(state: ClusterState) -> list[Violation]:
    """A held device its node's Device CR does not have (or a node without a Device CR), and an
    allocation annotation that does not parse."""
    known = {(d.node_name, info.type, info.minor) for d in state.devices for info in d.devices}
    held, malformed = _held(state)
    violations = [
        Violation("device-unknown", (h.device, h.pod), f"{h.pod} holds {h.device}, which its node's Device CR lacks")
        for h in held
        if (h.node, h.type, h.minor) not in known
    ]
    violations += [
        Violation("device-unknown", (pod,), f"{pod}: malformed device-allocated annotation: {error}")
        for pod, error in malformed.items()
    ]
    return violations
