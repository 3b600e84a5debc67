import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apis.crds.device import DeviceType
from apis.errors import AnnotationError
from apis.extension import hints, names
from apis.extension.hints import AllocateStrategy, DeviceHint, ExclusivePolicy, JointAllocate, JointScope, TopologyScope
from apis.k8s.labels import LabelSelector


def test_decode_full_hint() -> None:
    text = (
        '{"gpu":{"requiredTopologyScope":"PCIe","exclusivePolicy":"PCIeLevel"},'
        '"rdma":{"selector":{"matchLabels":{"type":"fast"}},"vfSelector":{"matchLabels":{"type":"general"}},'
        '"allocateStrategy":"RequestsAsCount"}}'
    )
    got = hints.decode_hints(text)
    assert got[DeviceType.GPU] == DeviceHint(
        required_topology_scope=TopologyScope.PCIE, exclusive_policy=ExclusivePolicy.PCIE_LEVEL
    )
    rdma = got[DeviceType.RDMA]
    assert rdma.allocate_strategy is AllocateStrategy.REQUESTS_AS_COUNT
    assert rdma.selector is not None and rdma.selector.matches({"type": "fast"})
    assert rdma.vf_selector is not None and not rdma.vf_selector.matches({"type": "other"})
    assert hints.decode_hints(hints.encode_hints(got)) == got


def test_joint_allocate() -> None:
    joint = hints.decode_joint_allocate('{"deviceTypes":["gpu","rdma"],"requiredScope":"SamePCIe"}')
    assert joint == JointAllocate((DeviceType.GPU, DeviceType.RDMA), JointScope.SAME_PCIE)
    assert joint.primary is DeviceType.GPU
    assert hints.decode_joint_allocate(hints.encode_joint_allocate(joint)) == joint


def test_a_hint_for_a_type_tessera_does_not_allocate_is_left_out() -> None:
    assert hints.decode_hints('{"npu":{"allocateStrategy":"ApplyForAll"},"gpu":{}}') == {DeviceType.GPU: DeviceHint()}


def test_from_annotations() -> None:
    ann = {names.ANNOTATION_DEVICE_ALLOCATE_HINT: '{"gpu":{"requiredTopologyScope":"NUMANode"}}'}
    assert hints.hints_from_annotations(ann)[DeviceType.GPU].required_topology_scope is TopologyScope.NUMA_NODE
    assert hints.hints_from_annotations({}) == {}
    assert hints.joint_allocate_from_annotations({}) is None


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{", "not valid JSON"),
        ('{"gpu":{"requiredTopologyScope":"Rack"}}', "'Rack' is not one of Device, PCIe, NUMANode, Node"),
        ('{"gpu":{"exclusivePolicy":"Host"}}', "gpu.exclusivePolicy"),
        ('{"gpu":{"allocateStrategy":1}}', "gpu.allocateStrategy"),
        ('{"gpu":{"selector":{"matchExpressions":[{"key":"a","operator":"Near"}]}}}', "unknown operator 'Near'"),
        ('{"gpu":[]}', "expected an object"),
    ],
)
def test_bad_hints(text: str, reason: str) -> None:
    with pytest.raises(AnnotationError) as e:
        hints.decode_hints(text)
    assert reason in str(e.value)


@pytest.mark.parametrize(
    ("text", "types", "scope"),
    [
        ('{"deviceTypes":["gpu"]}', ("gpu",), None),
        ('{"deviceTypes":["gpu","gpu","rdma"]}', ("gpu", "rdma"), None),
        ('{"deviceTypes":["gpu","xpu","rdma"],"requiredScope":"SamePCIe"}', ("gpu", "rdma"), JointScope.SAME_PCIE),
        ('{"deviceTypes":["gpu","rdma"],"requiredScope":"SameRack"}', ("gpu", "rdma"), None),
        ("{}", (), None),
    ],
    ids=["one-type", "repeated-type", "unknown-type", "unknown-scope", "empty"],
)
def test_joint_allocate_is_filtered_as_koordinator_does_not_refused(
    text: str, types: tuple[str, ...], scope: JointScope | None
) -> None:
    joint = hints.decode_joint_allocate(text)
    assert tuple(t.value for t in joint.device_types) == types and joint.required_scope is scope


@pytest.mark.parametrize("text", ["[]", '{"deviceTypes":"gpu"}', '{"deviceTypes":[1]}'])
def test_bad_joint_allocate(text: str) -> None:
    with pytest.raises(AnnotationError):
        hints.decode_joint_allocate(text)


@given(st.text(max_size=80))
def test_arbitrary_text_raises_only_annotation_error(text: str) -> None:
    for decode in (hints.decode_hints, hints.decode_joint_allocate):
        with contextlib.suppress(AnnotationError):
            decode(text)


def test_label_selector_round_trip() -> None:
    sel = LabelSelector.from_dict({"matchLabels": {"a": "b"}, "matchExpressions": [{"key": "c", "operator": "Exists"}]})
    assert LabelSelector.from_dict(sel.to_dict()) == sel
