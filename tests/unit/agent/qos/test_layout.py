"""kubepods naming for the cgroupfs and systemd drivers, and finding pods and containers."""

import pytest

from agent.qos.cgroups import CgroupNotFound, Hierarchy
from agent.qos.layout import ContainerID, Driver, KubeCgroups, parse_container_id
from apis.errors import ValidationError
from apis.extension.qos import KubeQoSClass
from tests.support.qos import V2Tree

UID = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
G, B, BE = KubeQoSClass.GUARANTEED, KubeQoSClass.BURSTABLE, KubeQoSClass.BEST_EFFORT


def layout(driver: Driver, root: str = "") -> KubeCgroups:
    return KubeCgroups(Hierarchy.v2("/sys/fs/cgroup"), driver, root)


@pytest.mark.parametrize(
    ("driver", "qos", "expected"),
    [
        (Driver.CGROUPFS, G, f"kubepods/pod{UID}"),
        (Driver.CGROUPFS, B, f"kubepods/burstable/pod{UID}"),
        (Driver.CGROUPFS, BE, f"kubepods/besteffort/pod{UID}"),
        (Driver.SYSTEMD, G, "kubepods.slice/kubepods-pod1b4e28ba_2fa1_11d2_883f_0016d3cca427.slice"),
        (
            Driver.SYSTEMD,
            B,
            "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1b4e28ba_2fa1_11d2_883f_0016d3cca427.slice",
        ),
        (
            Driver.SYSTEMD,
            BE,
            "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1b4e28ba_2fa1_11d2_883f_0016d3cca427.slice",
        ),
    ],
    ids=[
        "cgroupfs-guaranteed",
        "cgroupfs-burstable",
        "cgroupfs-besteffort",
        "systemd-guaranteed",
        "systemd-burstable",
        "systemd-besteffort",
    ],
)
def test_pod_dir_names(driver: Driver, qos: KubeQoSClass, expected: str) -> None:
    assert layout(driver).pod_dir(UID, qos).rel == expected


def test_cgroup_root_prefixes_everything() -> None:
    assert layout(Driver.CGROUPFS, "/test-x/").qos_dir(BE).rel == "test-x/kubepods/besteffort"
    assert layout(Driver.SYSTEMD).qos_dir(B).rel == "kubepods.slice/kubepods-burstable.slice"
    assert layout(Driver.SYSTEMD).qos_dir(G).rel == "kubepods.slice"


@pytest.mark.parametrize(
    ("driver", "cid", "names"),
    [
        (Driver.CGROUPFS, "containerd://abc", ["abc"]),
        (Driver.CGROUPFS, "cri-o://abc", ["crio-abc"]),
        (Driver.SYSTEMD, "containerd://abc", ["cri-containerd-abc.scope"]),
        (Driver.SYSTEMD, "docker://abc", ["docker-abc.scope"]),
        (Driver.SYSTEMD, "cri-o://abc", ["crio-abc.scope"]),
        (Driver.SYSTEMD, "abc", ["cri-containerd-abc.scope", "docker-abc.scope", "crio-abc.scope"]),
        (Driver.CGROUPFS, "abc", ["abc", "crio-abc"]),
    ],
    ids=[
        "cgroupfs-containerd",
        "cgroupfs-crio",
        "systemd-containerd",
        "systemd-docker",
        "systemd-crio",
        "systemd-bare",
        "cgroupfs-bare",
    ],
)
def test_container_dir_names(driver: Driver, cid: str, names: list[str]) -> None:
    assert layout(driver).container_names(parse_container_id(cid)) == names


def test_parse_container_id() -> None:
    assert parse_container_id("containerd://0123abc") == ContainerID("containerd", "0123abc")
    assert parse_container_id("0123abc") == ContainerID("", "0123abc")


@pytest.mark.parametrize(
    "bad", ["containerd://", "containerd://../../etc", "docker://a/b", ""], ids=["empty", "traversal", "slash", "blank"]
)
def test_malformed_container_ids_are_rejected(bad: str) -> None:
    with pytest.raises(ValidationError, match="malformed container id"):
        parse_container_id(bad, obj="pod default/x")


@pytest.mark.parametrize("bad", ["../../etc", "a/b", "", "-x"], ids=["traversal", "slash", "empty", "leading-dash"])
def test_malformed_uids_never_become_paths(bad: str) -> None:
    with pytest.raises(ValidationError, match="malformed pod uid"):
        layout(Driver.CGROUPFS).pod_dir(bad, BE)


def test_detects_driver_and_finds_pods_in_any_qos_dir(v2: V2Tree) -> None:
    kube = v2.kube(Driver.SYSTEMD)
    assert kube.driver is Driver.SYSTEMD
    pod_rel = kube.pod_dir(UID, B).rel
    v2.make(pod_rel)
    v2.make(f"{pod_rel}/cri-containerd-abc.scope")
    found = kube.find_pod(UID, BE)  # wrong guess: still found under burstable
    assert found is not None and found.rel == pod_rel
    container = kube.find_container(found, parse_container_id("containerd://abc"))
    assert container is not None and container.rel.endswith("cri-containerd-abc.scope")
    assert kube.find_container(found, parse_container_id("containerd://other")) is None
    assert kube.find_pod("99999999-0000-0000-0000-000000000000") is None


def test_detects_cgroupfs(v2: V2Tree) -> None:
    assert v2.kube(Driver.CGROUPFS).driver is Driver.CGROUPFS


def test_no_kubepods_is_a_clear_error(v2: V2Tree) -> None:
    with pytest.raises(CgroupNotFound, match="no kubepods or kubepods.slice"):
        KubeCgroups.detect(v2.hierarchy)
