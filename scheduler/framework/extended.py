"""Extended resources served through DRA, as every plugin that counts a resource must see them.

A DeviceClass may serve an extended resource (`spec.extendedResourceName`, or kube's implicit
`deviceclass.resource.kubernetes.io/<class>`): a pod asking `nvidia.com/gpu: 1` is then served
by DynamicResources on a node that has no other way to give it (`apis.dra.extended`). On such a
node NodeResourcesFit must not ask the node's allocatable for it, and DeviceShare must not ask
the node's Device CR for it; elsewhere they do, and DynamicResources does nothing for it.

`ExtendedClasses` is the scheduler's one index of those classes (`Handle.scheduler_object` under
`KEY`), kept by DynamicResources from its DeviceClass watch; with that plugin disabled it stays
empty and no resource is served through DRA. `dra_served` is the per-node rule all three apply.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from apis.dra.claim import DeviceClass
from apis.dra.extended import ClassIndex, served_by_dra
from apis.extension import devicetypes
from scheduler.cache import NodeInfo, PodInfo

__all__ = ["KEY", "ExtendedClasses", "dra_served"]

KEY: Final = "scheduler.ExtendedResourceClasses"


class ExtendedClasses:
    """The DeviceClasses by the extended resources they serve; `generation` moves on each change."""

    __slots__ = ("generation", "index")

    def __init__(self) -> None:
        self.index = ClassIndex()
        self.generation = 0

    def set(self, classes: Iterable[DeviceClass]) -> None:
        self.index = ClassIndex(classes)
        self.generation += 1

    def mapped(self, pod: PodInfo) -> dict[str, str]:
        """The pod's requested resources a class serves -> the class; for a Koordinator device
        resource only when the pod asks for devices of that one type (DeviceShare serves a
        request of several types together, or not at all)."""
        if not self.index:
            return {}
        found = self.index.mapped(pod.requests)
        devices = {devicetypes.type_of(n) for n in pod.requests if n in devicetypes.RESOURCE_NAMES and pod.requests[n]}
        return {
            name: klass
            for name, klass in found.items()
            if name not in devicetypes.RESOURCE_NAMES or devices == {devicetypes.type_of(name)}
        }


def dra_served(mapped: Mapping[str, str], node: NodeInfo) -> dict[str, str]:
    """Of `mapped` (resource -> class), those `node` serves through DRA."""
    if not mapped:
        return {}
    types = node.devices.types()
    return {
        name: klass
        for name, klass in mapped.items()
        if served_by_dra(name, allocatable=node.allocatable, koordinator_types=types)
    }
