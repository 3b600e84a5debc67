"""A faithful stand-in for `pynvml`, for machines without an NVIDIA GPU and driver.

`FakeNVML` has the pynvml functions of `NVMLLibrary` with the same names, arguments, return shapes
and errors — it raises pynvml's own `NVMLError_*` classes (`NVMLError_Uninitialized` before
`nvmlInit`, `NVMLError_GpuIsLost` on a vanished GPU, `NVMLError_Timeout` from an empty event wait)
— so the code under test cannot tell it from the real library. Tests and simulated profiles pass it
to `NVML(...)` through constructors; nothing patches `pynvml`.

The control surface (not part of pynvml) drives what real hardware would do: `inject_xid` queues
an XID event to every event set the GPU is registered with (a critical one, or an application one
such as 13), `vanish` makes a GPU stop answering as one that fell off the bus, `reset` brings it
back as a GPU reset does (a GPU that still answers is gone for a moment first, as during a real
reset: that is how the agent sees one), and `init_error` makes `nvmlInit` fail (no driver).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import pynvml

from agent.discovery.nvmllib import bus_id_from_nvml

__all__ = ["FakeGPU", "FakeNVML", "FakeProcess"]


@dataclass
class FakeProcess:
    pid: int
    used_memory_bytes: int
    sm_util_percent: int = 0


@dataclass
class FakeGPU:
    """One fake GPU; tests may change the mutable readings (utilisation, memory used, ...)."""

    uuid: str
    bus_id: str  # sysfs form, `0000:3b:00.0`
    minor: int
    name: str = "NVIDIA A100-SXM4-80GB"
    #: NVML's architecture code (`nvmlDeviceArchitecture_t`); the default name's, Ampere.
    architecture: int = pynvml.NVML_DEVICE_ARCH_AMPERE
    memory_total: int = 80 * 2**30
    memory_used: int = 0
    utilization: int = 0
    temperature: int = 35
    power_mw: int = 60_000
    module_id: int | None = None
    mig_enabled: bool = False
    nvlink: bool = False  # joined to every other `nvlink` GPU (an NVSwitch system)
    nvlink_bridge: str = ""  # joined to the GPUs with the same bridge name (PCIe cards with NVLink bridges)
    processes: list[FakeProcess] = field(default_factory=list)
    lost: bool = False
    #: On the fake's clock: until then the GPU does not answer (it is being reset).
    resetting_until: float = 0.0


class _Handle:
    """Opaque like pynvml's `c_nvmlDevice_t`; one per GPU."""

    __slots__ = ("gpu",)

    def __init__(self, gpu: FakeGPU) -> None:
        self.gpu = gpu

    def __repr__(self) -> str:
        return f"<fake nvmlDevice {self.gpu.bus_id}>"


@dataclass
class _EventData:
    """Field names as pynvml's `c_nvmlEventData_t`."""

    device: object
    eventType: int
    eventData: int
    gpuInstanceId: int = 0xFFFFFFFF
    computeInstanceId: int = 0xFFFFFFFF


@dataclass
class _Memory:
    total: int
    free: int
    used: int


@dataclass
class _Utilization:
    gpu: int
    memory: int


@dataclass
class _PciInfo:
    busId: bytes
    busIdLegacy: bytes


@dataclass
class _ProcessInfo:
    pid: int
    usedGpuMemory: int | None
    gpuInstanceId: int = 0xFFFFFFFF
    computeInstanceId: int = 0xFFFFFFFF


@dataclass
class _UtilSample:
    pid: int
    timeStamp: int
    smUtil: int
    memUtil: int = 0
    encUtil: int = 0
    decUtil: int = 0


class _EventSet:
    def __init__(self) -> None:
        self.registered: dict[int, int] = {}  # id(gpu) -> event type mask
        self.queue: deque[_EventData] = deque()
        self.freed = False


_SUPPORTED_EVENTS = (
    pynvml.nvmlEventTypeXidCriticalError
    | pynvml.nvmlEventTypeSingleBitEccError
    | pynvml.nvmlEventTypeDoubleBitEccError
    | pynvml.nvmlEventTypePState
    | pynvml.nvmlEventTypeClock
)


def _error(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)  # pynvml maps the code to its NVMLError_* subclass


