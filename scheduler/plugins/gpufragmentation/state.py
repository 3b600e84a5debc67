"""Per-cycle state of GPUFragmentation: the pod's request as the measure sees it."""

from __future__ import annotations

from dataclasses import dataclass, field

from apis.extension.devicerequest import DeviceRequest
from scheduler.framework.cycle_state import StateData


@dataclass(frozen=True, slots=True)
class PodState(StateData):
    """Written by PreFilter, read by Score and NormalizeScore."""

    milli_cpu: int
    memory: int
    #: The pod's GPU request; None when it asks for no GPU.
    gpu: DeviceRequest | None
    #: Version of the target workload the pod is scored against.
    version: int
    #: Losses at most this much above the least are ties (weight × percent: the tolerance in
    #: percent of one GPU times the workload's total weight).
    tolerance: int = 0
    #: Equal for pods of the same request (the framework's memo key: the version is the score
    #: epoch, apart, so that a new workload rescores nodes without refiltering them).
    request_key: tuple[object, ...] = field(init=False, compare=False)
    #: Equal for pods this plugin scores alike on every node: the request and the version
    #: (computed once: score reads it for every node).
    key: tuple[object, ...] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        gpu = self.gpu
        gpu_key = (gpu.count, tuple(sorted(gpu.per_device.items())), gpu.shared) if gpu is not None else None
        request_key = (self.milli_cpu, self.memory, gpu_key)
        object.__setattr__(self, "request_key", request_key)
        object.__setattr__(self, "key", (request_key, self.version))
