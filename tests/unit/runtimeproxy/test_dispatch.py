"""Calling hook servers in order, with failure policies, over real gRPC on unix sockets."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import grpc
import pytest

from agent.hooks import HookError, HookPlugin, HookServer
from proto.runtime.v1alpha1 import api_pb2 as hook
from runtimeproxy.dispatch import Dispatcher, HookRejected
from runtimeproxy.hookclient import HookClient
from runtimeproxy.hookconfig import HookConfigDir, HookType

ALL_HOOKS = [h.value for h in HookType]


class AppendEnv(HookPlugin):
    """Appends its mark to env X, so the order servers ran in shows in the answer."""

    def __init__(self, mark: str) -> None:
        self.name = f"append-{mark}"
        self.mark = mark

    def pre_create_container(
        self, request: hook.ContainerResourceHookRequest, response: hook.ContainerResourceHookResponse
    ) -> None:
        response.container_envs["X"] = request.container_envs.get("X", "") + self.mark

    def pre_run_pod_sandbox(self, request: hook.PodSandboxHookRequest, response: hook.PodSandboxHookResponse) -> None:
        response.labels["seen"] = request.labels.get("seen", "") + self.mark


class Rejects(HookPlugin):
    name = "rejects"

    def pre_create_container(
        self, request: hook.ContainerResourceHookRequest, response: hook.ContainerResourceHookResponse
    ) -> None:
        raise HookError("bad pod")

    post_stop_container = pre_create_container


class Blocks(HookPlugin):
    """Answers only when released: a hook server slower than the proxy's deadline."""

    name = "blocks"

    def __init__(self) -> None:
        self.release = threading.Event()

    def pre_create_container(
        self, request: hook.ContainerResourceHookRequest, response: hook.ContainerResourceHookResponse
    ) -> None:
        self.release.wait(10)


@pytest.fixture
def registry(sock_dir: Path) -> Iterator[Callable[..., Dispatcher]]:
    """Factory: register hook servers (plugins, or None for a socket nobody serves) and dispatch to them."""
    servers: list[HookServer] = []
    clients: list[HookClient] = []
    config_dir = sock_dir / "hookserver.d"
    config_dir.mkdir()

    def make(*entries: tuple[Sequence[HookPlugin] | None, str], timeout_s: float = 2.0) -> Dispatcher:
        for index, (plugins, policy) in enumerate(entries):
            path = sock_dir / f"h{index}.sock"
            if plugins is not None:
                server = HookServer(plugins, socket_path=path)
                server.start()
                servers.append(server)
            doc = {"remote-endpoint": str(path), "failure-policy": policy, "runtime-hooks": ALL_HOOKS}
            (config_dir / f"{index:02d}.json").write_text(json.dumps(doc))
        client = HookClient(timeout_s=timeout_s)
        clients.append(client)
        return Dispatcher(HookConfigDir(config_dir), client)

    yield make
    for client in clients:
        client.close()
    for server in servers:
        server.stop(grace_s=None)


def create(dispatcher: Dispatcher) -> hook.ContainerResourceHookResponse:
    return dispatcher.container(HookType.PRE_CREATE_CONTAINER, hook.ContainerResourceHookRequest(), pod="ns/p")


def test_servers_run_in_order_each_seeing_the_answers_before_it(registry: Callable[..., Dispatcher]) -> None:
    dispatcher = registry(([AppendEnv("a")], "Fail"), ([AppendEnv("b")], "Fail"), ([AppendEnv("c")], "Ignore"))
    assert create(dispatcher).container_envs["X"] == "abc"
    sandbox = dispatcher.pod_sandbox(HookType.PRE_RUN_POD_SANDBOX, hook.PodSandboxHookRequest(), pod="ns/p")
    assert sandbox.labels["seen"] == "abc"


def test_no_servers_means_an_empty_answer(registry: Callable[..., Dispatcher]) -> None:
    dispatcher = registry()
    assert not dispatcher.wants(HookType.PRE_CREATE_CONTAINER)
    assert create(dispatcher) == hook.ContainerResourceHookResponse()


def test_down_server_under_ignore_is_skipped_with_a_warning(
    registry: Callable[..., Dispatcher], caplog: pytest.LogCaptureFixture
) -> None:
    dispatcher = registry((None, "Ignore"), ([AppendEnv("b")], "Fail"))
    assert create(dispatcher).container_envs["X"] == "b"
    [record] = [r for r in caplog.records if r.message == "Runtime hook failed; going on without it"]
    assert (record.pod, record.code, record.hook) == ("ns/p", "UNAVAILABLE", "PreCreateContainer")


def test_down_server_under_fail_rejects(registry: Callable[..., Dispatcher], sock_dir: Path) -> None:
    dispatcher = registry(([AppendEnv("a")], "Ignore"), (None, "Fail"))
    with pytest.raises(HookRejected) as info:
        create(dispatcher)
    message = str(info.value)
    assert message.startswith(f"pod ns/p: runtime hook PreCreateContainer at {sock_dir / 'h1.sock'}: UNAVAILABLE: ")
    assert message.endswith("(failure-policy Fail)")
    assert info.value.cause.code == grpc.StatusCode.UNAVAILABLE


def test_hook_error_under_fail_carries_the_plugin_message(registry: Callable[..., Dispatcher]) -> None:
    dispatcher = registry(([Rejects()], "Fail"))
    with pytest.raises(HookRejected, match="INVALID_ARGUMENT: rejects: bad pod"):
        create(dispatcher)


def test_post_hooks_never_reject(registry: Callable[..., Dispatcher], caplog: pytest.LogCaptureFixture) -> None:
    dispatcher = registry(([Rejects()], "Fail"))
    dispatcher.container(HookType.POST_STOP_CONTAINER, hook.ContainerResourceHookRequest(), pod="ns/p")
    assert any(r.message == "Runtime hook failed; going on without it" for r in caplog.records)


def test_slow_server_counts_as_failed(registry: Callable[..., Dispatcher]) -> None:
    blocker = Blocks()
    dispatcher = registry(([blocker], "Fail"), timeout_s=0.2)
    try:
        with pytest.raises(HookRejected, match="DEADLINE_EXCEEDED"):
            create(dispatcher)
    finally:
        blocker.release.set()
