"""A private containerd + runc for tests, and a CRI client that plays kubelet.

Integration and end-to-end tests use real containerd (Debian's 1.6) and runc instead of a fake
runtime. This module owns everything that takes, so a test only says what pod it wants:

    reason = containerd.unavailable_reason()      # None, or why these tests must skip
    with containerd.Containerd.start() as ctrd:   # private config, state, sockets, image
        with containerd.CRIClient(ctrd.address, cgroup_parent=ctrd.cgroup_parent) as kubelet:
            config = kubelet.pod_config("p", annotations={...})   # host network
            pod = kubelet.run_pod(config)
            container = kubelet.run_container(pod, config, "main")
            assert kubelet.env(container)["NVIDIA_VISIBLE_DEVICES"] == "2,3"

How containerd is made to run on the test machines (see ../shared/design/real-parts.md): its own
`root`, `state`, gRPC and ttrpc sockets in a short temporary directory, runc state under that
directory, `restrict_oom_score_adj` (the VMs lack CAP_SYS_RESOURCE), no AppArmor, host-network
sandboxes (no CNI), an image built from the static busybox and imported with `ctr` into the
`k8s.io` namespace. The system's `/run/containerd/containerd.sock` is never touched.

`Containerd.stop()` (also on `__exit__`, and safe to call twice) leaves nothing behind, even after
a failed test or a crashed containerd: pods removed through CRI, containerd stopped, leftover runc
containers deleted, shims (found by the socket on their command line) killed and their sockets
removed, mounts under the
directory lazily unmounted, the test's cgroup parent removed from every hierarchy, the directory
deleted, and `/run/containerd/s` (hard-coded by containerd 1.6 for shim sockets) removed when this
instance created it and it is empty.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final

import grpc
from cri_api.v1 import api_pb2 as cri
from cri_api.v1 import api_pb2_grpc as cri_grpc

from tests.support import ociimage, processes, sockets

__all__ = ["IMAGE", "CRIClient", "Containerd", "ExecResult", "unavailable_reason"]

log = logging.getLogger(__name__)

#: The image name CRI sees; used as both sandbox and container image.
IMAGE: Final = "tessera.test/busybox:latest"
RUNC: Final = Path("/usr/sbin/runc")
_SHIM_SOCKET_DIR: Final = Path("/run/containerd/s")
_CGROUP_ROOT: Final = Path("/sys/fs/cgroup")
_READY_TIMEOUT_S: Final = 15.0
#: kubelet's limit for CRI messages (16 MiB), above gRPC's default of 4 MiB.
_KUBELET_CHANNEL_OPTIONS: Final = (
    ("grpc.max_receive_message_length", 16 * 2**20),
    ("grpc.max_send_message_length", 16 * 2**20),
)
_STOP_TIMEOUT_S: Final = 10.0

_CONFIG: Final = """\
version = 2
root = "{root}"
state = "{state}"
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing",
]

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{ttrpc_socket}"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{root}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{image}"
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  systemd_cgroup = false
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "{runc}"
        Root = "{runc_root}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni_conf}"
