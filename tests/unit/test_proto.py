"""The generated proto code is fresh, and the hook service keeps Koordinator's wire contract."""

import filecmp
import subprocess
import sys
from pathlib import Path

import pytest

from proto.runtime.v1alpha1 import api_pb2, api_pb2_grpc
from proto.scheduler.v1 import scheduler_pb2, scheduler_pb2_grpc

ROOT = Path(__file__).resolve().parents[2]


def test_generated_code_is_not_stale(tmp_path: Path) -> None:
    env_python = Path(sys.executable)
    subprocess.run(
        ["bash", "hack/gen-proto.sh", str(tmp_path)],
        cwd=ROOT,
        check=True,
        env={"PYTHON": str(env_python), "PATH": "/usr/bin:/bin"},
    )
    generated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.py*"))
    assert generated, "gen-proto produced nothing"
    stale = [str(p) for p in generated if not filecmp.cmp(tmp_path / p, ROOT / p, shallow=False)]
    assert not stale, f"regenerate with `make proto`: {stale}"


# protocol.md, "Runtime hooks (gRPC)": message -> {field: number}
WIRE = {
    "PodSandboxMetadata": {"name": 1, "uid": 2, "namespace": 3, "attempt": 4},
    "PodSandboxHookRequest": {
        "pod_meta": 1,
        "runtime_handler": 2,
        "labels": 3,
        "annotations": 4,
        "cgroup_parent": 5,
        "overhead": 6,
        "resources": 7,
    },
    "PodSandboxHookResponse": {"labels": 1, "annotations": 2, "cgroup_parent": 3, "resources": 4},
    "LinuxContainerResources": {
        "cpu_period": 1,
        "cpu_quota": 2,
        "cpu_shares": 3,
        "memory_limit_in_bytes": 4,
        "oom_score_adj": 5,
        "cpuset_cpus": 6,
        "cpuset_mems": 7,
        "hugepage_limits": 8,
        "unified": 9,
        "memory_swap_limit_in_bytes": 10,
    },
    "HugepageLimit": {"page_size": 1, "limit": 2},
    "ContainerMetadata": {"name": 1, "attempt": 2, "id": 3},
    "ContainerResourceHookRequest": {
        "pod_meta": 1,
        "container_meta": 2,
        "container_annotations": 3,
        "container_resources": 4,
        "pod_resources": 5,
        "pod_annotations": 6,
        "pod_labels": 7,
        "pod_cgroup_parent": 8,
        "container_envs": 9,
    },
    "ContainerResourceHookResponse": {
        "container_annotations": 1,
        "container_resources": 2,
        "pod_cgroup_parent": 3,
        "container_envs": 4,
    },
}


@pytest.mark.parametrize("message", sorted(WIRE))
def test_field_numbers_match_the_protocol(message: str) -> None:
    descriptor = api_pb2.DESCRIPTOR.message_types_by_name[message]
    numbers = {f.name: f.number for f in descriptor.fields if f.number < 100}
    assert numbers == WIRE[message]


def test_service_and_methods() -> None:
    service = api_pb2.DESCRIPTOR.services_by_name["RuntimeHookService"]
    assert service.full_name == "runtime.v1alpha1.RuntimeHookService"
    methods = {m.name: (m.input_type.name, m.output_type.name) for m in service.methods}
    sandbox = ("PodSandboxHookRequest", "PodSandboxHookResponse")
    container = ("ContainerResourceHookRequest", "ContainerResourceHookResponse")
    assert methods == {
        "PreRunPodSandboxHook": sandbox,
        "PostStopPodSandboxHook": sandbox,
        "PreCreateContainerHook": container,
        "PreStartContainerHook": container,
        "PostStartContainerHook": container,
        "PostStopContainerHook": container,
        "PreUpdateContainerResourcesHook": container,
    }
    assert hasattr(api_pb2_grpc, "RuntimeHookServiceServicer")


def test_scheduler_service() -> None:
    service = scheduler_pb2.DESCRIPTOR.services_by_name["Scheduler"]
    assert service.full_name == "tessera.scheduler.v1.Scheduler"
    assert {"Schedule", "Explain", "GetNodeDevices"} <= {m.name for m in service.methods}
    assert hasattr(scheduler_pb2_grpc, "SchedulerStub")


def test_koordinator_encoded_bytes_decode() -> None:
    # A request as Koordinator's Go proxy would encode it (field numbers only matter on the wire).
    req = api_pb2.ContainerResourceHookRequest()
    req.pod_meta.name, req.pod_meta.namespace = "p", "ns"
    req.pod_annotations["a"] = "b"
    req.container_resources.cpu_shares = 512
    again = api_pb2.ContainerResourceHookRequest.FromString(req.SerializeToString())
    assert again == req


# kubelet's wire names and numbers (k8s.io/kubelet/pkg/apis/dra/v1, pluginregistration/v1).
KUBELET_DRA_WIRE = {
    "NodePrepareResourcesRequest": {"claims": 1},
    "NodePrepareResourcesResponse": {"claims": 1},
    "NodePrepareResourceResponse": {"devices": 1, "error": 2},
    "Device": {"request_names": 1, "pool_name": 2, "device_name": 3, "cdi_device_ids": 4, "share_id": 5},
    "NodeUnprepareResourcesRequest": {"claims": 1},
    "NodeUnprepareResourcesResponse": {"claims": 1},
    "NodeUnprepareResourceResponse": {"error": 1},
    "Claim": {"namespace": 1, "uid": 2, "name": 3},
}
REGISTRATION_WIRE = {
    "PluginInfo": {"type": 1, "name": 2, "endpoint": 3, "supported_versions": 4},
    "RegistrationStatus": {"plugin_registered": 1, "error": 2},
    "RegistrationStatusResponse": {},
    "InfoRequest": {},
}


def test_kubelet_dra_and_registration_wire() -> None:
    from proto.kubelet.dra.v1 import api_pb2 as dra
    from proto.kubelet.pluginregistration.v1 import api_pb2 as reg

    for module, wire, service, methods in (
        (
            dra,
            KUBELET_DRA_WIRE,
            "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin",
            ["NodePrepareResources", "NodeUnprepareResources"],
        ),
        (reg, REGISTRATION_WIRE, "pluginregistration.Registration", ["GetInfo", "NotifyRegistrationStatus"]),
    ):
        for message, fields in wire.items():
            descriptor = module.DESCRIPTOR.message_types_by_name[message]
            assert {f.name: f.number for f in descriptor.fields} == fields, message
        (only,) = module.DESCRIPTOR.services_by_name.values()
        assert only.full_name == service
        assert [m.name for m in only.methods] == methods
