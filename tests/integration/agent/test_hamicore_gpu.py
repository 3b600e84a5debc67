"""HAMi-core really enforces the share our GPU hook writes: a CUDA program run with the hook's
variables (and preload) sees its GPU's memory as the share and cannot allocate past it.

Runs only where there is a real GPU and the HAMi-core library sits where koordlet's default puts
it (`/usr/local/vgpu/libvgpu.so`, as HAMi's daemon installs it); skipped, saying why, elsewhere.
No registry ships the library: build it from Project-HAMi/HAMi-core (its build.sh) on a GPU
machine. The program talks to the driver through ctypes, so it needs no CUDA toolkit.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pynvml
import pytest

from agent.hooks import hamicore
from apis.extension import names
from apis.extension.allocation import DeviceAllocation

GiB = 2**30
#: The share: 4 GiB of GPU 0 and half its compute.
LIMIT = 4 * GiB

PROGRAM = """
import ctypes, json
cuda = ctypes.CDLL("libcuda.so.1")
assert cuda.cuInit(0) == 0
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev) == 0
free, total = ctypes.c_size_t(), ctypes.c_size_t()
assert cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0
first, second = ctypes.c_uint64(), ctypes.c_uint64()
print(json.dumps({
    "total": total.value,
    "three_gib": cuda.cuMemAlloc_v2(ctypes.byref(first), ctypes.c_size_t(3 << 30)),
    "two_gib_more": cuda.cuMemAlloc_v2(ctypes.byref(second), ctypes.c_size_t(2 << 30)),
}))
"""
CUDA_SUCCESS = 0
CUDA_ERROR_OUT_OF_MEMORY = 2


def gpu0_memory_or_skip() -> int:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        pytest.skip(f"no NVIDIA GPU and driver on this machine (nvmlInit: {e})")
    try:
        return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).total)
    finally:
        pynvml.nvmlShutdown()


def test_a_hami_core_share_is_enforced_on_a_real_gpu() -> None:
    memory = gpu0_memory_or_skip()
    if not hamicore.DEFAULT_LIBRARY.is_file():
        pytest.skip(f"HAMi-core is not installed at {hamicore.DEFAULT_LIBRARY}")
    settings = hamicore.HAMiCore()  # the library fixes its lock directory at /tmp/vgpulock
    ratio = -(-LIMIT * 100 // memory)
    gpu = DeviceAllocation(0, {names.GPU_CORE: 50, names.GPU_MEMORY: LIMIT, names.GPU_MEMORY_RATIO: ratio})
    setup = hamicore.isolation(settings, [gpu], pod="default/half", pod_uid="uid", container="main")
    assert setup is not None
    hamicore.prepare_host(settings, setup, pod="default/half")
    # In a container the host's lock directory is mounted at /tmp/vgpulock: here it is that one.
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM], env=dict(setup.envs), capture_output=True, text=True, timeout=120, check=True
    )
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["total"] == LIMIT, result.stderr
    assert seen["three_gib"] == CUDA_SUCCESS, result.stderr
    assert seen["two_gib_more"] == CUDA_ERROR_OUT_OF_MEMORY, result.stderr
