"""How each device resource spelling counts in quotas (`apis.extension.quotacount`)."""

from __future__ import annotations

import pytest

from apis.extension import names, quotacount

CORE, RATIO, MEMORY = names.GPU_CORE, names.GPU_MEMORY_RATIO, names.GPU_MEMORY
GI = 1 << 30


@pytest.mark.parametrize(
    ("asks", "counts"),
    [
        ({names.NVIDIA_GPU: 2}, {CORE: 200, RATIO: 200}),
        ({names.AMD_GPU: 1}, {CORE: 100, RATIO: 100}),
        ({names.DCU_GPU: 3}, {CORE: 300, RATIO: 300}),
        ({names.KOORD_GPU: 100}, {CORE: 100, RATIO: 100}),  # percent of a GPU: one GPU, not a hundred
        ({names.KOORD_GPU: 50}, {CORE: 50, RATIO: 50}),
        ({names.DEPRECATED_KOORD_GPU: 100}, {CORE: 100, RATIO: 100}),
        ({CORE: 50, RATIO: 50}, {CORE: 50, RATIO: 50}),
        ({names.DEPRECATED_GPU_CORE: 50, names.DEPRECATED_GPU_MEMORY_RATIO: 50}, {CORE: 50, RATIO: 50}),
        ({RATIO: 200, names.GPU_SHARED: 2}, {RATIO: 200}),
        ({names.RDMA: 1}, {names.RDMA: 1}),
        ({names.DEPRECATED_FPGA: 100}, {names.FPGA: 100}),
        ({"cpu": 4000, "memory": GI}, {"cpu": 4000, "memory": GI}),
    ],
    ids=lambda v: ",".join(f"{k}={a}" for k, a in v.items()),
)
def test_each_spelling_counts_as_deviceshare_normalises_it(asks: dict[str, int], counts: dict[str, int]) -> None:
    assert quotacount.pod_charge(asks) == counts
    assert quotacount.counted(asks) == counts


def test_spellings_of_one_counted_name_add_up_and_zeros_stay_in_limits() -> None:
    assert quotacount.counted({names.NVIDIA_GPU: 2, CORE: 100}) == {CORE: 300, RATIO: 200}
    assert quotacount.counted({names.NVIDIA_GPU: 0}) == {CORE: 0, RATIO: 0}  # a max of none limits
    assert quotacount.pod_charge({names.NVIDIA_GPU: 0, "cpu": 1}) == {"cpu": 1}


def test_memory_in_bytes_is_counted_as_the_ratio_it_takes() -> None:
    eighty = 80 * GI
    # Estimated against the cluster's smallest GPU, rounded up: never less than it will take.
    assert quotacount.pod_charge({MEMORY: 8 * GI}, gpu_memory=eighty) == {MEMORY: 8 * GI, RATIO: 10}
    assert quotacount.pod_charge({MEMORY: 9 * GI}, gpu_memory=eighty) == {MEMORY: 9 * GI, RATIO: 12}
    assert quotacount.pod_charge({CORE: 50, MEMORY: 40 * GI}, gpu_memory=eighty) == {
        CORE: 50,
        MEMORY: 40 * GI,
        RATIO: 50,
    }
    # Spread over two GPUs: per GPU, and at most a whole GPU each.
    shared = {MEMORY: 200 * GI, names.GPU_SHARED: 2}
    assert quotacount.pod_charge(shared, gpu_memory=eighty) == {MEMORY: 200 * GI, RATIO: 200}
    # No GPU known: a whole GPU per GPU. Once placed: what the allocation gave.
    assert quotacount.pod_charge({MEMORY: GI}) == {MEMORY: GI, RATIO: 100}
    assert quotacount.pod_charge({MEMORY: 8 * GI}, allocated_ratio=5, gpu_memory=eighty) == {MEMORY: 8 * GI, RATIO: 5}
    assert quotacount.estimates_memory_ratio({MEMORY: GI})
    assert not quotacount.estimates_memory_ratio({MEMORY: GI, RATIO: 10})


def test_capacity_counts_each_gpu_once_and_knows_the_smallest() -> None:
    eight = {CORE: 800, RATIO: 800}
    # As our controller and koord-manager publish a node: the same 8 GPUs in three spellings.
    big = {names.NVIDIA_GPU: 8, names.KOORD_GPU: 800, CORE: 800, RATIO: 800, MEMORY: 8 * 80 * GI, "cpu": 64_000}
    small = {names.NVIDIA_GPU: 8}  # a device plugin's node, without Koordinator's names
    capacity = quotacount.capacity_of([big, small, {"cpu": 1000}])
    assert capacity.total == {CORE: 1600, RATIO: 1600, MEMORY: 8 * 80 * GI, "cpu": 65_000}
    assert capacity.gpu_memory == 80 * GI
    assert quotacount.capacity_of([small]).total == eight
    assert quotacount.capacity_of([{**big, MEMORY: 8 * 40 * GI}, big]).gpu_memory == 40 * GI
    assert quotacount.capacity_of([]).gpu_memory == 0


def test_percent_names_are_shared_out_in_whole_devices() -> None:
    assert quotacount.granule(CORE) == quotacount.granule(RATIO) == 100
    assert quotacount.granule(names.RDMA) == 100
    assert quotacount.granule("cpu") == quotacount.granule(MEMORY) == 1
