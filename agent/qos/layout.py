"""Where kubelet and the runtime put pods and containers in the cgroup tree.

kubelet's cgroup driver decides the names: `cgroupfs` gives `kubepods/burstable/pod<uid>/<id>`,
`systemd` gives `kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice/
cri-containerd-<id>.scope` (dashes in the UID become underscores). Guaranteed pods sit directly
under kubepods. `KubeCgroups` hides this, so the reconciler, the suppression loop and the hook
plugin ask for "the BestEffort QoS cgroup" or "pod <uid>" and get a `Cgroup` back.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Final

from agent.qos.cgroups import Cgroup, CgroupNotFound, Hierarchy
from apis.errors import ValidationError
from apis.extension.qos import KubeQoSClass

__all__ = ["ContainerID", "Driver", "KubeCgroups", "parse_container_id"]

_UID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_QOS_SEGMENT: Final = {KubeQoSClass.BURSTABLE: "burstable", KubeQoSClass.BEST_EFFORT: "besteffort"}
#: systemd scope prefixes by runtime (the part before `://` in a containerID).
_SCOPE_PREFIX: Final = {"containerd": "cri-containerd", "docker": "docker", "cri-o": "crio"}
#: cgroupfs directory prefixes by runtime (CRI-O prefixes, containerd and docker do not).
_CGROUPFS_PREFIX: Final = {"containerd": "", "docker": "", "cri-o": "crio-"}


class Driver(enum.Enum):
    """kubelet's --cgroup-driver."""

    CGROUPFS = "cgroupfs"
    SYSTEMD = "systemd"


@dataclass(frozen=True, slots=True)
class ContainerID:
    runtime: str  # "containerd", "docker", "cri-o", or "" when the id came bare
    id: str


def parse_container_id(text: str, *, obj: str = "") -> ContainerID:
    """`containerd://abc…` → ContainerID("containerd", "abc…"). Raises ValidationError naming the value."""
    runtime, sep, cid = text.partition("://")
    if not sep:
        runtime, cid = "", text
    if not _ID.match(cid):
        raise ValidationError("status.containerStatuses[].containerID", f"malformed container id {text!r}", obj=obj)
    return ContainerID(runtime, cid)


@dataclass(frozen=True, slots=True)
class KubeCgroups:
    """The kubepods tree of one node: hierarchy, driver and kubelet's --cgroup-root (relative)."""

    hierarchy: Hierarchy
    driver: Driver
    root: str = ""

    @classmethod
    def detect(cls, hierarchy: Hierarchy, root: str = "") -> KubeCgroups:
        """Pick the driver from what exists: `kubepods.slice` → systemd, `kubepods` → cgroupfs.

        Raises CgroupNotFound naming the place looked at when neither exists (kubelet not
        running yet, or a wrong --cgroup-root).
        """
        base = hierarchy.cgroup(root)
        if base.child("kubepods.slice").exists():
            return cls(hierarchy, Driver.SYSTEMD, root.strip("/"))
        if base.child("kubepods").exists():
            return cls(hierarchy, Driver.CGROUPFS, root.strip("/"))
        raise CgroupNotFound(base.path(), "no kubepods or kubepods.slice cgroup (is kubelet running?)")

    def kubepods(self) -> Cgroup:
        name = "kubepods.slice" if self.driver is Driver.SYSTEMD else "kubepods"
        return self.hierarchy.cgroup(self.root).child(name)

    def qos_dir(self, kube_qos: KubeQoSClass) -> Cgroup:
        """kubepods itself for Guaranteed; its burstable/besteffort child otherwise."""
        segment = _QOS_SEGMENT.get(kube_qos)
        if segment is None:
            return self.kubepods()
        name = f"kubepods-{segment}.slice" if self.driver is Driver.SYSTEMD else segment
        return self.kubepods().child(name)

    def pod_dir(self, uid: str, kube_qos: KubeQoSClass) -> Cgroup:
        """Where kubelet puts pod `uid` of this QoS class (whether or not it exists)."""
        if not _UID.match(uid):
            raise ValidationError("metadata.uid", f"malformed pod uid {uid!r}")
        if self.driver is Driver.CGROUPFS:
            return self.qos_dir(kube_qos).child(f"pod{uid}")
        segment = _QOS_SEGMENT.get(kube_qos)
        prefix = f"kubepods-{segment}" if segment else "kubepods"
        return self.qos_dir(kube_qos).child(f"{prefix}-pod{uid.replace('-', '_')}.slice")

    def find_pod(self, uid: str, kube_qos: KubeQoSClass | None = None) -> Cgroup | None:
        """The existing cgroup of pod `uid`: the expected QoS class first, then the others."""
        order = [kube_qos] if kube_qos is not None else []
        order += [q for q in KubeQoSClass if q is not kube_qos]
        for qos in order:
            cg = self.pod_dir(uid, qos)
            if cg.exists():
                return cg
        return None

    def container_names(self, container: ContainerID) -> list[str]:
        """Candidate directory names of a container under its pod cgroup, most likely first."""
        runtimes = [container.runtime] if container.runtime in _SCOPE_PREFIX else list(_SCOPE_PREFIX)
        if self.driver is Driver.SYSTEMD:
            return [f"{_SCOPE_PREFIX[r]}-{container.id}.scope" for r in runtimes]
        return list(dict.fromkeys(f"{_CGROUPFS_PREFIX[r]}{container.id}" for r in runtimes))

    def find_container(self, pod: Cgroup, container: ContainerID) -> Cgroup | None:
        """The existing cgroup of a container under `pod`, or None (not started, or gone)."""
        for name in self.container_names(container):
            cg = pod.child(name)
            if cg.exists():
                return cg
        return None
