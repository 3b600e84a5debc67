"""How hook answers change hook requests and CRI requests."""

from __future__ import annotations

import pytest
from cri_api.v1 import api_pb2 as cri

from proto.runtime.v1alpha1 import api_pb2 as hook
from runtimeproxy import merge


def test_resources_overlay_sets_only_what_the_patch_sets() -> None:
    target = cri.LinuxContainerResources(cpu_shares=1024, memory_limit_in_bytes=1 << 30, cpuset_cpus="0-3")
    target.hugepage_limits.add(page_size="2MB", limit=1)
    patch = hook.LinuxContainerResources(cpu_shares=512, cpuset_mems="0", unified={"cpu.idle": "1"})
    patch.hugepage_limits.add(page_size="1GB", limit=2)
    merge.overlay_resources(target, patch)
    assert target.cpu_shares == 512
    assert target.memory_limit_in_bytes == 1 << 30
    assert (target.cpuset_cpus, target.cpuset_mems) == ("0-3", "0")
    assert dict(target.unified) == {"cpu.idle": "1"}
    assert [(h.page_size, h.limit) for h in target.hugepage_limits] == [("1GB", 2)]


def test_resources_convert_both_ways_field_for_field() -> None:
    full = cri.LinuxContainerResources(
        cpu_period=1,
        cpu_quota=2,
        cpu_shares=3,
        memory_limit_in_bytes=4,
        oom_score_adj=5,
        cpuset_cpus="6",
        cpuset_mems="7",
        unified={"k": "9"},
        memory_swap_limit_in_bytes=10,
    )
    full.hugepage_limits.add(page_size="2MB", limit=8)
    as_hook = hook.LinuxContainerResources()
    merge.overlay_resources(as_hook, full)
    back = cri.LinuxContainerResources()
    merge.overlay_resources(back, as_hook)
    assert back == full
    assert as_hook.memory_swap_limit_in_bytes == 10


def create_request() -> cri.CreateContainerRequest:
    request = cri.CreateContainerRequest(pod_sandbox_id="sb")
    request.config.envs.add(key="PATH", value="/bin")
    request.config.envs.add(key="NVIDIA_VISIBLE_DEVICES", value="all")
    request.config.annotations["a"] = "1"
    request.config.devices.add(container_path="/dev/fuse", host_path="/dev/fuse", permissions="rwm")
    request.sandbox_config.linux.cgroup_parent = "/kubepods/pod1"
    return request


def test_create_container_patch() -> None:
    request = create_request()
    answer = hook.ContainerResourceHookResponse(
        container_envs={"NVIDIA_VISIBLE_DEVICES": "2,3", "B": "2", "A": "1"},
        container_annotations={"b": "2"},
        pod_cgroup_parent="/kubepods/besteffort/pod1",
        container_resources=hook.LinuxContainerResources(cpu_shares=2),
    )
    answer.container_devices.add(container_path="/dev/infiniband/uverbs0", host_path="/h/uverbs0", permissions="rw")
    answer.container_devices.add(container_path="/dev/fuse", host_path="/other", permissions="r")
    merge.patch_create_container(request, answer)
    config = request.config
    # A variable the container sets is replaced in place; new ones are appended in sorted order.
    assert [(e.key, e.value) for e in config.envs] == [
        ("PATH", "/bin"),
        ("NVIDIA_VISIBLE_DEVICES", "2,3"),
        ("A", "1"),
        ("B", "2"),
    ]
    assert dict(config.annotations) == {"a": "1", "b": "2"}
    assert config.linux.resources.cpu_shares == 2
    assert request.sandbox_config.linux.cgroup_parent == "/kubepods/besteffort/pod1"
    # A device the container already has at that path is kept as it was.
    assert [(d.container_path, d.host_path) for d in config.devices] == [
        ("/dev/fuse", "/dev/fuse"),
        ("/dev/infiniband/uverbs0", "/h/uverbs0"),
    ]


def test_empty_answer_changes_nothing() -> None:
    request = create_request()
    before = request.SerializeToString()
    merge.patch_create_container(request, hook.ContainerResourceHookResponse())
    assert request.SerializeToString() == before


def test_later_answers_win_and_devices_accumulate() -> None:
    merged = hook.ContainerResourceHookResponse()
    first = hook.ContainerResourceHookResponse(container_envs={"A": "1", "B": "1"}, pod_cgroup_parent="/x")
    first.container_devices.add(container_path="/dev/a", host_path="/dev/a")
    second = hook.ContainerResourceHookResponse(container_envs={"B": "2"})
    second.container_devices.add(container_path="/dev/a", host_path="/elsewhere")
    second.container_devices.add(container_path="/dev/b", host_path="/dev/b")
    merge.merge_container_response(merged, first)
    merge.merge_container_response(merged, second)
    assert dict(merged.container_envs) == {"A": "1", "B": "2"}
    assert merged.pod_cgroup_parent == "/x"
    assert [(d.container_path, d.host_path) for d in merged.container_devices] == [
        ("/dev/a", "/dev/a"),
        ("/dev/b", "/dev/b"),
    ]


