"""`tessera agent`: the node agent (see docs/agent.md).

Thin: flags become `AgentSettings`; `agent.run` does the rest.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import agent
from agent import (
    DEFAULT_STATE_DIR,
    AgentSettings,
    DiscoverySettings,
    DRASettings,
    HealthSettings,
    HookSettings,
    KubeletSettings,
    MetricsSettings,
    QoSMode,
    QoSSettings,
    ReportSettings,
)
from agent.hooks.hamicore import HAMiCore
from apis.errors import ConfigError
from apis.extension.partitions import PartitionPolicy
from apis.k8s.core import Taint
from kube import servingflags
from kube.client import ClientSettings


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags; their defaults are the settings' defaults (one place says what they are)."""
    discovery, health, metrics = DiscoverySettings(node_name=""), HealthSettings(), MetricsSettings()
    report, hooks, qos_defaults, kubelet_defaults = ReportSettings(), HookSettings(), QoSSettings(), KubeletSettings()
    node = parser.add_argument_group("node")
    node.add_argument(
        "--node-name",
        default=os.environ.get("NODE_NAME", ""),
        metavar="NAME",
        help="this node's name (default: $NODE_NAME, as a DaemonSet sets it from spec.nodeName)",
    )
    node.add_argument(
        "--state-dir",
        type=Path,
        default=DEFAULT_STATE_DIR,
        metavar="DIR",
        help="where the agent keeps what outlives it: GPU faults waiting for a reset (one directory per agent)",
    )
    ClientSettings.add_arguments(parser)

    devices = parser.add_argument_group("devices")
    devices.add_argument(
        "--simulate-devices",
        default="",
        metavar="PROFILE|FILE",
        help="simulated GPUs and NICs instead of real ones: a100-8x, h100-8x, a100-pcie-4x, t4-2x "
        "or a profile YAML file",
    )
    devices.add_argument("--sysfs-root", type=Path, default=discovery.sysfs_root, metavar="DIR", help="where sysfs is")
    devices.add_argument("--no-nvml", action="store_true", help="do not use NVML (report no GPUs)")
    devices.add_argument("--no-netlink", action="store_true", help="do not look up RDMA netdevs over netlink")
    devices.add_argument(
        "--discovery-interval",
        type=_seconds,
        default=report.discovery_interval_s,
        metavar="S",
        help="seconds between discovery passes",
    )
    devices.add_argument(
        "--device-resync-interval",
        type=_seconds,
        default=report.resync_interval_s,
        metavar="S",
        help="seconds between full re-reads of the Device CR and the Node (changes are pushed at once)",
    )
    devices.add_argument(
        "--gpu-partition-policy",
        choices=[p.value for p in PartitionPolicy],
        default=report.gpu_partition_policy.value,
        help="the node.koordinator.sh/gpu-partition-policy label written with the GPU partition table: "
        "Prefer (a partition when one is free) or Honor (multi-GPU pods get a partition or nothing)",
    )
    devices.add_argument(
        "--dra",
        action=argparse.BooleanOptionalAction,
        default=report.dra,
        help="also publish the node's GPUs (driver gpu.tessera.dev) and RDMA NICs (rdma.tessera.dev) as DRA "
        "ResourceSlices, tainting unhealthy ones (default off: only for clusters whose DRA claims Tessera "
        "schedules; tessera up turns it on)",
    )
    devices.add_argument(
        "--health-interval", type=_seconds, default=health.interval_s, metavar="S", help="health probe period"
    )
    devices.add_argument(
        "--health-quiet-period",
        type=_seconds,
        default=health.quiet_period_s,
        metavar="S",
        help="seconds without errors before an unhealthy device is healthy again",
    )

    http = parser.add_argument_group("metrics and HTTP")
    http.add_argument(
        "--metrics-address",
        default=f"{metrics.host}:{metrics.port}",
        metavar="HOST:PORT",
        help="serve /metrics, /healthz (and /debug/simulate/ with simulated devices) here; port 0 picks one",
    )
    http.add_argument("--metrics-address-file", type=Path, metavar="PATH", help="write the bound HOST:PORT here")
    http.add_argument(
        "--metrics-interval", type=_seconds, default=metrics.interval_s, metavar="S", help="GPU reading period"
    )
    http.add_argument("--proc-root", type=Path, default=metrics.proc_root, metavar="DIR", help="the host's /proc")
    servingflags.add_tls_arguments(http)

    hook_flags = parser.add_argument_group("runtime hooks")
    hook_flags.add_argument(
        "--hook-socket", type=Path, default=hooks.socket_path, metavar="PATH", help="the hook server's unix socket"
    )
    hook_flags.add_argument("--no-hook-server", action="store_true", help="do not serve runtime hooks")
    hook_flags.add_argument(
        "--dev-root", type=Path, default=hooks.dev_root, metavar="DIR", help="where device nodes are"
    )
    hook_flags.add_argument(
        "--hami-core-library-directory-path",
        type=Path,
        default=hooks.hami_core.library,
        metavar="PATH",
        help="HAMi-core's library file on the host (koordlet's flag): preloaded into pods labelled "
        "koordinator.sh/gpu-isolation-provider=HAMi-core; where it is a file, the node is labelled so",
    )
    hook_flags.add_argument(
        "--hami-core-lock-dir",
        type=Path,
        default=hooks.hami_core.lock_dir,
        metavar="DIR",
        help="the host directory mounted at /tmp/vgpulock in HAMi-core pods (created with mode 0777)",
    )
    hook_flags.add_argument(
        "--hami-core-vgpu-monitor",
        action="store_true",
        help="give each HAMi-core container a cache directory for HAMi's vGPU monitor "
        "(koordlet's HamiCoreVGPUMonitor feature gate)",
    )

    qos = parser.add_argument_group("node QoS")
    qos.add_argument(
        "--qos",
        choices=[mode.value for mode in QoSMode],
        default=qos_defaults.mode.value,
        help="auto: what the NodeSLO enables, with real devices only; on: also with simulated devices, "
        "and cgroup QoS even when the NodeSLO enables no class; off: none",
    )
    qos.add_argument("--qos-config", type=Path, metavar="PATH", help="NodeSLO or slo-controller ConfigMap YAML")
    qos.add_argument("--cgroup-root", default=qos_defaults.cgroup_root, metavar="PATH", help="kubelet's --cgroup-root")
    qos.add_argument(
        "--qos-reconcile-interval",
        type=_seconds,
        default=qos_defaults.reconcile_interval_s,
        metavar="S",
        help="reconcile period",
    )
    qos.add_argument("--network-qos-interface", default="", metavar="IFNAME", help="egress interface for network QoS")

    dra_defaults = DRASettings()
    dra = parser.add_argument_group("kubelet DRA plugin (driver gpu.tessera.dev)")
    dra.add_argument(
        "--dra-plugin",
        action="store_true",
        help="serve kubelet's DRA plugin: prepare ResourceClaims' GPUs, write their CDI specs",
    )
    dra.add_argument(
        "--kubelet-registry-dir",
        type=Path,
        default=dra_defaults.registry_dir,
        metavar="DIR",
        help="kubelet's plugins_registry directory (the registration socket)",
    )
    dra.add_argument(
        "--dra-plugin-dir",
        type=Path,
        default=dra_defaults.plugin_dir,
        metavar="DIR",
        help="the plugin's socket directory",
    )
    dra.add_argument(
        "--cdi-dir", type=Path, default=dra_defaults.cdi_dir, metavar="DIR", help="where prepared claims' CDI specs go"
    )
    kubelet = parser.add_argument_group("simulated kubelet")
    kubelet.add_argument(
        "--simulate-kubelet",
        action="store_true",
        help="act as this node's kubelet: register the Node, keep it Ready, mark its pods Running (no containers)",
    )
    kubelet.add_argument("--node-ip", default="", metavar="IP", help="the Node's InternalIP (default: a made-up one)")
    kubelet.add_argument(
        "--register-with-taints",
        default="",
        metavar="TAINTS",
        help="taints the Node is created with, as kubelet's flag: key=value:Effect,key:Effect",
    )
    kubelet.add_argument(
        "--node-labels", default="", metavar="LABELS", help="labels of the Node, as kubelet's flag: key=value,..."
    )
    kubelet.add_argument(
        "--node-lease-interval",
        type=_seconds,
        default=kubelet_defaults.lease_renew_s,
        metavar="S",
        help="Lease renewal",
    )
    kubelet.add_argument(
        "--node-status-interval",
        type=_seconds,
        default=kubelet_defaults.status_report_s,
        metavar="S",
        help="status reports",
    )


