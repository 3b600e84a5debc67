"""What a Device CR gives its Node: sums over healthy devices, the koordinator.sh/gpu rule, labels."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apis.crds.device import Device, DeviceInfo, DeviceType
from apis.errors import ValidationError
from apis.extension import devicetypes, names
from apis.k8s.meta import ObjectMeta
from controller.noderesources.desired import MANAGED_RESOURCES, DeviceResources, from_device
from tests.unit.controller.noderesources.devices import NVIDIA_LABELS, GiB, make_device, make_gpu


def test_no_device_gives_nothing() -> None:
    assert from_device(None) == DeviceResources()


def test_a_healthy_8_gpu_node_with_4_nics() -> None:
    got = from_device(make_device(gpus=8, rdma=4))
    assert got.resources == {
        names.GPU_CORE: 800,
        names.GPU_MEMORY: 640 * GiB,
        names.GPU_MEMORY_RATIO: 800,
        names.KOORD_GPU: 800,
        names.RDMA: 400,
    }
    assert got.labels == NVIDIA_LABELS
    assert (got.healthy_gpus, got.healthy_rdma) == (8, 4)


def test_unhealthy_devices_do_not_count() -> None:
    got = from_device(make_device(gpus=8, unhealthy=(3, 5), rdma=2, unhealthy_rdma=(1,)))
    assert got.resources[names.GPU_CORE] == 600
    assert got.resources[names.GPU_MEMORY] == 480 * GiB
    assert got.resources[names.GPU_MEMORY_RATIO] == 600
    assert got.resources[names.KOORD_GPU] == 600
    assert got.resources[names.RDMA] == 100


def test_nothing_healthy_gives_no_resources_at_all_not_zeros() -> None:
    got = from_device(make_device(gpus=2, unhealthy=(0, 1), rdma=1, unhealthy_rdma=(0,)))
    assert got.resources == {}
    assert got.labels == NVIDIA_LABELS  # the hardware is still what it is


def test_rdma_only_node() -> None:
    assert from_device(make_device(gpus=0, rdma=2, labels={})).resources == {names.RDMA: 200}


def test_gpus_of_different_sizes_sum_their_memory() -> None:
    device = Device(ObjectMeta(name="n1"), (make_gpu(0, memory=16 * GiB), make_gpu(1, memory=80 * GiB)))
    assert from_device(device).resources[names.GPU_MEMORY] == 96 * GiB


@pytest.mark.parametrize(
    ("vendor", "koord_gpu"),
    [("nvidia", True), ("NVIDIA", True), (None, True), ("amd", False), ("hygon", False)],
    ids=["nvidia", "upper-case", "unlabelled", "amd", "hygon"],
)
def test_koordinator_gpu_only_for_nvidia_or_unlabelled(vendor: str | None, koord_gpu: bool) -> None:
    labels = {} if vendor is None else {names.LABEL_GPU_VENDOR: vendor}
    got = from_device(make_device(gpus=2, labels=labels))
    assert (names.KOORD_GPU in got.resources) is koord_gpu
    assert got.resources[names.GPU_CORE] == 200


def test_only_the_gpu_labels_are_copied() -> None:
    labels = {**NVIDIA_LABELS, names.LABEL_SIMULATED: "true", "team": "ml"}
    assert from_device(make_device(labels=labels)).labels == NVIDIA_LABELS


def test_a_missing_label_is_absent() -> None:
    labels = {names.LABEL_GPU_VENDOR: "nvidia"}
    assert from_device(make_device(labels=labels)).labels == labels


def test_other_resources_on_a_device_are_not_summed() -> None:
    gpu = make_gpu(0)
    odd = DeviceInfo(DeviceType.GPU, 0, health=True, resources={**gpu.resources, names.FPGA: 100, "example.com/x": 1})
    assert set(from_device(Device(ObjectMeta(name="n1"), (odd,))).resources) <= set(MANAGED_RESOURCES)


@pytest.mark.parametrize(
    ("resources", "field", "got"),
    [
        ({names.GPU_CORE: 100, names.GPU_MEMORY_RATIO: 100}, names.GPU_MEMORY, "got nothing"),
        ({names.GPU_CORE: 0, names.GPU_MEMORY: GiB, names.GPU_MEMORY_RATIO: 100}, names.GPU_CORE, "got 0"),
        ({names.GPU_CORE: 100, names.GPU_MEMORY: GiB, names.GPU_MEMORY_RATIO: -100}, names.GPU_MEMORY_RATIO, "-100"),
    ],
    ids=["missing-memory", "zero-core", "negative-ratio"],
)
def test_a_healthy_gpu_that_does_not_say_what_it_offers_is_refused(
    resources: dict[str, int], field: str, got: str
) -> None:
    bad = DeviceInfo(DeviceType.GPU, 3, health=True, resources=resources)
    device = Device(ObjectMeta(name="gpu-7"), (make_gpu(0), bad))
    with pytest.raises(ValidationError) as caught:
        from_device(device)
    assert caught.value.field == f"spec.devices[type=gpu,minor=3].resources[{field}]"
    assert "device gpu-7" in str(caught.value)
    assert got in str(caught.value)


def test_an_unhealthy_gpu_without_resources_is_fine() -> None:
    assert from_device(make_device(gpus=1, unhealthy=(0,))).resources == {}


@given(st.lists(st.tuples(st.booleans(), st.integers(min_value=1, max_value=200 * GiB)), max_size=16))
def test_sums_match_the_healthy_gpus(gpus: list[tuple[bool, int]]) -> None:
    device = Device(ObjectMeta(name="n1"), tuple(make_gpu(i, healthy=h, memory=m) for i, (h, m) in enumerate(gpus)))
    got = from_device(device).resources
    healthy = [m for h, m in gpus if h]
    if not healthy:
        assert got == {}
        return
    assert got[names.GPU_CORE] == got[names.KOORD_GPU] == got[names.GPU_MEMORY_RATIO] == 100 * len(healthy)
    assert got[names.GPU_MEMORY] == sum(healthy)


def test_the_controller_publishes_and_owns_exactly_what_the_device_type_table_says() -> None:
    owned = [n for row in devicetypes.TABLE for n in row.allocatable.names]
    assert (
        list(MANAGED_RESOURCES)
        == owned
        == [
            names.GPU_CORE,
            names.GPU_MEMORY,
            names.GPU_MEMORY_RATIO,
            names.KOORD_GPU,
            names.RDMA,
        ]
    )


def test_fpgas_publish_nothing_as_koordinators_manager() -> None:
    # Koordinator's slo-controller has device resource plugins for GPUs and RDMA only.
    fpga = DeviceInfo(DeviceType.FPGA, 0, id="fpga-0", health=True, resources={names.FPGA: 100})
    assert from_device(Device(ObjectMeta(name="n1"), (fpga,))).resources == {}