def test_next_server_sees_the_request_as_changed_so_far() -> None:
    request = hook.ContainerResourceHookRequest(container_envs={"A": "0"}, pod_cgroup_parent="/p")
    answer = hook.ContainerResourceHookResponse(
        container_envs={"A": "1"}, container_resources=hook.LinuxContainerResources(cpu_quota=5)
    )
    updated = merge.container_request_with(request, answer)
    assert dict(updated.container_envs) == {"A": "1"}
    assert updated.container_resources.cpu_quota == 5
    assert updated.pod_cgroup_parent == "/p"
    assert dict(request.container_envs) == {"A": "0"}  # the original is untouched


def test_sandbox_answers() -> None:
    merged = hook.PodSandboxHookResponse()
    merge.merge_sandbox_response(merged, hook.PodSandboxHookResponse(labels={"l": "1"}, cgroup_parent="/a"))
    merge.merge_sandbox_response(
        merged,
        hook.PodSandboxHookResponse(annotations={"n": "2"}, resources=hook.LinuxContainerResources(cpu_shares=7)),
    )
    request = cri.RunPodSandboxRequest()
    request.config.labels["app"] = "x"
    merge.patch_run_pod_sandbox(request, merged)
    assert dict(request.config.labels) == {"app": "x", "l": "1"}
    assert dict(request.config.annotations) == {"n": "2"}
    assert request.config.linux.cgroup_parent == "/a"
    assert request.config.linux.resources.cpu_shares == 7
    next_request = merge.sandbox_request_with(hook.PodSandboxHookRequest(labels={"app": "x"}), merged)
    assert dict(next_request.labels) == {"app": "x", "l": "1"}


def test_update_container_resources_patch() -> None:
    request = cri.UpdateContainerResourcesRequest(
        container_id="c", linux=cri.LinuxContainerResources(cpu_shares=100, cpu_quota=50_000)
    )
    answer = hook.ContainerResourceHookResponse(
        container_resources=hook.LinuxContainerResources(cpu_shares=2), container_annotations={"k": "v"}
    )
    merge.patch_update_container_resources(request, answer)
    assert (request.linux.cpu_shares, request.linux.cpu_quota) == (2, 50_000)
    assert dict(request.annotations) == {"k": "v"}


def _mount(destination: str, source: str = "", *options: str, type_: str = "bind") -> hook.Mount:
    return hook.Mount(destination=destination, type=type_, source=source or destination, options=list(options))


def test_mounts_become_cri_bind_mounts_and_replace_one_at_the_same_path() -> None:
    request = create_request()
    request.config.mounts.add(container_path="/data", host_path="/srv/data")
    request.config.mounts.add(container_path="/tmp/vgpulock", host_path="/var/lib/old-lock")
    answer = hook.ContainerResourceHookResponse()
    answer.container_mounts.extend(
        [
            _mount("/usr/local/vgpu/libvgpu.so", "", "rbind"),
            _mount("/tmp/vgpulock", "", "rbind"),
            _mount("/etc/ro", "/host/ro", "rbind", "ro", "rslave", type_=""),
        ]
    )
    merge.patch_create_container(request, answer)
    mounts = [(m.container_path, m.host_path, m.readonly, m.propagation) for m in request.config.mounts]
    assert mounts == [
        ("/data", "/srv/data", False, cri.PROPAGATION_PRIVATE),
        ("/usr/local/vgpu/libvgpu.so", "/usr/local/vgpu/libvgpu.so", False, cri.PROPAGATION_PRIVATE),
        ("/tmp/vgpulock", "/tmp/vgpulock", False, cri.PROPAGATION_PRIVATE),
        ("/etc/ro", "/host/ro", True, cri.PROPAGATION_HOST_TO_CONTAINER),
    ]


@pytest.mark.parametrize(
    ("mount", "reason"),
    [
        (_mount("/scratch", "tmpfs", type_="tmpfs"), "type 'tmpfs': CRI carries bind mounts only"),
        (_mount("/x", "/y", "rbind", "nosuid"), "option 'nosuid': CRI has no field for it"),
        (_mount("relative", "/y"), "must be absolute paths"),
    ],
    ids=["not-a-bind", "option-cri-lacks", "relative-path"],
)
def test_a_mount_cri_cannot_carry_is_refused_and_nothing_is_changed(mount: hook.Mount, reason: str) -> None:
    request = create_request()
    before = request.SerializeToString()
    answer = hook.ContainerResourceHookResponse(container_envs={"LD_PRELOAD": "/usr/local/vgpu/libvgpu.so"})
    answer.container_mounts.append(mount)
    with pytest.raises(merge.UnsupportedMount, match=reason):
        merge.patch_create_container(request, answer)
    assert request.SerializeToString() == before


def test_a_later_answers_mount_replaces_an_earlier_one_at_the_same_destination() -> None:
    into = hook.ContainerResourceHookResponse()
    into.container_mounts.extend([_mount("/a", "/old-a"), _mount("/b")])
    later = hook.ContainerResourceHookResponse()
    later.container_mounts.extend([_mount("/a", "/new-a"), _mount("/c")])
    merge.merge_container_response(into, later)
    assert [(m.destination, m.source) for m in into.container_mounts] == [("/b", "/b"), ("/a", "/new-a"), ("/c", "/c")]
