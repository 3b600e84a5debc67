"""Tessera agent (imports apis, kube and proto only; never another component).

The node side: discovery, health, metrics, the Device CR reporter, the hook server, node QoS and
the simulated kubelet, hosted by one process (`agent.run(settings)`, `tessera agent`).

`run` and the settings load on first use, so `import agent.discovery` (and the runtime proxy,
which lives in `runtimeproxy`) does not import the whole agent process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kube.lazyexports import lazy_exports

if TYPE_CHECKING:
    from agent.app import Agent, run
    from agent.discovery.settings import DiscoverySettings
    from agent.settings import (
        DEFAULT_STATE_DIR,
        AgentSettings,
        DRASettings,
        HealthSettings,
        HookSettings,
        KubeletSettings,
        MetricsSettings,
        QoSMode,
        QoSSettings,
        ReportSettings,
    )

_EXPORTS = {
    "DEFAULT_STATE_DIR": "agent.settings",
    "Agent": "agent.app",
    "AgentSettings": "agent.settings",
    "DRASettings": "agent.settings",
    "DiscoverySettings": "agent.discovery.settings",
    "HealthSettings": "agent.settings",
    "HookSettings": "agent.settings",
    "KubeletSettings": "agent.settings",
    "MetricsSettings": "agent.settings",
    "QoSMode": "agent.settings",
    "QoSSettings": "agent.settings",
    "ReportSettings": "agent.settings",
    "run": "agent.app",
}

__all__ = [
    "DEFAULT_STATE_DIR",
    "Agent",
    "AgentSettings",
    "DRASettings",
    "DiscoverySettings",
    "HealthSettings",
    "HookSettings",
    "KubeletSettings",
    "MetricsSettings",
    "QoSMode",
    "QoSSettings",
    "ReportSettings",
    "run",
]


__getattr__ = lazy_exports(__name__, _EXPORTS)
