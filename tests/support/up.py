"""`tessera up` in the background, driven as a user drives it, and the cluster seen through the
official `kubernetes` client (a different client than the components use).

    with Up.started(data_dir, "--nodes", "3") as up:      # waits until up.json says ready
        cluster = up.cluster()                            # kubernetes.client APIs, parsed into apis types
        up.kubectl("get", "pods", "-A")                   # the real kubectl, with up's kubeconfig
        up.tessera("explain", "too-big", "-n", "x")       # the tessera CLI, finding this scheduler
        assert up.interrupt() == 0                        # Ctrl-C: a clean stop
    # leaving the block cleans up whatever the test left running

The scheduler's gRPC API listens in the data directory (`TESSERA_SCHEDULER_ADDRESS`, which
`tessera explain` reads too), so tests never touch the per-user default socket.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import kubernetes
import psutil

from apis.crds.device import Device
from apis.k8s.core import Node, Pod
from cli.launchers.base import KubeconfigCredentials
from cli.localcluster import state
from tests.support.waiting import wait_for

__all__ = ["Cluster", "Up", "module_up", "tessera_command"]

#: Start-up takes seconds; this only bounds a test that would otherwise hang on a loaded machine.
START_TIMEOUT_S: Final = 180.0
STOP_TIMEOUT_S: Final = 120.0
_DEVICE_GVR: Final = ("scheduling.koordinator.sh", "v1alpha1", "devices")


def tessera_command() -> list[str]:
    """The `tessera` console script of this environment (what `make run` runs)."""
    script = Path(sys.executable).parent / "tessera"
    return [str(script)] if script.exists() else [sys.executable, "-m", "cli"]


class Up:
    """One `tessera up` process; see the module docstring."""

    def __init__(self, data_dir: Path, args: Iterable[str]) -> None:
        self.data_dir = data_dir
        self.args = list(args)
        self.output_path = data_dir.parent / f"{data_dir.name}.out"
        self.scheduler_address = f"unix://{data_dir / 'scheduler.sock'}"
        self.env = {**os.environ, "TESSERA_SCHEDULER_ADDRESS": self.scheduler_address}
        self._process: subprocess.Popen[bytes] | None = None
        self._output_from = 0

    @classmethod
    def started(cls, data_dir: Path, *args: str) -> Up:
        """A started `tessera up`; cleaned up again when it does not get ready."""
        up = cls(data_dir, args)
        try:
            up.start()
        except BaseException:
            up.cleanup()
            raise
        return up

    def __enter__(self) -> Up:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cleanup()

    def cleanup(self) -> None:
        """Whatever a test did: stop this `tessera up`, and kill what it left running (after it
        was killed itself, or failed to stop), so no test leaves processes behind."""
        if self.running:
            with contextlib.suppress(AssertionError):
                self.interrupt()
        current = state.read(self.data_dir)
        for process in state.leftovers(current) if current is not None else []:
            with contextlib.suppress(psutil.Error):
                process.kill()

    # --- the process ---------------------------------------------------------------------------------
    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> state.UpState:
        """Start `tessera up --data-dir DIR ARGS` and wait until its state file says ready."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with self.output_path.open("ab") as out:
            self._output_from = out.tell()
            self._process = subprocess.Popen(
                [*tessera_command(), "up", "--data-dir", str(self.data_dir), *self.args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
            )
        return wait_for(self._ready, timeout_s=START_TIMEOUT_S, what="tessera up to be ready")

    def _ready(self) -> state.UpState | None:
        if not self.running:
            raise AssertionError(f"tessera up exited with {self.returncode}:\n{self.output()}")
        current = state.read(self.data_dir)
        if current is not None and current.pid == self.pid and current.phase == "ready":
            return current
        return None

    @property
    def returncode(self) -> int | None:
        return self._process.poll() if self._process is not None else None

    def interrupt(self) -> int:
        """Ctrl-C: SIGINT, then wait for `tessera up` to stop everything; its exit code."""
        assert self._process is not None
        self._process.send_signal(signal.SIGINT)
        try:
            return self._process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            raise AssertionError(f"tessera up did not stop within {STOP_TIMEOUT_S}s:\n{self.output()}") from None

    def kill(self) -> None:
        """SIGKILL `tessera up` itself: its components are left running, orphaned."""
        assert self._process is not None
        self._process.kill()
        self._process.wait()

    def output(self) -> str:
        """What this `tessera up` printed (not earlier ones on the same data directory)."""
        with self.output_path.open("rb") as out:
            out.seek(self._output_from)
            return out.read().decode(errors="replace")

    def state(self) -> state.UpState:
        current = state.read(self.data_dir)
        assert current is not None, f"no state file in {self.data_dir}"
        return current

    def forbidden_calls(self) -> list[str]:
        """Every 403 a component got, from its log: each runs as its own ServiceAccount with the
        RBAC of deploy/ (cli/localcluster/identities.py), so a verb missing there shows up here."""
        found = []
        for name, component in self.state().components.items():
            log = Path(component.log)
            if name == "apiserver" or not log.exists():
                continue
            text = log.read_text(errors="replace")
            found += [f"{name}: {line.strip()}" for line in text.splitlines() if "is forbidden: User" in line]
        return found

    def wait_restarted(self, component: str, old_pid: int | None) -> int:
        """Wait until `tessera up` has started `component` again; its new pid."""

        def new_pid() -> int | None:
            pid = self.state().components[component].pid
            return pid if pid not in (None, old_pid) else None

        return wait_for(new_pid, timeout_s=START_TIMEOUT_S, what=f"tessera up to restart {component}")

    # --- clients ----------------------------------------------------------------------------------
    @property
    def kubeconfig(self) -> Path:
        return self.data_dir / "kubeconfig"

    def cluster(self) -> Cluster:
        return Cluster(kubernetes.config.new_client_from_config(config_file=str(self.kubeconfig)))

    def ask(
        self, component: str, method: str, path: str, *, body: bytes = b"", anonymous: bool = False
    ) -> tuple[int, bytes]:
        """One request to a component's HTTP endpoint (`agent/sim-1`, `scheduler`) as the user
        (the kubeconfig's cluster-admin token: components authorize through the API server), or
        with no credentials at all; (status, body), an error status included."""
        url = self.state().components[component].url
        request = urllib.request.Request(f"{url}{path}", method=method, data=body if method != "GET" else None)
        authorization = KubeconfigCredentials(self.kubeconfig).authorization()
        if authorization and not anonymous:
            request.add_header("Authorization", authorization)
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return int(answer.status), answer.read()
        except urllib.error.HTTPError as e:
            with e:
                return e.code, e.read()

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        """Run the real kubectl against this cluster; its stdout (AssertionError on failure), or
        with `check=False` its stdout and stderr whatever the outcome."""
        kubectl = shutil.which("kubectl")
        assert kubectl is not None, "kubectl is not installed"
        return self._run([kubectl, f"--kubeconfig={self.kubeconfig}", *args], check=check, stdin=stdin)

    def tessera(self, *args: str, check: bool = True) -> str:
        """Run a `tessera` command (explain, what-if, ...) as a user in another terminal would."""
        return self._run([*tessera_command(), *args], check=check)

    def _run(self, command: list[str], *, check: bool = True, stdin: str | None = None) -> str:
        result = subprocess.run(
            command, input=stdin, capture_output=True, text=True, env=self.env, timeout=120, check=False
        )
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(command)} exited with {result.returncode}:\n{result.stderr}")
        return result.stdout + (result.stderr if not check else "")


