"""Mapping processes to containers through fixture `/proc/<pid>/cgroup` files."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.metrics.containers import ContainerRef, ContainerResolver

CID = "4f5c1e0d9b8a7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d"
POD = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"


@pytest.mark.parametrize(
    ("cgroup", "expected"),
    [
        (  # cgroup v1, cgroupfs driver
            f"12:memory:/kubepods/burstable/pod{POD}/{CID}\n11:cpu,cpuacct:/kubepods/burstable/pod{POD}/{CID}\n",
            ContainerRef(CID, POD),
        ),
        (  # cgroup v2, systemd driver, containerd
            f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{POD.replace('-', '_')}.slice/"
            f"cri-containerd-{CID}.scope\n",
            ContainerRef(CID, POD),
        ),
        (f"0::/system.slice/docker-{CID}.scope\n", ContainerRef(CID, "")),  # docker, outside Kubernetes
        ("0::/user.slice/user-0.slice/session-1.scope\n", None),  # a login session
        ("garbage without colons\n", None),
    ],
    ids=["v1-cgroupfs", "v2-systemd", "docker", "host-process", "garbage"],
)
def test_container_of(tmp_path: Path, cgroup: str, expected: ContainerRef | None) -> None:
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "cgroup").write_text(cgroup)
    assert ContainerResolver(tmp_path).container_of(4242) == expected


def test_a_process_that_is_gone_has_no_container(tmp_path: Path) -> None:
    assert ContainerResolver(tmp_path).container_of(1) is None
