"""deploy/node/: what is installed on each node beside the agent's pod. The hook server
registration loads with the runtime proxy's own loader and points at the socket the agent's
DaemonSet creates on the host; the systemd unit runs a `tessera runtime-proxy` command line the
real CLI accepts, reading that registration's directory; kubelet is pointed at its socket."""

import shlex
from pathlib import Path
from typing import Any

import pytest

from kube import unixsocket
from runtimeproxy import hookconfig
from runtimeproxy.settings import DEFAULT_RUNTIME_ENDPOINT
from tests.support import manifests
from tests.support.manifests import DEPLOY

NODE = DEPLOY / "node"
HOOK_CONFIG = NODE / "hookserver.d" / "tessera-agent.json"
UNIT = NODE / "tessera-runtime-proxy.service"
KUBELET_DROP_IN = NODE / "kubelet.service.d" / "20-tessera-runtime-proxy.conf"
DEPLOY_DOC = manifests.ROOT / "docs" / "user" / "deploy.md"


def unit_sections(path: Path) -> dict[str, dict[str, list[str]]]:
    """A systemd unit file: section -> key -> values (continuation lines joined)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    logical = ""
    for raw in path.read_text().splitlines():
        line = logical + raw.strip()
        if line.endswith("\\"):
            logical = line[:-1] + " "
            continue
        logical = ""
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"{path}: {line!r} before any section"
        key, sep, value = line.partition("=")
        assert sep, f"{path}: {line!r} is not KEY=VALUE"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def proxy_command() -> list[str]:
    (exec_start,) = unit_sections(UNIT)["Service"]["ExecStart"]
    return shlex.split(exec_start)


def proxy_settings(monkeypatch: pytest.MonkeyPatch) -> Any:
    argv = proxy_command()
    container = {"name": UNIT.name, "command": ["tessera"], "args": argv[1:]}
    return manifests.settings(container, monkeypatch)


def test_the_hook_config_loads_with_the_proxys_loader() -> None:
    config = hookconfig.parse(HOOK_CONFIG.read_text(), source=str(HOOK_CONFIG))
    # docs/runtime-proxy.md: use Fail for Tessera's agent (under Ignore a GPU pod created while
    # the agent is down would see every GPU).
    assert config.failure_policy is hookconfig.FailurePolicy.FAIL
    # Every hook the agent serves, and no name the proxy would skip as unknown.
    assert config.hooks == frozenset(hookconfig.HookType)
    assert HOOK_CONFIG.suffix == ".json"  # the proxy reads *.json only


def test_the_hook_config_points_at_the_agents_socket_on_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    m = manifests.workload(manifests.WORKLOADS["agent"])
    (container,) = manifests.containers(m)
    socket = manifests.settings(container, monkeypatch).hooks.socket_path
    config = hookconfig.parse(HOOK_CONFIG.read_text(), source=str(HOOK_CONFIG))
    assert str(unixsocket.path_of(config.endpoint)) == manifests.host_path(m, container, socket)


def test_the_unit_runs_a_runtime_proxy_the_cli_accepts(monkeypatch: pytest.MonkeyPatch) -> None:
    argv = proxy_command()
    assert argv[0] == "/opt/tessera/bin/tessera"
    assert argv[1] == "runtime-proxy"
    settings = proxy_settings(monkeypatch)
    # The registration above is installed into the directory the proxy reads.
    assert settings.hook_config_dir == hookconfig.DEFAULT_DIR
    assert HOOK_CONFIG.parent.name == hookconfig.DEFAULT_DIR.name


def test_the_unit_starts_between_containerd_and_kubelet() -> None:
    sections = unit_sections(UNIT)
    unit = sections["Unit"]
    assert "containerd.service" in unit["After"] and "containerd.service" in unit["Requires"]
    assert "kubelet.service" in unit["Before"]
    assert sections["Service"]["Restart"] == ["always"]
    assert sections["Install"]["WantedBy"] == ["multi-user.target"]
    drop_in = unit_sections(KUBELET_DROP_IN)["Unit"]
    assert drop_in["Wants"] == [UNIT.name] and drop_in["After"] == [UNIT.name]


def test_kubelet_is_told_the_socket_the_proxy_listens_on(monkeypatch: pytest.MonkeyPatch) -> None:
    listen = proxy_settings(monkeypatch).listen
    endpoint = f"unix://{listen}"
    assert f"--container-runtime-endpoint={endpoint}" in DEPLOY_DOC.read_text()
    assert f"containerRuntimeEndpoint: {endpoint}" in DEPLOY_DOC.read_text()
    assert f"containerRuntimeEndpoint: {endpoint}" in KUBELET_DROP_IN.read_text()


def test_the_proxy_forwards_to_containerds_default_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    assert proxy_settings(monkeypatch).runtime_endpoint == DEFAULT_RUNTIME_ENDPOINT


def test_the_doc_shows_the_units_command_line() -> None:
    assert f"`{' '.join(proxy_command())}`" in DEPLOY_DOC.read_text()