"""


def unavailable_reason() -> str | None:
    """None when containerd tests can run here; otherwise a sentence saying why they cannot."""
    if os.geteuid() != 0:
        return "needs root: containerd and runc create mounts, namespaces and cgroups (run `make test` as root)"
    missing = [name for name in ("containerd", "ctr") if shutil.which(name) is None]
    if not RUNC.exists():
        missing.append(str(RUNC))
    if missing:
        return f"not installed: {', '.join(missing)} (as root, `make test` installs Debian's containerd and runc)"
    if not ociimage.is_static_elf(ociimage.BUSYBOX):
        return f"{ociimage.BUSYBOX} is missing or not statically linked (install Debian's busybox-static)"
    return None


class Containerd:
    """One private containerd process with the test image imported.

    Create it with `Containerd.start()`; use it as a context manager or call `stop()`.
    `cgroup_parent` is a cgroup path unique to this instance: pass it to `CRIClient` so every
    sandbox lands under it and `stop()` can remove what runc leaves behind.
    """

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.root = workdir / "root"
        self.state = workdir / "state"
        self.socket = workdir / "containerd.sock"
        self.runc_root = workdir / "runc"
        self.log_path = workdir / "containerd.log"
        self.cgroup_parent = f"/tessera-test-{uuid.uuid4().hex[:12]}"
        self.image = IMAGE
        self._process: subprocess.Popen[bytes] | None = None
        self._created_shim_dir = False
        self._stopped = False

    @property
    def address(self) -> str:
        """The gRPC target of containerd's CRI (and containerd) API."""
        return f"unix://{self.socket}"

    @property
    def pid(self) -> int | None:
        """containerd's process id while it runs."""
        return self._process.pid if self._process is not None and self._process.poll() is None else None

    @classmethod
    def start(cls, workdir: Path | None = None) -> Containerd:
        """Start containerd and import the test image. On any failure, clean up and raise.

        Raises RuntimeError with the end of containerd's log when it does not become ready.
        """
        instance = cls(workdir or sockets.short_tempdir("tessera-ctrd-"))
        try:
            instance._launch()
            instance._import_image()
        except BaseException:
            instance.stop()
            raise
        return instance

    def __enter__(self) -> Containerd:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _launch(self) -> None:
        for d in (self.root, self.state, self.runc_root, self.workdir / "cni"):
            d.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "config.toml"
        config.write_text(
            _CONFIG.format(
                root=self.root,
                state=self.state,
                socket=self.socket,
                ttrpc_socket=self.workdir / "ttrpc.sock",
                image=self.image,
                runc=RUNC,
                runc_root=self.runc_root,
                cni_conf=self.workdir / "cni",
            )
        )
        self._created_shim_dir = not _SHIM_SOCKET_DIR.exists()
        with self.log_path.open("wb") as out:
            process = subprocess.Popen(
                ["containerd", "-c", str(config)], stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self._process = process
        processes.wait_for_cri(self.socket, process, what="containerd", log=self._log_tail, timeout_s=_READY_TIMEOUT_S)

    def _import_image(self) -> None:
        tarball = ociimage.build(self.workdir / "image.tar", name=self.image)
        ctr = ["ctr", "-a", str(self.socket), "-n", "k8s.io", "images", "import", "--all-platforms", str(tarball)]
        result = subprocess.run(ctr, capture_output=True, text=True, timeout=60, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"ctr images import failed: {result.stderr.strip()}")
        # CRI learns about the image from containerd's events; wait until it can resolve the name.
        deadline = time.monotonic() + _READY_TIMEOUT_S
        with grpc.insecure_channel(self.address) as channel:
            images = cri_grpc.ImageServiceStub(channel)
            while time.monotonic() < deadline:
                status = images.ImageStatus(cri.ImageStatusRequest(image=cri.ImageSpec(image=self.image)), timeout=5)
                if status.image.id:
                    return
                time.sleep(0.02)
        raise RuntimeError(f"CRI does not see the imported image {self.image}")

    def _log_tail(self, limit: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """Stop containerd and remove everything it created. Idempotent; never raises."""
        if self._stopped:
            return
        self._stopped = True
        steps = (
            self._remove_pods,
            self._stop_process,
            self._delete_runc_containers,
            self._kill_shims,
            self._remove_shim_sockets,
            self._unmount_all,
            self._remove_cgroups,
            self._remove_dirs,
        )
        for step in steps:
            try:
                step()
            except Exception:
                log.warning("Containerd clean-up step failed", extra={"step": step.__name__}, exc_info=True)

    def _remove_pods(self) -> None:
        if self._process is None or self._process.poll() is not None:
            return
        with CRIClient(self.address) as client:
            client.remove_all_pods()

    def _stop_process(self) -> None:
        if self._process is not None:
            processes.terminate(self._process, timeout_s=_STOP_TIMEOUT_S)

    def _delete_runc_containers(self) -> None:
        if not self.runc_root.exists():
            return
        for namespace_root in [self.runc_root, *(p for p in self.runc_root.iterdir() if p.is_dir())]:
            listing = subprocess.run(
                [str(RUNC), "--root", str(namespace_root), "list", "-q"],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
            for container_id in listing.stdout.split():
                subprocess.run(
                    [str(RUNC), "--root", str(namespace_root), "delete", "--force", container_id],
                    capture_output=True,
                    timeout=30,
                    check=False,
                )

    def shim_pids(self) -> list[int]:
        """Pids of the shims this containerd started (their command line names its socket)."""
        pids = []
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            with contextlib.suppress(OSError):
                args = cmdline.read_bytes().split(b"\0")
                if args[0].endswith(b"containerd-shim-runc-v2") and str(self.socket).encode() in args:
                    pids.append(int(cmdline.parent.name))
        return pids

    def _kill_shims(self) -> None:
        pids = self.shim_pids()
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + _STOP_TIMEOUT_S
        while any(processes.is_running(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.01)

    def _remove_shim_sockets(self) -> None:
        # A shim removes its socket in /run/containerd/s when it exits cleanly, not when killed;
        # each task's bundle records the socket's address.
        for address_file in self.state.glob("io.containerd.runtime.v2.task/*/*/address"):
            with contextlib.suppress(OSError, ValueError):
                sockets.remove_socket(Path(address_file.read_text().strip().removeprefix("unix://")))

    def _unmount_all(self) -> None:
        prefix = str(self.workdir) + "/"
        for mountpoint in sorted(_mountpoints_under(prefix), key=len, reverse=True):
            subprocess.run(["umount", "-l", mountpoint], capture_output=True, timeout=30, check=False)

    def _remove_cgroups(self) -> None:
        for hierarchy in _CGROUP_ROOT.iterdir():
            top = hierarchy / self.cgroup_parent.lstrip("/")
            if not top.is_dir():
                continue
            for directory in sorted(
                (p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True
            ):
                with contextlib.suppress(OSError):
                    directory.rmdir()
            with contextlib.suppress(OSError):
                top.rmdir()

    def _remove_dirs(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)
        if self._created_shim_dir:
            for directory in (_SHIM_SOCKET_DIR, _SHIM_SOCKET_DIR.parent):
                with contextlib.suppress(OSError):
                    directory.rmdir()  # only when empty: another containerd may still use it


def _mountpoints_under(prefix: str) -> Iterator[str]:
    with open("/proc/self/mountinfo") as mountinfo:
        for line in mountinfo:
            raw = line.split()[4]
            mountpoint = raw.encode().decode("unicode_escape")  # \040 and friends
            if mountpoint.startswith(prefix):
                yield mountpoint


@dataclass(frozen=True, slots=True)
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str


class CRIClient:
    """A CRI v1 client that calls what kubelet calls, in the shape kubelet sends it.

    Works against containerd directly or through the runtime proxy; sandboxes use the host
    network (no CNI) and `cgroup_parent` when given. Calls raise `grpc.RpcError` as they come.
    """

    def __init__(self, address: str, *, cgroup_parent: str = "", image: str = IMAGE, timeout: float = 30.0) -> None:
        self.address = address
        self.cgroup_parent = cgroup_parent
        self.image = image
        self.timeout = timeout
        self._channel = grpc.insecure_channel(address, options=_KUBELET_CHANNEL_OPTIONS)
        self.runtime = cri_grpc.RuntimeServiceStub(self._channel)
        self.images = cri_grpc.ImageServiceStub(self._channel)

    def __enter__(self) -> CRIClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    # --- sandboxes -----------------------------------------------------------------------------
    def pod_config(
        self,
        name: str,
        *,
        namespace: str = "default",
        uid: str | None = None,
        annotations: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> cri.PodSandboxConfig:
        """A host-network sandbox config (hostname must stay empty with the host network)."""
        config = cri.PodSandboxConfig(
            metadata=cri.PodSandboxMetadata(name=name, namespace=namespace, uid=uid or uuid.uuid4().hex, attempt=0),
            labels=dict(labels or {}),
            annotations=dict(annotations or {}),
        )
        config.linux.cgroup_parent = self.cgroup_parent
        config.linux.security_context.namespace_options.network = cri.NamespaceMode.NODE
        return config

    def run_pod(self, config: cri.PodSandboxConfig) -> str:
        """RunPodSandbox; returns the sandbox id."""
        return str(
            self.runtime.RunPodSandbox(cri.RunPodSandboxRequest(config=config), timeout=self.timeout).pod_sandbox_id
        )

    def remove_pod(self, pod_id: str) -> None:
        """Stop and remove a sandbox with its containers (as kubelet does when a pod goes away)."""
        self.runtime.StopPodSandbox(cri.StopPodSandboxRequest(pod_sandbox_id=pod_id), timeout=self.timeout)
        self.runtime.RemovePodSandbox(cri.RemovePodSandboxRequest(pod_sandbox_id=pod_id), timeout=self.timeout)

    def remove_all_pods(self) -> None:
        for pod in self.runtime.ListPodSandbox(cri.ListPodSandboxRequest(), timeout=self.timeout).items:
            self.remove_pod(pod.id)

    # --- containers ----------------------------------------------------------------------------
    def container_config(
        self,
        name: str,
        *,
        envs: Mapping[str, str] | None = None,
        command: Sequence[str] = (),
        annotations: Mapping[str, str] | None = None,
    ) -> cri.ContainerConfig:
        return cri.ContainerConfig(
            metadata=cri.ContainerMetadata(name=name, attempt=0),
            image=cri.ImageSpec(image=self.image),
            command=list(command),
            envs=[cri.KeyValue(key=k, value=v) for k, v in (envs or {}).items()],
            annotations=dict(annotations or {}),
        )

    def create_container(self, pod_id: str, config: cri.ContainerConfig, sandbox_config: cri.PodSandboxConfig) -> str:
        """CreateContainer with the sandbox config, as kubelet sends it; returns the container id."""
        request = cri.CreateContainerRequest(pod_sandbox_id=pod_id, config=config, sandbox_config=sandbox_config)
        return str(self.runtime.CreateContainer(request, timeout=self.timeout).container_id)

    def start_container(self, container_id: str) -> None:
        self.runtime.StartContainer(cri.StartContainerRequest(container_id=container_id), timeout=self.timeout)

    def stop_container(self, container_id: str, *, grace_s: int = 5) -> None:
        request = cri.StopContainerRequest(container_id=container_id, timeout=grace_s)
        self.runtime.StopContainer(request, timeout=self.timeout + grace_s)

    def run_container(
        self,
        pod_id: str,
        sandbox_config: cri.PodSandboxConfig,
        name: str,
        *,
        envs: Mapping[str, str] | None = None,
    ) -> str:
        """CreateContainer + StartContainer; returns the container id."""
        container_id = self.create_container(pod_id, self.container_config(name, envs=envs), sandbox_config)
        self.start_container(container_id)
        return container_id

    def exec_sync(self, container_id: str, cmd: Sequence[str], *, timeout_s: int = 10) -> ExecResult:
        request = cri.ExecSyncRequest(container_id=container_id, cmd=list(cmd), timeout=timeout_s)
        response = self.runtime.ExecSync(request, timeout=self.timeout + timeout_s)
        return ExecResult(response.exit_code, response.stdout.decode(errors="replace"), response.stderr.decode())

    def env(self, container_id: str) -> dict[str, str]:
        """The environment a process started in the container sees (`env` run by ExecSync)."""
        result = self.exec_sync(container_id, ["env"])
        if result.exit_code != 0:
            raise RuntimeError(f"env exited with {result.exit_code}: {result.stderr}")
        return dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
