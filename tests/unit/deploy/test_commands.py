"""The containers run real `tessera` commands: their args parse with the real CLI and validate as
settings, their ports, probes and scrape annotations are what the component serves, and the
files their flags name come from the ConfigMaps shipped beside them, in a form the component
reads."""

import urllib.request
from pathlib import Path
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry

from agent.qos import config as qos_config
from apis.extension import names
from kube import serving
from scheduler.cache import ClusterCache
from scheduler.core import build_frameworks
from scheduler.framework import load_config
from scheduler.service import http_server
from scheduler.service.scoretable import DebugFlags
from tests.support import manifests
from tests.support.manifests import NAMESPACE, Manifest, Obj

CONTAINERS = [pytest.param(m, c, id=f"{m.name}/{c['name']}") for m, c in manifests.all_containers()]

#: The paths each component's HTTP server answers that the manifests use. The scheduler's and
#: the controller's are checked against their servers below; the agent's come from
#: agent/app.py (`Agent._serve_http`: /healthz beside the exporter's /metrics), the dashboard's
#: from dashboard/server.py (the page and its probes; it exports no metrics).
SERVED_PATHS = {
    "scheduler": {"/healthz", "/readyz", "/metrics"},
    "controller": {"/healthz", "/readyz", "/metrics"},
    "descheduler": {"/healthz", "/readyz", "/metrics"},
    "agent": {"/healthz", "/metrics"},
    "dashboard": {"/healthz", "/readyz"},
}


def served(sub: str, settings: Any) -> dict[str, tuple[str, int]]:
    """What the component listens on over TCP, by role: HTTP (health, metrics) and gRPC."""
    if sub == "scheduler":
        host, _, port = settings.http.address.rpartition(":")
        ports = {"http": (host, int(port))}
        grpc = settings.grpc.endpoint()
        if grpc is not None and grpc.socket is None:
            ports["grpc"] = (grpc.host, grpc.port)
        return ports
    if sub == "controller":
        ports = {"http": (settings.manager.serving.host, settings.manager.serving.port)}
        if settings.webhook.enabled:
            ports["webhook"] = (settings.webhook.host, settings.webhook.port)
        return ports
    if sub == "descheduler":
        return {"http": (settings.serving.host, settings.serving.port)}
    if sub == "agent":
        return {"http": (settings.metrics.host, settings.metrics.port)}
    if sub == "dashboard":
        return {"http": (settings.host, settings.port)}
    raise AssertionError(f"no workload should run tessera {sub}")


def container_ports(container: Obj) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for p in container.get("ports", [])}


def probe_port(container: Obj, probe: Obj) -> int:
    port = probe["httpGet"]["port"]
    return container_ports(container)[port] if isinstance(port, str) else int(port)


def test_every_component_runs_in_exactly_one_workload() -> None:
    subs = sorted(manifests.subcommand(c) for _, c in manifests.all_containers())
    assert subs == sorted(manifests.WORKLOADS)
    for sub, name in manifests.WORKLOADS.items():
        assert [manifests.subcommand(c) for c in manifests.containers(manifests.workload(name))] == [sub]


