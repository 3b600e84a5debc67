"""The fake NVML behaves as pynvml: the same errors, in the same situations.

Where this machine has a real GPU and driver the behaviour shared by both runs on both
(`nvml_env`); fault injection runs on the fake only.
"""

from __future__ import annotations

import threading
import time

import pynvml
import pytest

from agent.discovery.fake_nvml import FakeGPU, FakeNVML, FakeProcess
from agent.discovery.nvmllib import NVML, NVMLCallError
from tests.support.nvml import NVMLEnv


def test_calls_before_init_raise_uninitialized(nvml_env: NVMLEnv) -> None:
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nvml_env.lib.nvmlDeviceGetCount()


def test_unknown_bus_id_is_not_found(nvml_env: NVMLEnv, nvml: NVML) -> None:
    with pytest.raises(NVMLCallError) as caught:
        nvml.handle_by_bus_id("0000:ff:1f.7")
    assert caught.value.code == pynvml.NVML_ERROR_NOT_FOUND


def test_bus_ids_read_back_in_sysfs_form_in_either_spelling(nvml_env: NVMLEnv, nvml: NVML) -> None:
    bus_id = nvml.bus_id(nvml.handle_by_index(0))
    domain, _, rest = bus_id.partition(":")
    nvml_spelling = f"{int(domain, 16):08X}:{rest.upper()}"
    assert nvml.uuid(nvml.handle_by_bus_id(nvml_spelling)) == nvml.uuid(nvml.handle_by_bus_id(bus_id))


def test_event_wait_times_out_with_nvml_timeout(nvml_env: NVMLEnv, nvml: NVML) -> None:
    events = nvml.create_event_set()
    try:
        nvml.register_xid_events(nvml.handle_by_index(0), events)
        started = time.monotonic()
        assert nvml.wait_xid(events, 50) is None
        assert time.monotonic() - started >= 0.04
    finally:
        nvml.free_event_set(events)


def test_init_error_is_pynvmls_class() -> None:
    with pytest.raises(pynvml.NVMLError_LibraryNotFound):
        FakeNVML(init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND).nvmlInit()


def test_shutdown_is_refcounted() -> None:
    fake = FakeNVML()
    fake.nvmlInit()
    fake.nvmlInit()
    fake.nvmlShutdown()
    assert fake.nvmlDeviceGetCount() == 0
    fake.nvmlShutdown()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        fake.nvmlShutdown()


def test_vanished_gpu_is_lost_until_reset(nvml_env: NVMLEnv, nvml: NVML) -> None:
    fake = nvml_env.require_fake()
    gpu = fake.gpus[2]
    handle = nvml.handle_by_uuid(gpu.uuid)
    fake.vanish(gpu.uuid)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        fake.nvmlDeviceGetMemoryInfo(handle)
    with pytest.raises(NVMLCallError) as caught:
        nvml.handle_by_bus_id(gpu.bus_id)
    assert caught.value.gpu_lost
    fake.reset(gpu.uuid)
    assert nvml.memory(handle)[0] == gpu.memory_total


def test_a_reset_takes_a_gpu_that_answers_away_for_a_moment() -> None:
    now = [100.0]
    fake = FakeNVML([FakeGPU(uuid="GPU-r", bus_id="0000:3b:00.0", minor=0)], clock=lambda: now[0])
    nvml = NVML(fake)
    nvml.init()
    handle = nvml.handle_by_uuid("GPU-r")
    fake.reset("GPU-r", down_s=3.0)
    with pytest.raises(NVMLCallError) as caught:
        nvml.uuid(handle)
    assert caught.value.gpu_lost
    now[0] += 3.0
    assert nvml.uuid(handle) == "GPU-r"
    fake.reset("GPU-r")  # no downtime asked for: nothing to see
    assert nvml.uuid(handle) == "GPU-r"
    nvml.shutdown()


def test_injected_xid_wakes_a_waiting_thread_and_reaches_only_registered_sets(nvml_env: NVMLEnv, nvml: NVML) -> None:
    fake = nvml_env.require_fake()
    watched, unwatched = nvml.create_event_set(), nvml.create_event_set()
    nvml.register_xid_events(nvml.handle_by_index(5), watched)
    results = []
    waiter = threading.Thread(target=lambda: results.append(nvml.wait_xid(watched, 5000)))
    waiter.start()
    fake.inject_xid(fake.gpus[5].uuid, 79)
    waiter.join(5)
    assert results and results[0] is not None and results[0].xid == 79
    assert nvml.uuid(results[0].handle) == fake.gpus[5].uuid
    assert nvml.wait_xid(unwatched, 0) is None


def test_unsupported_event_types_are_refused() -> None:
    fake = FakeNVML([_gpu()])
    fake.nvmlInit()
    with pytest.raises(pynvml.NVMLError_NotSupported):
        fake.nvmlDeviceRegisterEvents(
            fake.nvmlDeviceGetHandleByIndex(0), pynvml.nvmlEventTypeGpuRecoveryAction, fake.nvmlEventSetCreate()
        )


def test_processes_and_their_utilisation() -> None:
    fake = FakeNVML([_gpu()])
    fake.nvmlInit()
    nvml = NVML(fake)
    handle = nvml.handle_by_index(0)
    assert nvml.processes(handle) == [] and nvml.process_utilization(handle, 0) == {}
    fake.set_processes("GPU-x", [FakeProcess(pid=7, used_memory_bytes=2**30, sm_util_percent=40)])
    assert [(p.pid, p.used_memory_bytes) for p in nvml.processes(handle)] == [(7, 2**30)]
    assert nvml.process_utilization(handle, 0) == {7: 40}


def _gpu() -> FakeGPU:
    return FakeGPU(uuid="GPU-x", bus_id="0000:3b:00.0", minor=0)