class FakeNVML:
    """The fake library. Thread-safe; event waits really block up to their timeout."""

    def __init__(
        self,
        gpus: Iterable[FakeGPU] = (),
        *,
        driver_version: str = "535.161.08",
        init_error: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.gpus = sorted(gpus, key=lambda g: g.bus_id)  # NVML enumerates in PCI bus order
        self.driver_version = driver_version
        self.init_error = init_error  # an NVML_ERROR_* code nvmlInit returns, e.g. LIBRARY_NOT_FOUND
        self._clock = clock
        self._handles = {id(g): _Handle(g) for g in self.gpus}
        self._refcount = 0
        self._event_sets: list[_EventSet] = []
        self._cond = threading.Condition()

    # --- control surface --------------------------------------------------------------------------
    def gpu(self, uuid: str) -> FakeGPU:
        return next(g for g in self.gpus if g.uuid == uuid)

    def inject_xid(self, uuid: str, xid: int) -> None:
        """Queue an XID event for the GPU on every event set it is registered with."""
        gpu = self.gpu(uuid)
        with self._cond:
            for es in self._event_sets:
                if es.registered.get(id(gpu), 0) & pynvml.nvmlEventTypeXidCriticalError:
                    es.queue.append(_EventData(self._handles[id(gpu)], pynvml.nvmlEventTypeXidCriticalError, xid))
            self._cond.notify_all()

    def vanish(self, uuid: str) -> None:
        """The GPU stops answering: every call on it raises NVMLError_GpuIsLost."""
        with self._cond:
            self.gpu(uuid).lost = True

    def reset(self, uuid: str, *, down_s: float = 0.0) -> None:
        """The GPU is reset, as by `nvidia-smi -r`: a lost GPU answers again at once; one that
        still answers first stops answering for `down_s` seconds, as a real reset takes it away."""
        with self._cond:
            gpu = self.gpu(uuid)
            if not gpu.lost and down_s > 0:
                gpu.resetting_until = self._clock() + down_s
            gpu.lost = False

    def _gone(self, gpu: FakeGPU) -> bool:
        return gpu.lost or self._clock() < gpu.resetting_until

    def set_processes(self, uuid: str, processes: Iterable[FakeProcess]) -> None:
        with self._cond:
            self.gpu(uuid).processes = list(processes)

    @property
    def initialized(self) -> bool:
        return self._refcount > 0

    @property
    def open_event_sets(self) -> int:
        """Event sets created and not yet freed (a leak check for tests)."""
        return len(self._event_sets)

    # --- pynvml surface ---------------------------------------------------------------------------
    def _check_init(self) -> None:
        if self._refcount <= 0:
            raise _error(pynvml.NVML_ERROR_UNINITIALIZED)

    def _gpu(self, handle: object) -> FakeGPU:
        self._check_init()
        if not isinstance(handle, _Handle):
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if self._gone(handle.gpu):
            raise _error(pynvml.NVML_ERROR_GPU_IS_LOST)
        return handle.gpu

    def nvmlInit(self) -> None:
        with self._cond:
            if self.init_error is not None:
                raise _error(self.init_error)
            self._refcount += 1

    def nvmlShutdown(self) -> None:
        with self._cond:
            self._check_init()
            self._refcount -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._check_init()
        return self.driver_version

    def nvmlDeviceGetCount(self) -> int:
        self._check_init()
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> object:
        self._check_init()
        if not 0 <= index < len(self.gpus):
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self._found(self.gpus[index])

    def nvmlDeviceGetHandleByPciBusId(self, pciBusId: str) -> object:
        self._check_init()
        wanted = bus_id_from_nvml(pciBusId)
        return self._found(next((g for g in self.gpus if g.bus_id == wanted), None))

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> object:
        self._check_init()
        return self._found(next((g for g in self.gpus if g.uuid == uuid), None))

    def _found(self, gpu: FakeGPU | None) -> object:
        if gpu is None:
            raise _error(pynvml.NVML_ERROR_NOT_FOUND)
        if self._gone(gpu):
            raise _error(pynvml.NVML_ERROR_GPU_IS_LOST)
        return self._handles[id(gpu)]

    def nvmlDeviceGetUUID(self, handle: object) -> str:
        return self._gpu(handle).uuid

    def nvmlDeviceGetMinorNumber(self, handle: object) -> int:
        return self._gpu(handle).minor

    def nvmlDeviceGetName(self, handle: object) -> str:
        return self._gpu(handle).name

    def nvmlDeviceGetMemoryInfo(self, handle: object) -> _Memory:
        gpu = self._gpu(handle)
        return _Memory(total=gpu.memory_total, free=gpu.memory_total - gpu.memory_used, used=gpu.memory_used)

    def nvmlDeviceGetPciInfo(self, handle: object) -> _PciInfo:
        gpu = self._gpu(handle)
        domain, _, rest = gpu.bus_id.partition(":")
        return _PciInfo(busId=f"{int(domain, 16):08X}:{rest.upper()}".encode(), busIdLegacy=b"")

    def nvmlDeviceGetModuleId(self, handle: object) -> int:
        gpu = self._gpu(handle)
        if gpu.module_id is None:
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu.module_id

    def nvmlDeviceGetArchitecture(self, device: object) -> int:
        return self._gpu(device).architecture

    def nvmlDeviceGetMigMode(self, device: object) -> list[int]:
        mode = pynvml.NVML_DEVICE_MIG_ENABLE if self._gpu(device).mig_enabled else pynvml.NVML_DEVICE_MIG_DISABLE
        return [mode, mode]

    def nvmlDeviceGetP2PStatus(self, device1: object, device2: object, p2pIndex: int) -> int:
        a, b = self._gpu(device1), self._gpu(device2)
        bridged = a.nvlink_bridge != "" and a.nvlink_bridge == b.nvlink_bridge
        linked = a is not b and ((a.nvlink and b.nvlink) or bridged)
        if p2pIndex == pynvml.NVML_P2P_CAPS_INDEX_NVLINK and not linked:
            return int(pynvml.NVML_P2P_STATUS_NOT_SUPPORTED)
        return int(pynvml.NVML_P2P_STATUS_OK)

    def nvmlDeviceGetUtilizationRates(self, handle: object) -> _Utilization:
        gpu = self._gpu(handle)
        if gpu.mig_enabled:
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)  # as NVML: no whole-GPU utilisation under MIG
        return _Utilization(gpu=gpu.utilization, memory=gpu.memory_used * 100 // max(gpu.memory_total, 1))

    def nvmlDeviceGetTemperature(self, handle: object, sensor: int) -> int:
        gpu = self._gpu(handle)
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return gpu.temperature

    def nvmlDeviceGetPowerUsage(self, handle: object) -> int:
        return self._gpu(handle).power_mw

    def nvmlDeviceGetComputeRunningProcesses(self, handle: object) -> list[_ProcessInfo]:
        return [_ProcessInfo(p.pid, p.used_memory_bytes) for p in self._gpu(handle).processes]

    def nvmlDeviceGetProcessUtilization(self, handle: object, timeStamp: int) -> list[_UtilSample]:
        gpu = self._gpu(handle)
        now_us = time.time_ns() // 1000
        samples = [_UtilSample(p.pid, now_us, p.sm_util_percent) for p in gpu.processes if now_us > timeStamp]
        if not samples:
            raise _error(pynvml.NVML_ERROR_NOT_FOUND)  # as NVML: no sample newer than timeStamp
        return samples

    def nvmlEventSetCreate(self) -> object:
        self._check_init()
        es = _EventSet()
        with self._cond:
            self._event_sets.append(es)
        return es

    def nvmlDeviceRegisterEvents(self, handle: object, eventTypes: int, eventSet: object) -> None:
        gpu = self._gpu(handle)
        if not isinstance(eventSet, _EventSet) or eventSet.freed:
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if eventTypes & ~_SUPPORTED_EVENTS:
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        with self._cond:
            eventSet.registered[id(gpu)] = eventSet.registered.get(id(gpu), 0) | eventTypes

    def nvmlEventSetWait(self, eventSet: object, timeoutms: int) -> _EventData:
        self._check_init()
        if not isinstance(eventSet, _EventSet) or eventSet.freed:
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        with self._cond:
            if not self._cond.wait_for(lambda: bool(eventSet.queue), timeout=timeoutms / 1000):
                raise _error(pynvml.NVML_ERROR_TIMEOUT)
            return eventSet.queue.popleft()

    def nvmlEventSetFree(self, eventSet: object) -> None:
        self._check_init()
        if not isinstance(eventSet, _EventSet) or eventSet.freed:
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        with self._cond:
            eventSet.freed = True
            self._event_sets.remove(eventSet)
