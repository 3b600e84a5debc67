import contextlib
import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apis.crds.device import Device, DeviceType
from apis.errors import ValidationError
from apis.extension import names
from apis.k8s.meta import ObjectMeta
from tests.unit.apis.strategies import devices

GI = 2**30
SAMPLE = {
    "apiVersion": "scheduling.koordinator.sh/v1alpha1",
    "kind": "Device",
    "metadata": {"name": "node-1", "labels": {names.LABEL_GPU_MODEL: "A100-SXM4-80GB"}},
    "spec": {
        "devices": [
            {
                "type": "rdma",
                "id": "0000:1f:00.0",
                "minor": 0,
                "health": True,
                "resources": {names.RDMA: "100"},
                "topology": {"socketID": 0, "nodeID": 0, "pcieID": "pci0000:1d", "busID": "0000:1f:00.0"},
                "vfGroups": [{"labels": {"type": "general"}, "vfs": [{"minor": 0, "busID": "0000:1f:00.2"}]}],
            },
            {
                "type": "gpu",
                "id": "GPU-1",
                "minor": 1,
                "health": True,
                "resources": {names.GPU_CORE: "100", names.GPU_MEMORY: "80Gi", names.GPU_MEMORY_RATIO: "100"},
                "topology": {"socketID": 0, "nodeID": 0, "pcieID": "pci0000:1d", "busID": "0000:20:00.0"},
            },
            {
                "type": "gpu",
                "id": "GPU-0",
                "minor": 0,
                "health": False,
                "conditions": [
                    {
                        "type": "Healthy",
                        "status": "False",
                        "reason": "Xid79",
                        "message": "fell off the bus",
                        "lastTransitionTime": "2024-01-02T03:04:05Z",
                    }
                ],
            },
        ]
    },
}


def test_parses_and_sorts_by_type_then_minor() -> None:
    dev = Device.from_dict(SAMPLE)
    assert [(d.type, d.minor) for d in dev.devices] == [(DeviceType.GPU, 0), (DeviceType.GPU, 1), (DeviceType.RDMA, 0)]
    gpu1 = dev.devices[1]
    assert gpu1.resources[names.GPU_MEMORY] == 80 * GI
    assert gpu1.topology is not None and gpu1.topology.pcie_id == "pci0000:1d"
    assert dev.devices[0].conditions[0].reason == "Xid79"
    assert dev.devices[2].vf_groups[0].vfs[0].bus_id == "0000:1f:00.2"
    assert dev.node_name == "node-1"


def test_to_dict_is_the_kubernetes_shape() -> None:
    out = Device.from_dict(SAMPLE).to_dict()
    assert out["apiVersion"] == "scheduling.koordinator.sh/v1alpha1" and out["kind"] == "Device"
    assert [d["minor"] for d in out["spec"]["devices"]] == [0, 1, 0]
    assert out["spec"]["devices"][1]["resources"][names.GPU_MEMORY] == "80Gi"
    assert Device.from_dict(out) == Device.from_dict(SAMPLE)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d["spec"]["devices"][0].update(health="yes"), "spec.devices[0].health"),
        (lambda d: d["spec"]["devices"][1]["resources"].update({names.GPU_CORE: "lots"}), "spec.devices[1].resources"),
        (lambda d: d["spec"].update(devices={}), "spec.devices"),
        (lambda d: d["metadata"].pop("name"), "metadata.name"),
        (lambda d: d["spec"]["devices"][2]["conditions"][0].update(status="maybe"), "conditions[0].status"),
    ],
)
def test_malformed_devices_name_the_field(mutate: Callable[[dict[str, Any]], object], field: str) -> None:
    doc = copy.deepcopy(SAMPLE)
    mutate(doc)
    with pytest.raises(ValidationError) as e:
        Device.from_dict(doc)
    assert field in str(e.value)


@pytest.mark.parametrize(
    ("mutate", "ignored"),
    [
        (lambda d: d["spec"]["devices"][0].update(type="npu"), "spec.devices[0]: device type 'npu' is not one"),
        (lambda d: d["spec"]["devices"][0].pop("type"), "spec.devices[0]: device type '' is not one"),
        (lambda d: d["spec"]["devices"][0].pop("minor"), "spec.devices[0]: rdma device has no minor"),
        (lambda d: d["spec"]["devices"][1].update(minor=-1), "spec.devices[1]: GPU minor -1 is negative"),
        (lambda d: d["spec"]["devices"][2].update(minor=1), "spec.devices[1]: gpu minor 1 is listed more than once"),
    ],
    ids=["unknown-type", "no-type", "no-minor", "negative-gpu-minor", "duplicate"],
)
def test_what_koordinators_schema_admits_but_tessera_cannot_allocate_is_left_out(
    mutate: Callable[[dict[str, Any]], object], ignored: str
) -> None:
    """Never a refusal of the whole Device: the entry is left out and named, the rest is kept."""
    doc = copy.deepcopy(SAMPLE)
    mutate(doc)
    dev = Device.from_dict(doc)
    assert any(i.startswith(ignored) for i in dev.ignored), dev.ignored
    assert 1 <= len(dev.devices) < 3
    assert Device.from_dict(dev.to_dict()).ignored == ()