class Cluster:
    """The cluster through the official client, parsed into `apis` types for the checks."""

    def __init__(self, api: kubernetes.client.ApiClient) -> None:
        self.api = api
        self.core = kubernetes.client.CoreV1Api(api)
        self.custom = kubernetes.client.CustomObjectsApi(api)

    def close(self) -> None:
        self.api.close()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _plain(self, obj: Any) -> Any:
        return self.api.sanitize_for_serialization(obj)

    def pods(self, namespace: str | None = None) -> list[Pod]:
        found = (
            self.core.list_namespaced_pod(namespace) if namespace else self.core.list_pod_for_all_namespaces()
        ).items
        return [Pod.from_dict(self._plain(p)) for p in found]

    def nodes(self) -> dict[str, Node]:
        return {n.name: n for n in (Node.from_dict(self._plain(n)) for n in self.core.list_node().items)}

    def devices(self) -> dict[str, Device]:
        listing = self.custom.list_cluster_custom_object(*_DEVICE_GVR)
        return {d.node_name: d for d in (Device.from_dict(raw) for raw in listing["items"])}

    def create_namespace(self, name: str) -> None:
        self.core.create_namespace({"metadata": {"name": name}})

    def delete_namespace(self, name: str) -> None:
        """Delete it and everything in it (the embedded API server removes its pods at once)."""
        self.core.delete_namespace(name)

    def create_pods(self, namespace: str, manifests: Iterable[Mapping[str, Any]]) -> None:
        for manifest in manifests:
            self.core.create_namespaced_pod(namespace, dict(manifest))

    def uids(self) -> dict[str, str]:
        """Every object a kill must not lose: `kind/namespace/name` -> uid."""
        out = {f"Pod/{p.namespace}/{p.name}": p.uid for p in self.pods()}
        out |= {f"Node//{n.name}": n.meta.uid for n in self.nodes().values()}
        out |= {f"Device//{name}": d.meta.uid for name, d in self.devices().items()}
        out |= {f"Namespace//{ns.metadata.name}": ns.metadata.uid for ns in self.core.list_namespace().items}
        return out


@contextlib.contextmanager
def module_up(workdir: Path, *flags: str) -> Iterator[Up]:
    """`tessera up` with 3 simulated 8-GPU nodes (and this machine) and `flags`; at the end, no
    component may have been refused a call (403) and Ctrl-C must stop everything cleanly."""
    with Up.started(workdir / "data", "--nodes", "3", "--profile", "a100-8x", *flags) as running:
        yield running
        assert running.forbidden_calls() == [], "a component called what its role in deploy/ lacks"
        code = running.interrupt()
        assert code == 0, running.output()
