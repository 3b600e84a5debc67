"""The proxy's integration rig: hook servers that record or mark what they see, and `Rig`, which
starts them and the proxy on a test's own sockets and talks to it as kubelet does (the `rig`
fixture in conftest.py makes one per test).
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from cri_api.v1 import api_pb2 as cri

from agent.hooks import GPUEnvPlugin, HookPlugin, HookServer
from apis.extension import names
from cli.launchers.runtimeproxy import RuntimeProxyProcess
from proto.runtime.v1alpha1 import api_pb2 as hook
from runtimeproxy import ProxySettings, RuntimeProxy
from runtimeproxy.hookconfig import HookType
from tests.support import containerd

ROOT: Final = Path(__file__).resolve().parents[3]


ALL_HOOKS: Final = tuple(h.value for h in HookType)


#: An annotation a PreRunPodSandbox hook adds; only the runtime knows it afterwards.
MARK_ANNOTATION: Final = "tessera.test/mark"


MARK_ENV: Final = "TESSERA_TEST_MARK"


def gpu_annotation(*minors: int) -> dict[str, str]:
    return {names.ANNOTATION_DEVICE_ALLOCATED: json.dumps({"gpu": [{"minor": m} for m in minors]})}


class Recorder(HookPlugin):
    """Records every hook request it gets, by hook name."""

    name = "recorder"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: list[tuple[str, hook.PodSandboxHookRequest | hook.ContainerResourceHookRequest]] = []

    def _record(self, name: str, request: hook.PodSandboxHookRequest | hook.ContainerResourceHookRequest) -> None:
        with self._lock:
            self.calls.append((name, request))

    def hooks(self) -> list[str]:
        with self._lock:
            return [name for name, _ in self.calls]

    def pre_run_pod_sandbox(self, request: hook.PodSandboxHookRequest, response: hook.PodSandboxHookResponse) -> None:
        self._record("PreRunPodSandbox", request)

    def post_stop_pod_sandbox(self, request: hook.PodSandboxHookRequest, response: hook.PodSandboxHookResponse) -> None:
        self._record("PostStopPodSandbox", request)

    def pre_create_container(
        self, request: hook.ContainerResourceHookRequest, response: hook.ContainerResourceHookResponse
    ) -> None:
        self._record("PreCreateContainer", request)

    def pre_start_container(
        self, request: hook.ContainerResourceHookRequest, response: hook.ContainerResourceHookResponse
    ) -> None:
        self._record("PreStartContainer", request)

    def post_start_container(
        self, request: hook.ContainerResourceHookRequest, response: hook.ContainerResourceHookResponse
    ) -> None:
        self._record("PostStartContainer", request)

    def post_stop_container(
        self, request: hook.ContainerResourceHookRequest, response: hook.ContainerResourceHookResponse
    ) -> None:
        self._record("PostStopContainer", request)

    def pre_update_container_resources(
        self, request: hook.ContainerResourceHookRequest, response: hook.ContainerResourceHookResponse
    ) -> None:
        self._record("PreUpdateContainerResources", request)


class Marker(HookPlugin):
    """Marks the sandbox at PreRunPodSandbox and copies the mark into the container's env."""

    name = "marker"

    def pre_run_pod_sandbox(self, request: hook.PodSandboxHookRequest, response: hook.PodSandboxHookResponse) -> None:
        response.annotations[MARK_ANNOTATION] = f"sandbox-of-{request.pod_meta.name}"

    def pre_create_container(
        self, request: hook.ContainerResourceHookRequest, response: hook.ContainerResourceHookResponse
    ) -> None:
        if MARK_ANNOTATION in request.pod_annotations:
            response.container_envs[MARK_ENV] = request.pod_annotations[MARK_ANNOTATION]


class Rig:
    """One test's hook servers, hook config directory and proxy, in front of the session's containerd."""

    def __init__(self, ctrd: containerd.Containerd, workdir: Path) -> None:
        self.ctrd = ctrd
        self.workdir = workdir
        self.config_dir = workdir / "hookserver.d"
        self.config_dir.mkdir()
        self.proxy_socket = workdir / "proxy.sock"
        self.direct = containerd.CRIClient(ctrd.address, cgroup_parent=ctrd.cgroup_parent)
        self._servers: list[HookServer] = []
        self._proxies: list[RuntimeProxy] = []
        self._processes: list[RuntimeProxyProcess] = []
        self._clients: list[containerd.CRIClient] = [self.direct]
        self._registered = 0

    def register(self, socket: Path, *, policy: str = "Fail", hooks: Sequence[str] = ALL_HOOKS) -> None:
        """Write a Koordinator-style config file for a hook server at `socket`."""
        doc = {"remote-endpoint": str(socket), "failure-policy": policy, "runtime-hooks": list(hooks)}
        (self.config_dir / f"{self._registered:02d}-hooks.json").write_text(json.dumps(doc))
        self._registered += 1

    def hook_server(self, *plugins: HookPlugin, policy: str = "Fail", hooks: Sequence[str] = ALL_HOOKS) -> HookServer:
        """Start a hook server with `plugins` and register it."""
        server = HookServer(plugins or [GPUEnvPlugin()], socket_path=self.workdir / f"hooks-{len(self._servers)}.sock")
        server.start()
        self._servers.append(server)
        self.register(server.socket_path, policy=policy, hooks=hooks)
        return server

    def settings(self) -> ProxySettings:
        return ProxySettings(
            listen=self.proxy_socket,
            runtime_endpoint=self.ctrd.address,
            hook_config_dir=self.config_dir,
            config_rescan_s=0.0,
        )

    def proxy(self, **overrides: Any) -> RuntimeProxy:
        """Start the proxy in this process; `overrides` replace settings (`apply_cdi=True`, ...)."""
        proxy = RuntimeProxy(dataclasses.replace(self.settings(), **overrides))
        proxy.start()
        self._proxies.append(proxy)
        return proxy

    def proxy_process(self) -> RuntimeProxyProcess:
        """Start `tessera runtime-proxy` as its own process, as a node runs it."""
        process = RuntimeProxyProcess(self.settings(), log_path=self.workdir / f"proxy-{len(self._processes)}.log")
        self._processes.append(process)
        process.start()
        return process

    def kubelet(self) -> containerd.CRIClient:
        """A CRI client that talks to the proxy, as kubelet would."""
        client = containerd.CRIClient(f"unix://{self.proxy_socket}", cgroup_parent=self.ctrd.cgroup_parent)
        self._clients.append(client)
        return client

    def run_pod(
        self,
        client: containerd.CRIClient,
        name: str,
        *,
        annotations: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> tuple[str, cri.PodSandboxConfig]:
        config = client.pod_config(name, annotations=annotations, labels=labels)
        return client.run_pod(config), config

    def close(self) -> None:
        for process in self._processes:
            process.stop()
        for proxy in self._proxies:
            proxy.stop(grace_s=None)
        for server in self._servers:
            server.stop(grace_s=None)
        try:
            self.direct.remove_all_pods()
        finally:
            for client in self._clients:
                client.close()