def test_koordlets_rdma_vfs_with_minor_minus_one_are_told_apart_by_bus_id() -> None:
    """koordlet writes `minor: -1` for every VF (and `socketID: -1`): read, kept, and a VF listed
    twice is kept once."""
    doc = copy.deepcopy(SAMPLE)
    rdma = doc["spec"]["devices"][0]
    rdma["topology"]["socketID"] = -1
    rdma["vfGroups"] = [
        {"vfs": [{"minor": -1, "busID": "0000:1f:00.2"}, {"minor": -1, "busID": "0000:1f:00.3"}]},
        {"vfs": [{"minor": -1, "busID": "0000:1f:00.2"}, {"busID": "0000:1f:00.4"}]},
    ]
    dev = Device.from_dict(doc)
    nic = dev.of_type(DeviceType.RDMA)[0]
    assert [(vf.minor, vf.bus_id) for g in nic.vf_groups for vf in g.vfs] == [
        (-1, "0000:1f:00.2"),
        (-1, "0000:1f:00.3"),
        (0, "0000:1f:00.4"),
    ]
    assert dev.ignored == ("spec.devices[0].vfGroups[1].vfs[0]: virtual function 0000:1f:00.2 is listed twice",)
    assert nic.topology is not None and nic.topology.socket_id == -1


@given(devices())
def test_to_dict_from_dict_is_identity(dev: Device) -> None:
    assert Device.from_dict(dev.to_dict()) == dev


@given(
    st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(-3, 300), st.text(max_size=6)),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(
                st.sampled_from(
                    [
                        "metadata",
                        "name",
                        "spec",
                        "devices",
                        "type",
                        "minor",
                        "health",
                        "resources",
                        "topology",
                        "vfGroups",
                        "vfs",
                        "conditions",
                        "status",
                        "gpu",
                        "labels",
                    ]
                ),
                inner,
                max_size=4,
            ),
        ),
        max_leaves=20,
    )
)
def test_arbitrary_input_raises_only_validation_error(doc: object) -> None:
    with contextlib.suppress(ValidationError):
        Device.from_dict(doc)


# --- NVLink: Tessera's annotation on the Device ----------------------------------------------------
def _with_nvlink(value: str) -> dict[str, Any]:
    doc = copy.deepcopy(SAMPLE)
    doc["metadata"]["annotations"] = {names.ANNOTATION_GPU_NVLINK_PEERS: value, "other/key": "kept"}
    return doc


def test_nvlink_annotation_is_parsed_into_the_device_and_written_back() -> None:
    dev = Device.from_dict(_with_nvlink('{"0":[1],"1":[0]}'))
    assert dev.nvlink == {0: frozenset({1}), 1: frozenset({0})}
    assert dict(dev.meta.annotations) == {"other/key": "kept"}  # the field owns the annotation
    out = dev.to_dict()
    written = {names.ANNOTATION_GPU_NVLINK_PEERS: '{"0":[1],"1":[0]}', "other/key": "kept"}
    assert out["metadata"]["annotations"] == written
    assert Device.from_dict(out) == dev


def test_without_nvlink_no_annotation_is_written() -> None:
    dev = Device.from_dict(_with_nvlink("{}"))
    assert dev.nvlink == {}
    assert names.ANNOTATION_GPU_NVLINK_PEERS not in dev.to_dict()["metadata"]["annotations"]
    assert "annotations" not in Device.from_dict(SAMPLE).to_dict()["metadata"]


def test_nvlinked_means_every_two_gpus_are_joined() -> None:
    dev = Device(meta=ObjectMeta(name="n"), nvlink={0: frozenset({1, 2}), 1: frozenset({0}), 2: frozenset({0})})
    assert dev.nvlinked([0, 1]) and dev.nvlinked([0, 2]) and dev.nvlinked([3])
    assert not dev.nvlinked([1, 2]) and not dev.nvlinked([0, 1, 2])


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("[", "not valid JSON"),
        ("[[0, 1]]", "must be a JSON object"),
        ('{"a": [1]}', "key 'a' is not a GPU minor"),
        ('{"7": []}', "GPU 7 is not a GPU of this Device"),
        ('{"0": 1}', "peers of GPU 0 must be a list"),
        ('{"0": [true]}', "peers of GPU 0 must be a list"),
        ('{"0": [0]}', "GPU 0 lists 0"),
        ('{"0": [5]}', "GPU 0 lists 5"),
        ('{"0": [1]}', "GPU 1 does not list 0"),
    ],
    ids=["json", "not-object", "key", "unknown-gpu", "not-list", "bool", "self", "unknown-peer", "one-sided"],
)
def test_malformed_nvlink_annotation_names_it(value: str, reason: str) -> None:
    with pytest.raises(ValidationError) as e:
        Device.from_dict(_with_nvlink(value))
    assert names.ANNOTATION_GPU_NVLINK_PEERS in str(e.value) and reason in str(e.value)


def test_nvlink_links_of_a_gpu_left_out_are_dropped_not_an_error() -> None:
    doc = copy.deepcopy(SAMPLE)
    doc["spec"]["devices"].append({"type": "gpu", "minor": 2, "health": True})
    doc["spec"]["devices"].append({"type": "gpu", "minor": 2, "health": True})
    doc["metadata"]["annotations"] = {names.ANNOTATION_GPU_NVLINK_PEERS: '{"0":[1,2],"1":[0,2],"2":[0,1]}'}
    dev = Device.from_dict(doc)
    assert [d.minor for d in dev.of_type(DeviceType.GPU)] == [0, 1]
    assert dev.nvlink == {0: frozenset({1}), 1: frozenset({0})}
