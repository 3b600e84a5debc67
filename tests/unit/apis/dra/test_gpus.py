"""The two protocols' holdings on one ledger: Koordinator pods' GPU shares as DRA devices and back."""

from __future__ import annotations

from fractions import Fraction

from apis.dra import gpus
from apis.dra.allocation import AllocationResult, DeviceID
from apis.extension import names
from tests.unit.apis.dra.factories import make_slice

GIB = 2**30
SLICE = make_slice(
    [
        {
            "name": "gpu-0",
            "attributes": {"minor": {"int": 0}},
            "allowMultipleAllocations": True,
            "capacity": {"cores": {"value": "100"}, "memory": {"value": "16Gi"}},
        },
        {"name": "gpu-1", "attributes": {"minor": {"int": 1}}},
        {"name": "gpu-1-mig", "attributes": {"gpu.tessera.dev/minor": {"int": 1}}},
        {"name": "nic", "attributes": {"minor": {"string": "x"}}},
    ],
    driver=gpus.DRIVER,
)


def test_held_by_koordinator_maps_shares_and_wholes() -> None:
    holdings = {
        0: {names.GPU_CORE: 50, names.GPU_MEMORY_RATIO: 25},
        1: {names.GPU_CORE: 10, names.GPU_MEMORY: GIB},
        2: {names.GPU_CORE: 100},  # no DRA device: nothing to hold
        3: {names.GPU_CORE: 0},
    }
    held = gpus.held_by_koordinator(holdings, [SLICE], node="n1")
    gpu0 = DeviceID(gpus.DRIVER, "n1", "gpu-0")
    assert held.consumed(gpu0, "cores") == 50 and held.consumed(gpu0, "memory") == 4 * GIB
    assert held.exclusive == {DeviceID(gpus.DRIVER, "n1", "gpu-1"), DeviceID(gpus.DRIVER, "n1", "gpu-1-mig")}
    assert gpus.held_by_koordinator(holdings, [SLICE], node="n2") == gpus.held_by_koordinator({}, [SLICE], node="n1")


def test_koordinator_usage_counts_claims_as_koordinator_does() -> None:
    allocation = AllocationResult.from_dict(
        {
            "devices": {
                "results": [
                    {
                        "request": "a",
                        "driver": gpus.DRIVER,
                        "pool": "n1",
                        "device": "gpu-0",
                        "shareID": "s",
                        "consumedCapacity": {"cores": "30", "memory": "6Gi"},
                    },
                    {"request": "b", "driver": gpus.DRIVER, "pool": "n1", "device": "gpu-1"},
                    {"request": "c", "driver": gpus.DRIVER, "pool": "n1", "device": "gpu-1-mig", "adminAccess": True},
                    {"request": "d", "driver": "other.io", "pool": "n1", "device": "gpu-0"},
                ]
            }
        }
    )
    usage = gpus.koordinator_usage([allocation], [SLICE], node="n1")
    assert usage == {
        0: {names.GPU_CORE: 30, names.GPU_MEMORY: 6 * GIB, names.GPU_MEMORY_RATIO: 38},  # 37.5 rounded up
        1: {names.GPU_CORE: 100, names.GPU_MEMORY: 0, names.GPU_MEMORY_RATIO: 100},
    }
    assert Fraction(6, 16) * 100 == Fraction(75, 2)
