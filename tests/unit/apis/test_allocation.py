import contextlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apis.crds.device import DeviceType
from apis.errors import AnnotationError
from apis.extension import allocation, names
from apis.extension.allocation import DeviceAllocation, VFAllocation
from tests.unit.apis.strategies import allocations

GI = 2**30


def test_exact_koordinator_shape() -> None:
    value = allocation.encode(
        {
            DeviceType.RDMA: (
                DeviceAllocation(1, {names.RDMA: 1}, "0000:1f:00.0", (VFAllocation(3, "0000:1f:00.4"),)),
            ),
            DeviceType.GPU: (
                DeviceAllocation(
                    3, {names.GPU_MEMORY_RATIO: 50, names.GPU_CORE: 50, names.GPU_MEMORY: 40 * GI}, "GPU-abc"
                ),
            ),
        }
    )
    assert value == (
        '{"gpu":[{"minor":3,"resources":{"koordinator.sh/gpu-core":"50","koordinator.sh/gpu-memory":"40Gi",'
        '"koordinator.sh/gpu-memory-ratio":"50"},"id":"GPU-abc"}],'
        '"rdma":[{"minor":1,"resources":{"koordinator.sh/rdma":"1"},"id":"0000:1f:00.0",'
        '"extension":{"vfs":[{"minor":3,"busID":"0000:1f:00.4"}]}}]}'
    )


def test_reads_what_koordinator_writes() -> None:
    text = json.dumps(
        {
            "gpu": [
                {
                    "minor": 0,
                    "resources": {names.GPU_CORE: "100", names.GPU_MEMORY: "85899345920", names.GPU_MEMORY_RATIO: 100},
                }
            ]
        }
    )
    got = allocation.decode(text)
    assert got[DeviceType.GPU][0].resources == {
        names.GPU_CORE: 100,
        names.GPU_MEMORY: 80 * GI,
        names.GPU_MEMORY_RATIO: 100,
    }


def test_the_joint_allocation_manuals_vf_of_minor_minus_one_round_trips_byte_for_byte() -> None:
    """gpu-and-rdma-joint-allocation.md's annotation as Koordinator writes it: VFs carry koordlet's
    `minor: -1`; a VF of minor 0 has no `minor` key (Go's omitempty)."""
    text = (
        '{"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"100","koordinator.sh/gpu-memory":"23040Mi",'
        '"koordinator.sh/gpu-memory-ratio":"100"}}],"rdma":[{"minor":0,"resources":{"koordinator.sh/rdma":"1"},'
        '"extension":{"vfs":[{"minor":-1,"busID":"0000:01:00.2"}]}}]}'
    )
    decoded = allocation.decode(text)
    assert decoded[DeviceType.RDMA][0].vfs == (VFAllocation(-1, "0000:01:00.2"),)
    assert allocation.encode(decoded) == text
    zero = (
        '{"rdma":[{"minor":1,"resources":{"koordinator.sh/rdma":"1"},"extension":{"vfs":[{"busID":"0000:1f:00.2"}]}}]}'
    )
    assert allocation.decode(zero)[DeviceType.RDMA][0].vfs == (VFAllocation(0, "0000:1f:00.2"),)
    assert allocation.encode(allocation.decode(zero)) == zero


def test_allocations_of_types_tessera_does_not_allocate_are_left_out() -> None:
    """A Koordinator scheduler's NPU allocation holds none of Tessera's devices."""
    decoded = allocation.decode('{"npu":[{"minor":0,"resources":{"huawei.com/npu-core":"2"}}],"gpu":[{"minor":1}]}')
    assert list(decoded) == [DeviceType.GPU]


def test_the_gpu_shared_resource_template_is_kept() -> None:
    text = (
        '{"gpu":[{"minor":2,"resources":{"koordinator.sh/gpu-core":"50"},'
        '"extension":{"gpuSharedResourceTemplate":"half"}}]}'
    )
    decoded = allocation.decode(text)
    assert decoded[DeviceType.GPU][0].gpu_shared_resource_template == "half"
    assert allocation.encode(decoded) == text


def test_absent_annotation_means_no_devices() -> None:
    assert allocation.from_pod_annotations({}) == {}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("not json", "not valid JSON"),
        ("[]", "expected a JSON object"),
        ('{"gpu":{}}', "expected a list"),
        ('{"gpu":[{"minor":1,"extension":{"gpuSharedResourceTemplate":3}}]}', "gpuSharedResourceTemplate"),
        ('{"gpu":[{"minor":-1}]}', "gpu[0].minor"),
        ('{"gpu":[{"minor":"1"}]}', "gpu[0].minor"),
        (
            '{"gpu":[{"minor":1,"resources":{"koordinator.sh/gpu-core":"lots"}}]}',
            "gpu[0].resources[koordinator.sh/gpu-core]",
        ),
        ('{"gpu":[{"minor":1},{"minor":1}]}', "the same minor is listed twice"),
        ('{"rdma":[{"minor":1,"extension":{"vfs":[{"minor":"x"}]}}]}', "extension.vfs[0]"),
    ],
)
def test_malformed_values_give_precise_errors(text: str, reason: str) -> None:
    with pytest.raises(AnnotationError) as e:
        allocation.decode(text, obj="pod default/a")
    assert reason in str(e.value)
    assert e.value.key == names.ANNOTATION_DEVICE_ALLOCATED
    assert "pod default/a" in str(e.value)


@given(allocations())
def test_encode_decode_is_identity(allocs: dict[DeviceType, tuple[DeviceAllocation, ...]]) -> None:
    text = allocation.encode(allocs)
    assert allocation.decode(text) == allocs
    assert allocation.encode(allocation.decode(text)) == text


@given(
    st.one_of(
        st.text(max_size=60),
        st.recursive(
            st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5)),
            lambda inner: st.one_of(
                st.lists(inner, max_size=3),
                st.dictionaries(
                    st.sampled_from(
                        ["gpu", "rdma", "minor", "resources", "id", "extension", "vfs", "busID", names.GPU_CORE]
                    ),
                    inner,
                    max_size=3,
                ),
            ),
            max_leaves=12,
        ).map(json.dumps),
    )
)
def test_arbitrary_input_raises_only_annotation_error(text: str) -> None:
    with contextlib.suppress(AnnotationError):
        allocation.decode(text)
