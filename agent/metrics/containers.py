"""Which container a process belongs to, from `/proc/<pid>/cgroup`.

NVML names the processes using a GPU by pid; on a shared GPU the metrics collector needs their
containers. Kubernetes puts each container in a cgroup whose path ends in the container id and
passes through the pod's cgroup, in either driver's spelling:

    cgroupfs: /kubepods/burstable/pod<uid>/<64 hex>
    systemd:  /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice/
              cri-containerd-<64 hex>.scope      (also docker-…, crio-…)

cgroup v1 and v2 files differ only in their controller column, so one parser reads both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ContainerRef", "ContainerResolver"]

_CONTAINER = re.compile(r"(?:^|[-/])([0-9a-f]{64})(?:\.scope)?$")
_POD = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")


@dataclass(frozen=True, slots=True)
class ContainerRef:
    container_id: str
    pod_uid: str = ""


class ContainerResolver:
    """Reads `<proc_root>/<pid>/cgroup` on every call (pids are reused; caching would lie)."""

    def __init__(self, proc_root: Path = Path("/proc")) -> None:
        self._proc_root = proc_root

    def container_of(self, pid: int) -> ContainerRef | None:
        """The process's container, or None for a process outside containers or gone already."""
        try:
            text = (self._proc_root / str(pid) / "cgroup").read_text()
        except OSError:
            return None
        for line in text.splitlines():
            path = line.split(":", 2)[-1].rstrip("/")
            match = _CONTAINER.search(path)
            if match:
                pod = _POD.search(path)
                return ContainerRef(match.group(1), pod.group(1).replace("_", "-") if pod else "")
        return None
