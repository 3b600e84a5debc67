"""`tessera agent` flags become `AgentSettings`; the flags' defaults are the settings' defaults."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from agent.discovery.settings import DiscoverySettings
from agent.hooks.hamicore import HAMiCore
from agent.settings import (
    AgentSettings,
    HealthSettings,
    HookSettings,
    KubeletSettings,
    MetricsSettings,
    QoSMode,
    QoSSettings,
    ReportSettings,
)
from apis.errors import ConfigError
from apis.k8s.core import Taint
from cli import agent as cli_agent
from kube.client import ClientSettings


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli_agent.add_arguments(parser)
    return parser.parse_args(argv)


def test_defaults_are_the_settings_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NODE_NAME", raising=False)
    settings = cli_agent.settings_from(parse("--node-name", "n1"))
    assert settings == AgentSettings(
        discovery=DiscoverySettings(node_name="n1"), client=ClientSettings(user_agent="tessera-agent")
    )


def test_the_node_name_comes_from_the_environment_in_a_daemonset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NODE_NAME", "gpu-7")
    assert cli_agent.settings_from(parse()).node_name == "gpu-7"


def test_every_flag_lands_in_its_setting() -> None:
    args = parse(
        "--node-name=n2",
        "--kubeconfig=/k",
        "--simulate-devices=h100-8x",
        "--sysfs-root=/host/sys",
        "--no-nvml",
        "--no-netlink",
        "--discovery-interval=30",
        "--device-resync-interval=20",
        "--health-interval=0.5",
        "--health-quiet-period=60",
        "--metrics-address=127.0.0.1:0",
        "--metrics-address-file=/tmp/a",
        "--register-with-taints=pool=gpu:NoSchedule,drain:NoExecute",
        "--node-labels=pool=gpu,zone=a",
        "--metrics-interval=5",
        "--proc-root=/host/proc",
        "--hook-socket=/run/t.sock",
        "--no-hook-server",
        "--dev-root=/host/dev",
        "--hami-core-library-directory-path=/opt/hami/libvgpu.so",
        "--hami-core-lock-dir=/var/lock/vgpu",
        "--hami-core-vgpu-monitor",
        "--qos=on",
        "--qos-config=/etc/slo.yaml",
        "--cgroup-root=/k8s",
        "--qos-reconcile-interval=3",
        "--network-qos-interface=eth1",
        "--simulate-kubelet",
        "--node-ip=10.0.0.9",
        "--node-lease-interval=2",
        "--node-status-interval=4",
        "--state-dir=/var/lib/t",
    )
    assert cli_agent.settings_from(args) == AgentSettings(
        discovery=DiscoverySettings(
            node_name="n2", sysfs_root=Path("/host/sys"), simulate="h100-8x", nvml=False, netlink=False
        ),
        client=ClientSettings(kubeconfig=Path("/k"), user_agent="tessera-agent"),
        health=HealthSettings(interval_s=0.5, quiet_period_s=60),
        metrics=MetricsSettings(
            host="127.0.0.1", port=0, interval_s=5, address_file=Path("/tmp/a"), proc_root=Path("/host/proc")
        ),
        report=ReportSettings(discovery_interval_s=30, resync_interval_s=20),
        hooks=HookSettings(
            enabled=False,
            socket_path=Path("/run/t.sock"),
            dev_root=Path("/host/dev"),
            hami_core=HAMiCore(
                library=Path("/opt/hami/libvgpu.so"), lock_dir=Path("/var/lock/vgpu"), vgpu_monitor=True
            ),
        ),
        qos=QoSSettings(
            mode=QoSMode.ON,
            config_path=Path("/etc/slo.yaml"),
            cgroup_root="/k8s",
            reconcile_interval_s=3,
            network_interface="eth1",
        ),
        kubelet=KubeletSettings(
            enabled=True,
            lease_renew_s=2,
            status_report_s=4,
            node_ip="10.0.0.9",
            taints=(Taint("pool", "gpu", "NoSchedule"), Taint("drain", "", "NoExecute")),
            labels={"pool": "gpu", "zone": "a"},
        ),
        state_dir=Path("/var/lib/t"),
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((), "--node-name is required"),
        (("--node-name=n", "--metrics-address=9316"), "expected HOST:PORT"),
        (("--node-name=n", "--register-with-taints=pool=gpu"), "'pool=gpu': expected key=value:Effect"),
        (("--node-name=n", "--register-with-taints=a:Never"), "Effect one of NoSchedule, PreferNoSchedule"),
        (("--node-name=n", "--node-labels=pool"), "--node-labels 'pool': expected key=value"),
        (
            ("--node-name=n", "--hami-core-library-directory-path=libvgpu.so"),
            "--hami-core-library-directory-path libvgpu.so: must be an absolute path on the host",
        ),
    ],
    ids=["no-node", "bad-address", "taint-no-effect", "taint-bad-effect", "label-no-value", "relative-library"],
)
def test_bad_flags_are_config_errors(argv: tuple[str, ...], message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NODE_NAME", raising=False)
    with pytest.raises(ConfigError, match=message):
        cli_agent.settings_from(parse(*argv))


@pytest.mark.parametrize("value", ["0", "-1", "soon"])
def test_intervals_must_be_positive_seconds(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("--node-name=n", f"--health-interval={value}")
    assert "--health-interval" in capsys.readouterr().err
