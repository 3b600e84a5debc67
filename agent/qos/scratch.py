"""A throwaway kubepods tree in the real cgroup hierarchy, for tests and `tessera bench qos`.

Creates `<hierarchy>/<prefix>-<random>/kubepods/{burstable,besteffort}` (cgroupfs layout) in every
controller QoS uses, makes pod and container cgroups where kubelet and containerd would, runs
processes inside them, and on `close()` kills those processes and removes every cgroup it made.
Never used by the agent itself: on a node kubelet owns the tree.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from types import TracebackType

from agent.qos import knobs
from agent.qos.cgroups import Cgroup, CgroupError, Hierarchy
from agent.qos.layout import KubeCgroups, parse_container_id
from apis.extension.qos import KubeQoSClass, kube_qos_class
from apis.k8s.core import Pod

__all__ = ["ScratchTree"]


class ScratchTree:
    """Use as a context manager; raises CgroupError (or OSError) when cgroups cannot be created."""

    def __init__(self, hierarchy: Hierarchy, *, prefix: str = "tessera-qos-scratch") -> None:
        self.hierarchy = hierarchy
        self.base = hierarchy.cgroup(f"{prefix}-{uuid.uuid4().hex[:12]}")
        self.procs: list[subprocess.Popen[bytes]] = []
        try:
            for rel in ("kubepods/burstable", "kubepods/besteffort"):
                self.base.child(rel).create()
            self.kube = KubeCgroups.detect(hierarchy, self.base.rel)
            self.kube.qos_dir(KubeQoSClass.BEST_EFFORT).write(knobs.CPU_SHARES, 2)  # as kubelet sets it
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> ScratchTree:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def add_pod(self, pod: Pod) -> Cgroup:
        """mkdir the pod's cgroup, and its containers' where kubelet and containerd would."""
        pod_cg = self.kube.pod_dir(pod.uid, kube_qos_class(pod)).create()
        for raw in pod.container_ids.values():
            pod_cg.child(self.kube.container_names(parse_container_id(raw))[0]).create()
        return pod_cg

    def spawn(self, cg: Cgroup, code: str) -> subprocess.Popen[bytes]:
        """Run `python -c code` inside `cg`: it starts, is moved in, and only then runs `code`."""
        proc = subprocess.Popen(
            [sys.executable, "-c", f"import sys; sys.stdin.readline()\n{code}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.procs.append(proc)
        cg.add_process(proc.pid)
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        proc.stdin.close()
        return proc

    def close(self, timeout_s: float = 10.0) -> None:
        """Kill the processes started here, then remove the tree (retrying while tasks leave)."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=timeout_s)
        self.procs.clear()
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.base.remove()
                return
            except CgroupError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
