"""RDMA devices hook over real gRPC on a unix socket, against a sysfs fixture tree."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from agent.hooks import GPUEnvPlugin, RDMADevicesPlugin
from apis.crds.device import DeviceType
from apis.extension import allocation, names
from apis.extension.allocation import DeviceAllocation, VFAllocation
from proto.runtime.v1alpha1 import api_pb2, api_pb2_grpc

Serve = Callable[..., api_pb2_grpc.RuntimeHookServiceStub]
MakeRequest = Callable[..., api_pb2.ContainerResourceHookRequest]

PF = "0000:3b:00.0"
VF1, VF2 = "0000:3b:00.2", "0000:3b:00.3"


def make_node(root: Path, functions: dict[str, str]) -> RDMADevicesPlugin:
    """A node whose RDMA functions (PCI address -> uverbs device) live in fixture trees."""
    sysfs, dev = root / "sys", root / "dev"
    for bdf, verbs in functions.items():
        (sysfs / "bus/pci/devices" / bdf / "infiniband_verbs" / verbs).mkdir(parents=True)
    (dev / "infiniband").mkdir(parents=True)
    for name in ("rdma_cm", *functions.values()):
        (dev / "infiniband" / name).touch()
    return RDMADevicesPlugin(sysfs_root=sysfs, dev_root=dev)


@pytest.fixture
def node(tmp_path: Path) -> RDMADevicesPlugin:
    """A node with one RDMA PF (uverbs0) and two VFs (uverbs2, uverbs3)."""
    return make_node(tmp_path, {PF: "uverbs0", VF1: "uverbs2", VF2: "uverbs3"})


def devices(response: api_pb2.ContainerResourceHookResponse) -> list[tuple[str, str, str]]:
    return [(d.container_path, Path(d.host_path).name, d.permissions) for d in response.container_devices]


def test_physical_function_gets_rdma_cm_and_its_uverbs(
    serve: Serve, container_request: MakeRequest, node: RDMADevicesPlugin
) -> None:
    stub = serve(node)
    response = stub.PreCreateContainerHook(container_request({"rdma": [{"minor": 0, "id": PF}]}))
    assert devices(response) == [
        ("/dev/infiniband/rdma_cm", "rdma_cm", "rw"),
        ("/dev/infiniband/uverbs0", "uverbs0", "rw"),
    ]
    assert not response.container_envs


def test_virtual_functions_get_their_own_uverbs(
    serve: Serve, container_request: MakeRequest, node: RDMADevicesPlugin
) -> None:
    stub = serve(node)
    vfs = {"vfs": [{"minor": 2, "busID": VF1}, {"minor": 3, "busID": VF2}]}
    response = stub.PreCreateContainerHook(container_request({"rdma": [{"minor": 0, "id": PF, "extension": vfs}]}))
    assert [d[0] for d in devices(response)] == [
        "/dev/infiniband/rdma_cm",
        "/dev/infiniband/uverbs2",
        "/dev/infiniband/uverbs3",
    ]


def test_every_nic_of_a_joint_allocation_is_injected(
    serve: Serve, container_request: MakeRequest, tmp_path: Path
) -> None:
    # What DeviceShare writes for GPUs on three PCIe switches: a VF on each switch's NIC, in the
    # order of the annotation (and a whole PF, as `koordinator.sh/rdma: 100` would give).
    nics = {"0000:1f:00.0": "uverbs0", "0000:3f:00.0": "uverbs1", "0000:5f:00.0": "uverbs2"}
    vfs = {"0000:1f:00.1": "uverbs4", "0000:3f:00.1": "uverbs8", "0000:5f:00.1": "uverbs12"}
    stub = serve(make_node(tmp_path, {**nics, **vfs}))
    allocated = allocation.encode(
        {
            DeviceType.RDMA: tuple(
                DeviceAllocation(k, {names.RDMA: 1}, pf, (VFAllocation(0, vf),))
                for k, (pf, vf) in enumerate(zip(nics, vfs, strict=True))
            )
        }
    )
    response = stub.PreCreateContainerHook(container_request(raw_annotation=allocated))
    assert [d[1] for d in devices(response)] == ["rdma_cm", "uverbs4", "uverbs8", "uverbs12"]
    whole = {"rdma": [{"minor": k, "id": pf} for k, pf in enumerate(nics)]}
    response = stub.PreCreateContainerHook(container_request(whole))
    assert [d[1] for d in devices(response)] == ["rdma_cm", "uverbs0", "uverbs1", "uverbs2"]


def test_host_paths_are_under_the_dev_root(
    serve: Serve, container_request: MakeRequest, node: RDMADevicesPlugin, tmp_path: Path
) -> None:
    stub = serve(node)
    response = stub.PreCreateContainerHook(container_request({"rdma": [{"minor": 0, "id": PF}]}))
    assert {d.host_path for d in response.container_devices} == {
        str(tmp_path / "dev/infiniband/rdma_cm"),
        str(tmp_path / "dev/infiniband/uverbs0"),
    }


def test_gpu_and_rdma_plugins_compose(serve: Serve, container_request: MakeRequest, node: RDMADevicesPlugin) -> None:
    stub = serve(GPUEnvPlugin(), node)
    allocated = {"gpu": [{"minor": 1}], "rdma": [{"minor": 0, "id": PF}]}
    response = stub.PreCreateContainerHook(container_request(allocated))
    assert response.container_envs["NVIDIA_VISIBLE_DEVICES"] == "1"
    assert len(response.container_devices) == 2


@pytest.mark.parametrize(
    "allocated", [None, {"gpu": [{"minor": 1}]}, {"rdma": []}], ids=["no-annotation", "gpu-only", "no-nics"]
)
def test_pods_without_rdma_are_left_alone(
    serve: Serve, container_request: MakeRequest, node: RDMADevicesPlugin, allocated: object
) -> None:
    stub = serve(node)
    assert not stub.PreCreateContainerHook(container_request(allocated)).container_devices


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ({"minor": 0, "id": "../../../etc"}, "expected a PCI address such as 0000:3b:00.0, got '../../../etc'"),
        ({"minor": 0}, "expected a PCI address such as 0000:3b:00.0, got ''"),
        ({"minor": 0, "id": PF, "extension": {"vfs": [{"minor": 9, "busID": "x"}]}}, "got 'x'"),
        ({"minor": 4, "id": "0000:af:00.0"}, "RDMA function 0000:af:00.0 has no uverbs device under"),
    ],
    ids=["path-traversal", "no-id", "bad-vf-address", "unknown-function"],
)
def test_bad_allocation_is_a_clear_error(
    serve: Serve, container_request: MakeRequest, node: RDMADevicesPlugin, entry: object, reason: str
) -> None:
    stub = serve(node)
    with pytest.raises(grpc.RpcError) as info:
        stub.PreCreateContainerHook(container_request({"rdma": [entry]}, name="mpi-0"))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details().startswith("rdma-devices: pod default/mpi-0: ")
    assert reason in info.value.details()


def test_missing_device_node_is_a_clear_error(
    serve: Serve, container_request: MakeRequest, node: RDMADevicesPlugin, tmp_path: Path
) -> None:
    (tmp_path / "dev/infiniband/uverbs0").unlink()
    stub = serve(node)
    with pytest.raises(grpc.RpcError) as info:
        stub.PreCreateContainerHook(container_request({"rdma": [{"minor": 0, "id": PF}]}))
    assert f"RDMA device node {tmp_path / 'dev/infiniband/uverbs0'} does not exist" in info.value.details()


def test_malformed_annotation_is_a_clear_error(
    serve: Serve, container_request: MakeRequest, node: RDMADevicesPlugin
) -> None:
    stub = serve(node)
    with pytest.raises(grpc.RpcError) as info:
        stub.PreCreateContainerHook(container_request(raw_annotation='{"rdma": "eth0"}'))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "rdma: expected a list of allocations" in info.value.details()