@pytest.mark.parametrize(("m", "container"), CONTAINERS)
def test_args_parse_with_the_real_cli_and_validate(
    m: Manifest, container: Obj, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert manifests.settings(container, monkeypatch) is not None


def test_an_unknown_flag_fails_the_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    container = {"name": "c", "command": ["tessera"], "args": ["controller", "--leader-elect-namespace=x"]}
    with pytest.raises(pytest.fail.Exception, match="unrecognized arguments: --leader-elect-namespace=x"):
        manifests.parse_args(container, monkeypatch)


@pytest.mark.parametrize(("m", "container"), CONTAINERS)
def test_container_ports_are_what_the_component_serves(
    m: Manifest, container: Obj, monkeypatch: pytest.MonkeyPatch
) -> None:
    sub = manifests.subcommand(container)
    listens = served(sub, manifests.settings(container, monkeypatch))
    assert sorted(container_ports(container).values()) == sorted(port for _, port in listens.values())
    # Probes and Prometheus come from outside the pod: loopback would not do.
    assert {host for host, _ in listens.values()} == {"0.0.0.0"}


@pytest.mark.parametrize(("m", "container"), CONTAINERS)
def test_probes_ask_the_http_port_for_paths_it_serves(
    m: Manifest, container: Obj, monkeypatch: pytest.MonkeyPatch
) -> None:
    sub = manifests.subcommand(container)
    http_port = served(sub, manifests.settings(container, monkeypatch))["http"][1]
    assert {"readinessProbe", "livenessProbe"} <= container.keys()
    for kind in ("readinessProbe", "livenessProbe", "startupProbe"):
        if kind in container:
            probe = container[kind]
            assert probe_port(container, probe) == http_port, kind
            assert probe["httpGet"]["path"] in SERVED_PATHS[sub], kind
    # Where the component tells readiness apart (caches synced), the readiness probe asks that.
    expected = "/readyz" if "/readyz" in SERVED_PATHS[sub] else "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == expected
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"


@pytest.mark.parametrize(("m", "container"), CONTAINERS)
def test_prometheus_scrapes_the_metrics_port(m: Manifest, container: Obj, monkeypatch: pytest.MonkeyPatch) -> None:
    sub = manifests.subcommand(container)
    http_port = served(sub, manifests.settings(container, monkeypatch))["http"][1]
    annotations = manifests.pod_template(m)["metadata"].get("annotations") or {}
    if "/metrics" not in SERVED_PATHS[sub]:  # nothing to scrape: Prometheus must not try (a target down)
        assert "prometheus.io/scrape" not in annotations
        return
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == str(http_port)
    assert annotations["prometheus.io/path"] == "/metrics"
    assert "/metrics" in SERVED_PATHS[sub]


def test_the_scheduler_serves_the_paths_the_manifests_use() -> None:
    server = http_server.new_server(
        "127.0.0.1:0",
        inspector=cast(Any, None),  # only the diagnostics routes need it
        debug=DebugFlags(),
        registry=CollectorRegistry(),
        liveness={"x": lambda: ""},
        readiness={"y": lambda: ""},
    )
    for path in SERVED_PATHS["scheduler"]:
        assert server.dispatch("GET", path, b"").status == 200, path
    assert server.dispatch("GET", "/nope", b"").status == 404  # the check can fail


def test_the_controller_serves_the_paths_the_manifests_use() -> None:
    endpoints = serving.Server(
        "controller HTTP", host="127.0.0.1", port=0, registry=CollectorRegistry(), liveness={"x": lambda: ""}
    )
    endpoints.start()
    try:
        for path in SERVED_PATHS["controller"]:
            with urllib.request.urlopen(f"http://127.0.0.1:{endpoints.port}{path}", timeout=5) as response:
                assert response.status == 200, path
    finally:
        endpoints.stop()


# --- leader election and identity ----------------------------------------------------------------------


@pytest.mark.parametrize("sub", ["scheduler", "controller", "descheduler"])
def test_replicas_elect_a_leader_in_tessera_system(sub: str, monkeypatch: pytest.MonkeyPatch) -> None:
    m = manifests.workload(manifests.WORKLOADS[sub])
    (container,) = manifests.containers(m)
    settings = manifests.settings(container, monkeypatch)
    election = settings.manager.leader_election if sub == "controller" else settings.leader_election
    assert m.obj["spec"]["replicas"] >= 2
    assert election is not None and election.namespace == NAMESPACE
    # The replica's name in the Lease is its pod's name.
    assert manifests.field_env(container)["POD_NAME"] == "metadata.name"
    assert election.identity == manifests.DOWNWARD_EXAMPLES["metadata.name"]


# --- files named by flags --------------------------------------------------------------------------------


def config_map_file(m: Manifest, container: Obj, path: Path) -> str:
    volume, key = manifests.mounted_file(m, container, str(path))
    assert "configMap" in volume, f"{path} should come from a ConfigMap"
    config_map = manifests.find("ConfigMap", volume["configMap"]["name"], m.namespace)
    assert config_map is not None
    assert key in config_map.obj["data"], f"ConfigMap {config_map.name} has no key {key}"
    return str(config_map.obj["data"][key])


def test_the_scheduler_config_loads_and_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    m = manifests.workload(manifests.WORKLOADS["scheduler"])
    (container,) = manifests.containers(m)
    settings = manifests.settings(container, monkeypatch)
    assert settings.config_file is not None
    config = load_config(config_map_file(m, container, settings.config_file))
    frameworks = build_frameworks(config, ClusterCache())  # each plugin's new() checks its args
    assert names.SCHEDULER_NAME in frameworks


def test_the_agent_qos_config_parses_and_enables_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    m = manifests.workload(manifests.WORKLOADS["agent"])
    (container,) = manifests.containers(m)
    settings = manifests.settings(container, monkeypatch)
    assert settings.qos.config_path is not None
    text = config_map_file(m, container, settings.qos.config_path)
    assert qos_config.load(text, source="tessera-agent-config") == qos_config.QoSConfig()
    # Mounted as a directory (no subPath), so edits reach the running agents.
    assert all("subPath" not in mount for mount in container["volumeMounts"])


# --- the agent sees the host ---------------------------------------------------------------------------


def test_the_agent_is_the_node_it_runs_on(monkeypatch: pytest.MonkeyPatch) -> None:
    (container,) = manifests.containers(manifests.workload(manifests.WORKLOADS["agent"]))
    assert manifests.field_env(container)["NODE_NAME"] == "spec.nodeName"
    assert manifests.settings(container, monkeypatch).node_name == manifests.DOWNWARD_EXAMPLES["spec.nodeName"]


def test_the_agent_reads_the_hosts_proc_dev_and_cgroups(monkeypatch: pytest.MonkeyPatch) -> None:
    m = manifests.workload(manifests.WORKLOADS["agent"])
    (container,) = manifests.containers(m)
    spec = manifests.pod_spec(m)
    settings = manifests.settings(container, monkeypatch)
    assert manifests.host_path(m, container, settings.metrics.proc_root) == "/proc"
    # RDMA device nodes are answered to the runtime proxy as host paths: same path in both.
    assert manifests.host_path(m, container, settings.hooks.dev_root) == str(settings.hooks.dev_root) == "/dev"
    # Node QoS finds the cgroup mounts in /proc/self/mounts: the host's tree must be there.
    assert manifests.host_path(m, container, Path("/sys/fs/cgroup")) == "/sys/fs/cgroup"
    # sysfs: the container's own, which is the host's for a privileged pod in the host network
    # namespace (PCI devices, and the host's interfaces under /sys/class/net).
    assert settings.discovery.sysfs_root == Path("/sys")
    assert spec["hostNetwork"] is True
    assert container["securityContext"]["privileged"] is True
    # Simulation is for `tessera up`, never a cluster.
    assert not settings.discovery.simulate and not settings.kubelet.enabled


@pytest.mark.parametrize("sub", ["scheduler", "controller", "descheduler"])
def test_control_plane_pods_run_unprivileged(sub: str) -> None:
    m = manifests.workload(manifests.WORKLOADS[sub])
    pod = manifests.pod_spec(m)
    (container,) = manifests.containers(m)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert "hostNetwork" not in pod and all("hostPath" not in v for v in pod.get("volumes", []))
