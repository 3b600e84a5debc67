"""The device type table: complete, Koordinator's, and what every reader derives from it."""

from __future__ import annotations

import dataclasses

import pytest

from apis.crds.device import DeviceType
from apis.extension import devicetypes, names, quotacount
from apis.extension.devicerequest import device_requests
from apis.extension.devicetypes import TABLE, RequestRule, Unit


def test_every_device_type_has_one_row_in_allocation_order() -> None:
    assert [row.type for row in TABLE] == [DeviceType.GPU, DeviceType.RDMA, DeviceType.FPGA]
    assert devicetypes.ALLOCATION_ORDER == (DeviceType.GPU, DeviceType.RDMA, DeviceType.FPGA)
    assert {devicetypes.spec(t).type for t in DeviceType} == set(DeviceType)


def test_a_table_without_a_row_for_a_type_is_refused() -> None:
    with pytest.raises(RuntimeError, match=rf"rows missing for \['{TABLE[-1].type.value}'\]"):
        devicetypes.check(TABLE[:-1])
    with pytest.raises(RuntimeError, match=rf"repeated for \['{TABLE[0].type.value}'\]"):
        devicetypes.check((*TABLE, TABLE[0]))


def _with(row: devicetypes.DeviceTypeSpec) -> tuple[devicetypes.DeviceTypeSpec, ...]:
    """The table with `row` in place of the row of its type."""
    return tuple(row if r.type is row.type else r for r in TABLE)


def test_a_resource_name_in_two_rows_is_refused() -> None:
    fpga = dataclasses.replace(
        devicetypes.spec(DeviceType.FPGA), resources=(devicetypes.DeviceResource(names.RDMA, Unit.PERCENT),)
    )
    with pytest.raises(RuntimeError, match="koordinator.sh/rdma"):
        devicetypes.check(_with(fpga))


def test_a_percent_type_has_exactly_one_percent_resource() -> None:
    bytes_fpga = dataclasses.replace(
        devicetypes.spec(DeviceType.FPGA), resources=(devicetypes.DeviceResource(names.FPGA, Unit.BYTES),)
    )
    with pytest.raises(RuntimeError, match="fpga is asked for in one percent resource"):
        devicetypes.check(_with(bytes_fpga))


def test_the_resource_names_are_koordinators() -> None:
    # Koordinator's pkg/scheduler/plugins/deviceshare/utils.go DeviceResourceNames, less the
    # Huawei NPU names that Tessera does not schedule.
    by_type = {row.type: {r.name for r in row.resources} for row in TABLE}
    assert by_type == {
        DeviceType.GPU: {
            "nvidia.com/gpu",
            "amd.com/gpu",
            "dcu.com/gpu",
            "koordinator.sh/gpu",
            "koordinator.sh/gpu.shared",
            "koordinator.sh/gpu-core",
            "koordinator.sh/gpu-memory",
            "koordinator.sh/gpu-memory-ratio",
        },
        DeviceType.RDMA: {"koordinator.sh/rdma"},
        DeviceType.FPGA: {"koordinator.sh/fpga"},
    }
    # Its DeviceResourceValidators: the percent resources checked as such.
    assert {"koordinator.sh/gpu", "koordinator.sh/rdma", "koordinator.sh/fpga"} <= devicetypes.PERCENT_RESOURCES
    assert devicetypes.WHOLE_GPU_RESOURCES == ("nvidia.com/gpu", "amd.com/gpu", "dcu.com/gpu")


def test_type_of_reads_both_spellings_and_never_guesses() -> None:
    assert devicetypes.type_of("koordinator.sh/gpu-memory") is DeviceType.GPU
    assert devicetypes.type_of("kubernetes.io/rdma") is DeviceType.RDMA
    assert devicetypes.type_of("koordinator.sh/fpga") is DeviceType.FPGA
    for name in ("koordinator.sh/npu", "huawei.com/npu-core", "cpu"):
        with pytest.raises(ValueError, match=f"{name} is not a device resource"):
            devicetypes.type_of(name)


def test_percent_resource_is_only_for_percent_types() -> None:
    assert devicetypes.spec(DeviceType.RDMA).percent_resource == names.RDMA
    assert devicetypes.spec(DeviceType.FPGA).percent_resource == names.FPGA
    with pytest.raises(ValueError, match="gpu is not asked for in one percent resource"):
        _ = devicetypes.spec(DeviceType.GPU).percent_resource


@pytest.mark.parametrize("row", [r for r in TABLE if r.request_rule is RequestRule.PERCENT], ids=lambda r: r.type.value)
def test_each_percent_type_is_read_by_the_percent_rule(row: devicetypes.DeviceTypeSpec) -> None:
    name = row.percent_resource
    assert device_requests({name: 200})[row.type].count == 2
    assert device_requests({name: 1})[row.type].shared
    for old in filter(None, (r.deprecated for r in row.resources)):
        assert device_requests({old: 100})[row.type].per_device == {name: 100}


def test_quotas_count_what_the_rows_say() -> None:
    for row in TABLE:
        for r in row.resources:
            for spelling in filter(None, (r.name, r.deprecated)):
                assert quotacount.COUNTS[spelling] == r.counted
    assert set(quotacount.GRANULES) == {names.GPU_CORE, names.GPU_MEMORY_RATIO, names.RDMA, names.FPGA}
