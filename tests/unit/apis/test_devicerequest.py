"""Every rule of protocol.md's "Request rules", one test (or parameter set) each."""

import pytest

from apis.crds.device import DeviceType
from apis.errors import InvalidRequestError
from apis.extension import names
from apis.extension.devicerequest import DeviceRequest, device_requests, gpu_allocation_resources, pod_device_requests
from apis.k8s.core import Pod

CORE, MEM, RATIO, SHARED = names.GPU_CORE, names.GPU_MEMORY, names.GPU_MEMORY_RATIO, names.GPU_SHARED
GI = 2**30


def gpu(requests: dict[str, int]) -> DeviceRequest:
    return device_requests(requests)[DeviceType.GPU]


def rejected(requests: dict[str, int]) -> InvalidRequestError:
    with pytest.raises(InvalidRequestError) as e:
        device_requests(requests, obj="default/p")
    assert str(e.value).startswith("pod default/p: invalid device request: ")
    return e.value


# --- allowed combinations -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("requests", "count", "per_device", "shared"),
    [
        ({names.NVIDIA_GPU: 2}, 2, {CORE: 100, RATIO: 100}, False),
        ({names.AMD_GPU: 1}, 1, {CORE: 100, RATIO: 100}, False),
        ({names.KOORD_GPU: 50}, 1, {CORE: 50, RATIO: 50}, True),
        ({names.KOORD_GPU: 200}, 2, {CORE: 100, RATIO: 100}, False),
        ({MEM: 8 * GI}, 1, {MEM: 8 * GI}, True),
        ({RATIO: 25}, 1, {RATIO: 25}, True),
        ({RATIO: 300}, 3, {RATIO: 100}, False),
        ({CORE: 50, MEM: 8 * GI}, 1, {CORE: 50, MEM: 8 * GI}, True),
        ({CORE: 100, MEM: 80 * GI}, 1, {CORE: 100, MEM: 80 * GI}, False),
        ({CORE: 50, RATIO: 50}, 1, {CORE: 50, RATIO: 50}, True),
        ({CORE: 200, RATIO: 200}, 2, {CORE: 100, RATIO: 100}, False),
        ({CORE: 100, RATIO: 200}, 2, {CORE: 50, RATIO: 100}, False),
        ({MEM: 16 * GI, SHARED: 2}, 2, {MEM: 8 * GI}, True),
        ({RATIO: 100, SHARED: 2}, 2, {RATIO: 50}, True),
        ({CORE: 100, MEM: 10 * GI, SHARED: 2}, 2, {CORE: 50, MEM: 5 * GI}, True),
        ({CORE: 100, RATIO: 100, SHARED: 4}, 4, {CORE: 25, RATIO: 25}, True),
        ({CORE: 200, RATIO: 200, SHARED: 2}, 2, {CORE: 100, RATIO: 100}, False),
    ],
    ids=lambda v: str(v) if not isinstance(v, dict) else ",".join(f"{k.split('/')[-1]}={x}" for k, x in v.items()),
)
def test_allowed_combinations(requests: dict[str, int], count: int, per_device: dict[str, int], shared: bool) -> None:
    req = gpu(requests)
    assert (req.count, dict(req.per_device), req.shared) == (count, per_device, shared)


def test_no_device_resources_means_no_requests() -> None:
    assert device_requests({"cpu": 1000, "memory": GI}) == {}
    assert device_requests({names.GPU_CORE: 0, names.NVIDIA_GPU: 0}) == {}


# --- forbidden combinations -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("requests", "named"),
    [
        ({names.NVIDIA_GPU: 1, CORE: 50}, {names.NVIDIA_GPU, CORE}),
        ({names.NVIDIA_GPU: 1, names.KOORD_GPU: 50}, {names.NVIDIA_GPU, names.KOORD_GPU}),
        ({names.NVIDIA_GPU: 1, names.AMD_GPU: 1}, {names.NVIDIA_GPU, names.AMD_GPU}),
        ({names.KOORD_GPU: 50, RATIO: 50}, {names.KOORD_GPU, RATIO}),
        ({CORE: 50}, {CORE}),
        ({MEM: GI, RATIO: 50}, {MEM, RATIO}),
        ({CORE: 50, MEM: GI, RATIO: 50}, {MEM, RATIO}),
        ({SHARED: 2}, {SHARED}),
        ({names.NVIDIA_GPU: 1, SHARED: 2}, {names.NVIDIA_GPU, SHARED}),
        ({names.KOORD_GPU: 100, SHARED: 2}, {names.KOORD_GPU, SHARED}),
    ],
)
def test_forbidden_combinations_name_the_resources(requests: dict[str, int], named: set[str]) -> None:
    err = rejected(requests)
    assert set(err.resources) == named
    for name in named:
        assert name in str(err)