def settings_from(args: argparse.Namespace) -> AgentSettings:
    """Raises ConfigError for flags that do not make sense together or do not parse."""
    if not args.node_name:
        raise ConfigError("--node-name is required (or set $NODE_NAME)")
    for flag, path in (
        ("--hami-core-library-directory-path", args.hami_core_library_directory_path),
        ("--hami-core-lock-dir", args.hami_core_lock_dir),
    ):
        if not path.is_absolute():
            raise ConfigError(f"{flag} {path}: must be an absolute path on the host")
    host, sep, port = args.metrics_address.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"--metrics-address {args.metrics_address!r}: expected HOST:PORT")
    return AgentSettings(
        discovery=DiscoverySettings(
            node_name=args.node_name,
            sysfs_root=args.sysfs_root,
            simulate=args.simulate_devices,
            nvml=not args.no_nvml,
            netlink=not args.no_netlink,
        ),
        client=ClientSettings.from_args(args, user_agent="tessera-agent"),
        health=HealthSettings(interval_s=args.health_interval, quiet_period_s=args.health_quiet_period),
        metrics=MetricsSettings(
            host=host.strip("[]") or "0.0.0.0",
            port=int(port),
            interval_s=args.metrics_interval,
            address_file=args.metrics_address_file,
            proc_root=args.proc_root,
            tls=servingflags.tls_from(args),
        ),
        report=ReportSettings(
            discovery_interval_s=args.discovery_interval,
            resync_interval_s=args.device_resync_interval,
            gpu_partition_policy=PartitionPolicy(args.gpu_partition_policy),
            dra=args.dra,
        ),
        hooks=HookSettings(
            enabled=not args.no_hook_server,
            socket_path=args.hook_socket,
            dev_root=args.dev_root,
            hami_core=HAMiCore(
                library=args.hami_core_library_directory_path,
                lock_dir=args.hami_core_lock_dir,
                vgpu_monitor=args.hami_core_vgpu_monitor,
            ),
        ),
        qos=QoSSettings(
            mode=QoSMode(args.qos),
            config_path=args.qos_config,
            cgroup_root=args.cgroup_root,
            reconcile_interval_s=args.qos_reconcile_interval,
            network_interface=args.network_qos_interface,
        ),
        kubelet=KubeletSettings(
            enabled=args.simulate_kubelet,
            lease_renew_s=args.node_lease_interval,
            status_report_s=args.node_status_interval,
            node_ip=args.node_ip,
            taints=parse_taints(args.register_with_taints),
            labels=parse_labels(args.node_labels),
        ),
        dra=DRASettings(
            enabled=args.dra_plugin,
            registry_dir=args.kubelet_registry_dir,
            plugin_dir=args.dra_plugin_dir,
            cdi_dir=args.cdi_dir,
        ),
        state_dir=args.state_dir,
    )


_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def parse_taints(text: str) -> tuple[Taint, ...]:
    """`key=value:Effect,key:Effect` (kubelet's --register-with-taints). Raises ConfigError naming
    the taint that does not parse."""
    out = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        head, sep, effect = item.rpartition(":")
        key, _, value = head.partition("=")
        if not sep or not key or effect not in _EFFECTS:
            raise ConfigError(
                f"--register-with-taints {item!r}: expected key=value:Effect or key:Effect, "
                f"Effect one of {', '.join(_EFFECTS)}"
            )
        out.append(Taint(key, value, effect))
    return tuple(out)


def parse_labels(text: str) -> dict[str, str]:
    """`key=value,...` (kubelet's --node-labels). Raises ConfigError naming the label that does not parse."""
    out = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--node-labels {item!r}: expected key=value")
        out[key] = value
    return out


def run(args: argparse.Namespace) -> int:
    """Flags that cannot work raise ConfigError: `tessera agent: reason`, exit code 2 (cli.main)."""
    return agent.run(settings_from(args))
