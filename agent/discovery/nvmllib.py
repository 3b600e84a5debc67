"""The NVML boundary: the part of `pynvml` Tessera uses, as a Protocol, and a typed adapter over it.

`NVMLLibrary` lists the pynvml functions the agent calls, with the shapes they return; the real
`pynvml` module satisfies it, and so does `agent.discovery.fake_nvml.FakeNVML`, which is how tests
run the discovery, health and metrics code on machines without a GPU. Pass either to `NVML`.

`NVML` is the only code that calls the library or sees its errors: every `pynvml.NVMLError` is
wrapped into `NVMLCallError` (a `DiscoveryError`) naming the call, with flags for the cases callers
act on (`gpu_lost`, `not_supported`). Handles are opaque (`Handle`); NVML's are C pointers whose
Python wrappers differ per call, so `handle_key` gives a value that compares equal for one GPU.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final, NewType, Protocol, TypeVar

import pynvml

from apis.errors import DiscoveryError

__all__ = [
    "ARCHITECTURES",
    "NVML",
    "EventSet",
    "Handle",
    "HandleCache",
    "NVMLCallError",
    "NVMLLibrary",
    "ProcessSample",
    "XidEvent",
    "bus_id_from_nvml",
    "if_supported",
]

log = logging.getLogger(__name__)

# pynvml's constants, typed (pynvml has no annotations).
_ERROR_NOT_SUPPORTED: Final[int] = pynvml.NVML_ERROR_NOT_SUPPORTED
_ERROR_FUNCTION_NOT_FOUND: Final[int] = pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
_ERROR_NOT_FOUND: Final[int] = pynvml.NVML_ERROR_NOT_FOUND
_ERROR_GPU_IS_LOST: Final[int] = pynvml.NVML_ERROR_GPU_IS_LOST
_ERROR_TIMEOUT: Final[int] = pynvml.NVML_ERROR_TIMEOUT
_EVENT_XID_CRITICAL: Final[int] = pynvml.nvmlEventTypeXidCriticalError
_MIG_ENABLE: Final[int] = pynvml.NVML_DEVICE_MIG_ENABLE
_P2P_CAPS_NVLINK: Final[int] = pynvml.NVML_P2P_CAPS_INDEX_NVLINK
_P2P_STATUS_OK: Final[int] = pynvml.NVML_P2P_STATUS_OK
#: NVML's architecture codes (`nvmlDeviceArchitecture_t`) by the names NVIDIA gives them.
ARCHITECTURES: Final[Mapping[int, str]] = {
    pynvml.NVML_DEVICE_ARCH_KEPLER: "Kepler",
    pynvml.NVML_DEVICE_ARCH_MAXWELL: "Maxwell",
    pynvml.NVML_DEVICE_ARCH_PASCAL: "Pascal",
    pynvml.NVML_DEVICE_ARCH_VOLTA: "Volta",
    pynvml.NVML_DEVICE_ARCH_TURING: "Turing",
    pynvml.NVML_DEVICE_ARCH_AMPERE: "Ampere",
    pynvml.NVML_DEVICE_ARCH_ADA: "Ada",
    pynvml.NVML_DEVICE_ARCH_HOPPER: "Hopper",
    pynvml.NVML_DEVICE_ARCH_BLACKWELL: "Blackwell",
}
_TEMPERATURE_GPU: Final[int] = pynvml.NVML_TEMPERATURE_GPU

T = TypeVar("T")
Handle = NewType("Handle", object)
EventSet = NewType("EventSet", object)


# --- shapes pynvml returns (ctypes structures or pynvml's friendly objects) ------------------------
class MemoryInfo(Protocol):
    total: int
    used: int


class Utilization(Protocol):
    gpu: int
    memory: int


class PciInfo(Protocol):
    @property
    def busId(self) -> bytes | str: ...


class ProcessInfo(Protocol):
    pid: int
    usedGpuMemory: int | None


class ProcessUtilizationSample(Protocol):
    pid: int
    timeStamp: int
    smUtil: int


class EventData(Protocol):
    device: object
    eventType: int
    eventData: int


class NVMLLibrary(Protocol):
    """The pynvml functions Tessera calls (names and signatures as pynvml's)."""

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlSystemGetDriverVersion(self) -> str: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> object: ...
    def nvmlDeviceGetHandleByPciBusId(self, pciBusId: str) -> object: ...
    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> object: ...
    def nvmlDeviceGetUUID(self, handle: object) -> str: ...
    def nvmlDeviceGetMinorNumber(self, handle: object) -> int: ...
    def nvmlDeviceGetName(self, handle: object) -> str: ...
    def nvmlDeviceGetMemoryInfo(self, handle: object) -> MemoryInfo: ...
    def nvmlDeviceGetPciInfo(self, handle: object) -> PciInfo: ...
    def nvmlDeviceGetModuleId(self, handle: object) -> int: ...
    def nvmlDeviceGetMigMode(self, device: object) -> list[int]: ...
    def nvmlDeviceGetArchitecture(self, device: object) -> int: ...
    def nvmlDeviceGetP2PStatus(self, device1: object, device2: object, p2pIndex: int) -> int: ...
    def nvmlDeviceGetUtilizationRates(self, handle: object) -> Utilization: ...
    def nvmlDeviceGetTemperature(self, handle: object, sensor: int) -> int: ...
    def nvmlDeviceGetPowerUsage(self, handle: object) -> int: ...
    def nvmlDeviceGetComputeRunningProcesses(self, handle: object) -> Sequence[ProcessInfo]: ...
    def nvmlDeviceGetProcessUtilization(self, handle: object, timeStamp: int) -> Sequence[ProcessUtilizationSample]: ...
    def nvmlEventSetCreate(self) -> object: ...
    def nvmlDeviceRegisterEvents(self, handle: object, eventTypes: int, eventSet: object) -> None: ...
    def nvmlEventSetWait(self, eventSet: object, timeoutms: int) -> EventData: ...
    def nvmlEventSetFree(self, eventSet: object) -> None: ...


class NVMLCallError(DiscoveryError):
    """An NVML call failed. `code` is NVML's return code (`pynvml.NVML_ERROR_*`)."""

    def __init__(self, call: str, code: int, text: str, *, device: str = "") -> None:
        where = f" on {device}" if device else ""
        super().__init__(f"NVML {call}{where} failed: {text} (code {code})")
        self.call = call
        self.code = code
        self.device = device

    @property
    def gpu_lost(self) -> bool:
        """The GPU no longer answers (fell off the bus, or was removed)."""
        return self.code in (_ERROR_GPU_IS_LOST, _ERROR_NOT_FOUND)

    @property
    def not_supported(self) -> bool:
        return self.code in (_ERROR_NOT_SUPPORTED, _ERROR_FUNCTION_NOT_FOUND)

    @property
    def timeout(self) -> bool:
        return self.code == _ERROR_TIMEOUT


@dataclass(frozen=True, slots=True)
class XidEvent:
    handle: Handle
    xid: int


@dataclass(frozen=True, slots=True)
class ProcessSample:
    pid: int
    used_memory_bytes: int | None  # None where the driver does not account per process


def bus_id_from_nvml(text: str | bytes) -> str:
    """NVML's `00000000:3B:00.0` as sysfs writes it: `0000:3b:00.0`."""
    raw = text.decode() if isinstance(text, bytes) else text
    domain, _, rest = raw.strip().partition(":")
    return f"{int(domain, 16):04x}:{rest.lower()}"


class NVML:
    """Typed calls into an `NVMLLibrary`; raises NVMLCallError, never a pynvml error. Thread-safe
    as NVML is; holds no state besides the library."""

    def __init__(self, lib: NVMLLibrary) -> None:
        self._lib = lib

    @contextmanager
    def _call(self, call: str, device: str = "") -> Iterator[None]:
        try:
            yield
        except pynvml.NVMLError as e:
            raise NVMLCallError(call, int(e.value), str(e), device=device) from e

    def init(self) -> None:
        with self._call("nvmlInit"):
            self._lib.nvmlInit()

    def shutdown(self) -> None:
        with self._call("nvmlShutdown"):
            self._lib.nvmlShutdown()

    def driver_version(self) -> str:
        with self._call("nvmlSystemGetDriverVersion"):
            return str(self._lib.nvmlSystemGetDriverVersion())

    def count(self) -> int:
        with self._call("nvmlDeviceGetCount"):
            return int(self._lib.nvmlDeviceGetCount())

    def handle_by_index(self, index: int) -> Handle:
        with self._call("nvmlDeviceGetHandleByIndex", str(index)):
            return Handle(self._lib.nvmlDeviceGetHandleByIndex(index))

    def handle_by_bus_id(self, bus_id: str) -> Handle:
        with self._call("nvmlDeviceGetHandleByPciBusId", bus_id):
            return Handle(self._lib.nvmlDeviceGetHandleByPciBusId(bus_id))

    def handle_by_uuid(self, uuid: str) -> Handle:
        with self._call("nvmlDeviceGetHandleByUUID", uuid):
            return Handle(self._lib.nvmlDeviceGetHandleByUUID(uuid))

    def uuid(self, handle: Handle) -> str:
        with self._call("nvmlDeviceGetUUID"):
            return str(self._lib.nvmlDeviceGetUUID(handle))

    def minor(self, handle: Handle) -> int:
        with self._call("nvmlDeviceGetMinorNumber"):
            return int(self._lib.nvmlDeviceGetMinorNumber(handle))

    def name(self, handle: Handle) -> str:
        with self._call("nvmlDeviceGetName"):
            return str(self._lib.nvmlDeviceGetName(handle))

    def memory(self, handle: Handle) -> tuple[int, int]:
        """(total, used) bytes."""
        with self._call("nvmlDeviceGetMemoryInfo"):
            info = self._lib.nvmlDeviceGetMemoryInfo(handle)
            return int(info.total), int(info.used)

    def bus_id(self, handle: Handle) -> str:
        with self._call("nvmlDeviceGetPciInfo"):
            return bus_id_from_nvml(self._lib.nvmlDeviceGetPciInfo(handle).busId)

    def module_id(self, handle: Handle) -> int:
        """The SXM module id (not supported on PCIe GPUs: see `if_supported`)."""
        with self._call("nvmlDeviceGetModuleId"):
            return int(self._lib.nvmlDeviceGetModuleId(handle))

    def architecture(self, handle: Handle) -> str:
        """The GPU's architecture as NVIDIA names it (`Ampere`, `Hopper`); "" for a code this
        table does not know (a newer GPU than the table)."""
        with self._call("nvmlDeviceGetArchitecture"):
            return ARCHITECTURES.get(int(self._lib.nvmlDeviceGetArchitecture(handle)), "")

    def mig_enabled(self, handle: Handle) -> bool:
        with self._call("nvmlDeviceGetMigMode"):
            return int(self._lib.nvmlDeviceGetMigMode(handle)[0]) == _MIG_ENABLE

    def nvlinked(self, a: Handle, b: Handle) -> bool:
        """Whether NVML reports peer-to-peer over NVLink between two GPUs (a slow call: cache it)."""
        with self._call("nvmlDeviceGetP2PStatus"):
            return int(self._lib.nvmlDeviceGetP2PStatus(a, b, _P2P_CAPS_NVLINK)) == _P2P_STATUS_OK

    def utilization_percent(self, handle: Handle) -> int:
        with self._call("nvmlDeviceGetUtilizationRates"):
            return int(self._lib.nvmlDeviceGetUtilizationRates(handle).gpu)

    def temperature_celsius(self, handle: Handle) -> int:
        with self._call("nvmlDeviceGetTemperature"):
            return int(self._lib.nvmlDeviceGetTemperature(handle, _TEMPERATURE_GPU))

    def power_watts(self, handle: Handle) -> float:
        with self._call("nvmlDeviceGetPowerUsage"):
            return int(self._lib.nvmlDeviceGetPowerUsage(handle)) / 1000.0  # NVML reports milliwatts

    def processes(self, handle: Handle) -> list[ProcessSample]:
        with self._call("nvmlDeviceGetComputeRunningProcesses"):
            procs = self._lib.nvmlDeviceGetComputeRunningProcesses(handle)
            return [ProcessSample(int(p.pid), _optional_int(p.usedGpuMemory)) for p in procs]

    def process_utilization(self, handle: Handle, since_us: int) -> dict[int, int]:
        """pid -> SM utilisation percent of its latest sample newer than `since_us` (NVML's clock).

        Empty when there is no newer sample (NVML says NOT_FOUND) or the GPU cannot tell.
        """
        try:
            with self._call("nvmlDeviceGetProcessUtilization"):
                samples = self._lib.nvmlDeviceGetProcessUtilization(handle, since_us)
        except NVMLCallError as e:
            if e.code == _ERROR_NOT_FOUND or e.not_supported:
                return {}
            raise
        latest: dict[int, tuple[int, int]] = {}
        for s in samples:
            if s.pid not in latest or s.timeStamp > latest[s.pid][0]:
                latest[int(s.pid)] = (int(s.timeStamp), int(s.smUtil))
        return {pid: util for pid, (_, util) in latest.items()}

    def create_event_set(self) -> EventSet:
        with self._call("nvmlEventSetCreate"):
            return EventSet(self._lib.nvmlEventSetCreate())

    def register_xid_events(self, handle: Handle, event_set: EventSet, *, device: str = "") -> None:
        with self._call("nvmlDeviceRegisterEvents", device):
            self._lib.nvmlDeviceRegisterEvents(handle, _EVENT_XID_CRITICAL, event_set)

    def wait_xid(self, event_set: EventSet, timeout_ms: int) -> XidEvent | None:
        """Blocks up to `timeout_ms` for the next event; None on timeout or a non-XID event."""
        try:
            with self._call("nvmlEventSetWait"):
                data = self._lib.nvmlEventSetWait(event_set, timeout_ms)
        except NVMLCallError as e:
            if e.timeout:
                return None
            raise
        if int(data.eventType) != _EVENT_XID_CRITICAL:
            return None
        return XidEvent(Handle(data.device), int(data.eventData))

    def free_event_set(self, event_set: EventSet) -> None:
        with self._call("nvmlEventSetFree"):
            self._lib.nvmlEventSetFree(event_set)

    @staticmethod
    def handle_key(handle: Handle) -> object:
        """A hashable value equal for every handle of one GPU: the C pointer's address where the
        handle is one (real NVML returns a fresh wrapper per call), else the handle itself."""
        try:
            return ctypes.cast(handle, ctypes.c_void_p).value  # type: ignore[arg-type]  # a ctypes pointer at run time
        except (ctypes.ArgumentError, TypeError):
            return handle


def if_supported(read: Callable[[], T]) -> T | None:
    """`read()`, or None where NVML says the GPU or driver cannot tell (NOT_SUPPORTED): module ids
    on PCIe GPUs, MIG mode before Ampere, utilisation of a GPU in MIG mode, ..."""
    try:
        return read()
    except NVMLCallError as e:
        if e.not_supported:
            return None
        raise


class HandleCache:
    """GPU UUID -> NVML handle, looked up once and reused (lookups are not free on real NVML).

    `forget` drops a handle after its GPU failed, so the next `get` looks it up again — after a
    GPU reset NVML may hand out a new one. Used by the health watcher and the metrics collector.
    """

    def __init__(self, nvml: NVML) -> None:
        self._nvml = nvml
        self._handles: dict[str, Handle] = {}

    def get(self, uuid: str) -> Handle:
        """The handle; raises NVMLCallError (e.g. `gpu_lost`) when NVML cannot find the GPU."""
        handle = self._handles.get(uuid)
        if handle is None:
            handle = self._nvml.handle_by_uuid(uuid)
            self._handles[uuid] = handle
        return handle

    def forget(self, uuid: str) -> None:
        self._handles.pop(uuid, None)


def _optional_int(value: object) -> int | None:
    return int(value) if isinstance(value, int) else None