# --- percent values -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "requests",
    [{CORE: 150, RATIO: 200}, {CORE: 100, RATIO: 150}, {names.KOORD_GPU: 101}, {names.RDMA: 150}, {names.FPGA: 250}],
)
def test_percent_values_must_be_at_most_100_or_multiple_of_100(requests: dict[str, int]) -> None:
    err = rejected(requests)
    assert "must be <= 100 or a multiple of 100" in str(err)


def test_negative_amounts_are_rejected() -> None:
    err = rejected({CORE: -50, RATIO: 50})
    assert CORE in err.resources


# --- gpu.shared -----------------------------------------------------------------------------------
def test_shared_amounts_must_be_multiples_of_shared() -> None:
    err = rejected({CORE: 50, RATIO: 50, SHARED: 3})
    assert "multiple of koordinator.sh/gpu.shared=3" in str(err)


def test_shared_per_gpu_share_at_most_100() -> None:
    err = rejected({CORE: 400, RATIO: 400, SHARED: 2})
    assert "200 per GPU" in str(err)


def test_shared_memory_bytes_round_up() -> None:
    assert gpu({MEM: 10, SHARED: 3}).per_device[MEM] == 4


# --- per-GPU split --------------------------------------------------------------------------------
def test_count_comes_from_ratio_without_shared() -> None:
    assert gpu({CORE: 400, RATIO: 400}).count == 4


def test_core_above_100_needs_a_count() -> None:
    err = rejected({CORE: 200, MEM: 16 * GI})
    assert "200 per GPU" in str(err) and RATIO in str(err)


def test_core_must_split_evenly() -> None:
    err = rejected({CORE: 75, RATIO: 200})
    assert "cannot be split evenly over 2 GPUs" in str(err)


def test_shared_request_over_several_gpus_needs_gpu_shared() -> None:
    # ratio > 100 can only mean whole GPUs; a fractional share of several GPUs needs gpu.shared
    assert not gpu({CORE: 100, RATIO: 200}).shared
    err = rejected({RATIO: 150})
    assert RATIO in err.resources
    spread = gpu({RATIO: 60, SHARED: 3})
    assert (spread.count, spread.per_device[RATIO], spread.shared) == (3, 20, True)


# --- RDMA / FPGA ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("amount", "count", "per", "shared"),
    [(1, 1, 1, True), (100, 1, 100, False), (200, 2, 100, False), (50, 1, 50, True)],
)
def test_rdma_and_fpga(amount: int, count: int, per: int, shared: bool) -> None:
    reqs = device_requests({names.RDMA: amount, names.FPGA: amount})
    for dtype, name in ((DeviceType.RDMA, names.RDMA), (DeviceType.FPGA, names.FPGA)):
        assert (reqs[dtype].count, reqs[dtype].per_device[name], reqs[dtype].shared) == (count, per, shared)


# --- both memory forms after allocation -----------------------------------------------------------
def test_ratio_fills_bytes() -> None:
    res = gpu_allocation_resources(gpu({CORE: 50, RATIO: 50}), 80 * GI)
    assert res == {CORE: 50, RATIO: 50, MEM: 40 * GI}


def test_bytes_fill_ratio_rounding_down() -> None:
    res = gpu_allocation_resources(gpu({MEM: 30 * GI}), 80 * GI)
    assert res == {RATIO: 37, MEM: 30 * GI}  # 37.5 -> 37


def test_whole_gpu_fills_memory() -> None:
    assert gpu_allocation_resources(gpu({names.NVIDIA_GPU: 1}), 16 * GI) == {CORE: 100, RATIO: 100, MEM: 16 * GI}


# --- from pods ------------------------------------------------------------------------------------
def pod(containers: list[dict[str, str]], init: list[dict[str, str]] | None = None) -> Pod:
    def c(i: int, limits: dict[str, str]) -> dict[str, object]:
        return {"name": f"c{i}", "resources": {"limits": limits}}

    return Pod.from_dict(
        {
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {
                "containers": [c(i, x) for i, x in enumerate(containers)],
                "initContainers": [c(i, x) for i, x in enumerate(init or [])],
            },
        }
    )


def test_pod_sums_containers_and_defaults_requests_from_limits() -> None:
    reqs = pod_device_requests(pod([{names.NVIDIA_GPU: "1"}, {names.NVIDIA_GPU: "2"}]))
    assert reqs[DeviceType.GPU].count == 3


def test_pod_init_containers_take_the_max() -> None:
    reqs = pod_device_requests(pod([{names.NVIDIA_GPU: "1"}], init=[{names.NVIDIA_GPU: "4"}]))
    assert reqs[DeviceType.GPU].count == 4


def test_pod_errors_name_the_pod() -> None:
    with pytest.raises(InvalidRequestError, match="pod ns/p: invalid device request"):
        pod_device_requests(pod([{CORE: "50"}]))
