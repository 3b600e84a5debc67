"""What devices a pod asks for: the request rules of the protocol, applied once.

From a pod's effective request (see `Pod.requests`) this module derives, per device type, how
many devices the pod needs and how much of each (`DeviceRequest`), or rejects the request with an
`InvalidRequestError` that names the offending resources. Which names belong to which type, and
which rule reads them (the GPU rules below, or one percent-of-a-device resource), is the device
type table's (`apis.extension.devicetypes`). The scheduler's DeviceShare plugin,
`tessera what-if` and the simulator all call it, so they accept and reject exactly the same pods.

Rules (protocol.md, "Request rules"):
- allowed GPU combinations: a whole-GPU name alone (`nvidia.com/gpu`, `amd.com/gpu`,
  `dcu.com/gpu`); `koordinator.sh/gpu` alone; `gpu-memory`; `gpu-memory-ratio`;
  `gpu-core + gpu-memory`; `gpu-core + gpu-memory-ratio`; the last four also with `gpu.shared`;
- percent values (gpu-core, gpu-memory-ratio, koordinator.sh/gpu, and each type read by the
  percent rule: rdma, fpga) are <= 100 or a multiple of 100;
- device count = `gpu.shared` if set, else ratio/100 when ratio > 100, else 1; each amount is
  divided by the count and must divide evenly (bytes are rounded up) and be <= 100 per device;
- shared = per-device ratio < 100, or no ratio and per-device core < 100 (or no core at all);
- after placement both memory forms are filled from the GPU's total memory
  (`gpu_allocation_resources`);
- Koordinator's deprecated names (`kubernetes.io/gpu-core`, ...) count as the current ones
  (parsed pods already carry only those, see `apis.extension.deprecated`); one resource given in
  both spellings in one container is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from apis.errors import InvalidRequestError
from apis.extension import deprecated, devicetypes, names
from apis.extension.devicetypes import DeviceType, RequestRule
from apis.k8s.core import Pod

__all__ = [
    "DeviceRequest",
    "device_requests",
    "gpu_allocation_resources",
    "pod_device_requests",
]

_SHORT = {
    names.GPU_CORE: "gpu-core",
    names.GPU_MEMORY: "gpu-memory",
    names.GPU_MEMORY_RATIO: "gpu-memory-ratio",
    names.GPU_SHARED: "gpu.shared",
}
_GPU_PARTS = (names.GPU_CORE, names.GPU_MEMORY, names.GPU_MEMORY_RATIO, names.GPU_SHARED)
_ALLOWED_GPU_SETS = (
    frozenset({names.GPU_MEMORY}),
    frozenset({names.GPU_MEMORY_RATIO}),
    frozenset({names.GPU_CORE, names.GPU_MEMORY}),
    frozenset({names.GPU_CORE, names.GPU_MEMORY_RATIO}),
)
#: The percent resource of each type asked for in one (`RequestRule.PERCENT`), in table order.
_PERCENT_DEVICES = {s.percent_resource: s.type for s in devicetypes.TABLE if s.request_rule is RequestRule.PERCENT}


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """`count` devices of `type`, each with `per_device` (base units: percent, bytes).

    For GPUs `per_device` holds the memory form the pod gave (ratio or bytes); the other form is
    filled per GPU model at allocation by `gpu_allocation_resources`.
    """

    type: DeviceType
    count: int
    per_device: Mapping[str, int] = field(default_factory=dict)
    shared: bool = False

    @property
    def total(self) -> dict[str, int]:
        return {name: amount * self.count for name, amount in self.per_device.items()}


def pod_device_requests(pod: Pod) -> dict[DeviceType, DeviceRequest]:
    """Device requests of a pod (empty when it asks for none). Raises InvalidRequestError."""
    return device_requests(pod.requests(), obj=pod.key)


def device_requests(requests: Mapping[str, int], *, obj: str = "") -> dict[DeviceType, DeviceRequest]:
    """Device requests from a resource list in base units. Raises InvalidRequestError."""
    requests = _current_names(requests, obj)
    asked = {name: requests[name] for name in devicetypes.RESOURCE_NAMES if requests.get(name, 0) != 0}
    negative = sorted(name for name, amount in asked.items() if amount < 0)
    if negative:
        raise InvalidRequestError(
            ", ".join(f"{n}={asked[n]} must not be negative" for n in negative), resources=tuple(negative), obj=obj
        )
    out: dict[DeviceType, DeviceRequest] = {}
    gpu = _gpu_request(asked, obj)
    if gpu is not None:
        out[DeviceType.GPU] = gpu
    for name, dtype in _PERCENT_DEVICES.items():
        if name in asked:
            out[dtype] = _percent_device_request(dtype, name, asked[name], obj)
    return out


def _current_names(requests: Mapping[str, int], obj: str) -> Mapping[str, int]:
    """`requests` in current names; refuses a resource given in both spellings."""
    both = deprecated.shadowed(requests)
    if both:
        text = "; ".join(
            f"{old} and {new} are the same resource ({old} is its deprecated name): ask for {new} only"
            for old, new in both.items()
        )
        raise InvalidRequestError(text, resources=tuple(n for pair in both.items() for n in pair), obj=obj)
    return deprecated.to_current(requests)


def _check_percent(name: str, amount: int, obj: str) -> None:
    if amount > 100 and amount % 100 != 0:
        raise InvalidRequestError(f"{name}={amount} must be <= 100 or a multiple of 100", resources=(name,), obj=obj)


def _percent_device_request(dtype: DeviceType, name: str, amount: int, obj: str) -> DeviceRequest:
    _check_percent(name, amount, obj)
    count = amount // 100 if amount > 100 else 1
    per = amount // count
    return DeviceRequest(dtype, count, {name: per}, shared=per < 100)


def _gpu_request(asked: Mapping[str, int], obj: str) -> DeviceRequest | None:
    whole = [n for n in devicetypes.WHOLE_GPU_RESOURCES if n in asked]
    koord = [n for n in (names.KOORD_GPU, *_GPU_PARTS) if n in asked]
    if len(whole) > 1:
        raise InvalidRequestError(
            f"{' and '.join(whole)} cannot be requested together", resources=tuple(whole), obj=obj
        )
    if whole and koord:
        raise InvalidRequestError(
            f"{whole[0]} cannot be combined with {', '.join(koord)}", resources=(whole[0], *koord), obj=obj
        )
    if whole:
        count = asked[whole[0]]
        return DeviceRequest(DeviceType.GPU, count, {names.GPU_CORE: 100, names.GPU_MEMORY_RATIO: 100})
    if names.KOORD_GPU in asked:
        others = [n for n in _GPU_PARTS if n in asked]
        if others:
            raise InvalidRequestError(
                f"{names.KOORD_GPU} cannot be combined with {', '.join(others)}",
                resources=(names.KOORD_GPU, *others),
                obj=obj,
            )
        percent = asked[names.KOORD_GPU]
        _check_percent(names.KOORD_GPU, percent, obj)
        return _split(asked, {names.GPU_CORE: percent, names.GPU_MEMORY_RATIO: percent}, obj)
    parts = {n: asked[n] for n in _GPU_PARTS if n in asked}
    if not parts:
        return None
    amounts = {n: v for n, v in parts.items() if n != names.GPU_SHARED}
    if frozenset(amounts) not in _ALLOWED_GPU_SETS:
        raise _combination_error(frozenset(amounts), names.GPU_SHARED in parts, obj)
    for name in (names.GPU_CORE, names.GPU_MEMORY_RATIO):
        if name in amounts:
            _check_percent(name, amounts[name], obj)
    return _split(asked, amounts, obj)


def _combination_error(given: frozenset[str], with_shared: bool, obj: str) -> InvalidRequestError:
    """Explain why a set of koordinator.sh/gpu-* names is not one of the allowed combinations."""
    if not given and with_shared:
        msg = f"{names.GPU_SHARED} needs {names.GPU_CORE}, {names.GPU_MEMORY} or {names.GPU_MEMORY_RATIO}"
        return InvalidRequestError(msg, resources=(names.GPU_SHARED,), obj=obj)
    if {names.GPU_MEMORY, names.GPU_MEMORY_RATIO} <= given:
        msg = f"{names.GPU_MEMORY} and {names.GPU_MEMORY_RATIO} cannot be requested together"
        return InvalidRequestError(msg, resources=(names.GPU_MEMORY, names.GPU_MEMORY_RATIO), obj=obj)
    msg = f"{names.GPU_CORE} needs {names.GPU_MEMORY} or {names.GPU_MEMORY_RATIO} beside it"
    return InvalidRequestError(msg, resources=tuple(sorted(given)), obj=obj)


def _split(asked: Mapping[str, int], amounts: Mapping[str, int], obj: str) -> DeviceRequest:
    """Divide the pod's GPU amounts over its device count and decide whether it shares GPUs."""
    ratio = amounts.get(names.GPU_MEMORY_RATIO)
    shared_over = asked.get(names.GPU_SHARED)
    if shared_over is not None:
        count = shared_over
        for name in (names.GPU_CORE, names.GPU_MEMORY_RATIO):
            if name in amounts and amounts[name] % count:
                raise InvalidRequestError(
                    f"{name}={amounts[name]} must be a multiple of {names.GPU_SHARED}={count}",
                    resources=(name, names.GPU_SHARED),
                    obj=obj,
                )
    else:
        count = ratio // 100 if ratio is not None and ratio > 100 else 1
    per: dict[str, int] = {}
    for name, amount in amounts.items():
        if name == names.GPU_MEMORY:
            per[name] = -(-amount // count)  # bytes: round up, never hand out less than asked
            continue
        if amount % count:
            raise InvalidRequestError(
                f"{name}={amount} cannot be split evenly over {count} GPUs", resources=(name,), obj=obj
            )
        per[name] = amount // count
        if per[name] > 100:
            hint = f"; ask for {names.GPU_MEMORY_RATIO} too or set {names.GPU_SHARED}" if ratio is None else ""
            raise InvalidRequestError(
                f"{name}={amount} needs {per[name]} per GPU over {count} GPU(s), more than 100{hint}",
                resources=(name,),
                obj=obj,
            )
    per_ratio = per.get(names.GPU_MEMORY_RATIO)
    per_core = per.get(names.GPU_CORE)
    shared = per_ratio < 100 if per_ratio is not None else (per_core is None or per_core < 100)
    return DeviceRequest(DeviceType.GPU, count, per, shared=shared)


def gpu_allocation_resources(request: DeviceRequest, total_memory: int) -> dict[str, int]:
    """Per-GPU resources to allocate on a GPU with `total_memory` bytes: both memory forms filled.

    ratio → bytes = ratio × total / 100 (floor); bytes → ratio = floor(bytes × 100 / total).
    """
    per = request.per_device
    out: dict[str, int] = {}
    if names.GPU_CORE in per:
        out[names.GPU_CORE] = per[names.GPU_CORE]
    if names.GPU_MEMORY_RATIO in per:
        out[names.GPU_MEMORY_RATIO] = per[names.GPU_MEMORY_RATIO]
        out[names.GPU_MEMORY] = per[names.GPU_MEMORY_RATIO] * total_memory // 100
    elif names.GPU_MEMORY in per:
        out[names.GPU_MEMORY] = per[names.GPU_MEMORY]
        out[names.GPU_MEMORY_RATIO] = per[names.GPU_MEMORY] * 100 // total_memory if total_memory > 0 else 0
    return out
