"""Node QoS in the agent process: which parts of `agent.qos` run, and keeping them on the NodeSLO.

`agent.qos` provides the parts; this module decides, from the flags, the machine and the NodeSLO,
which of them run, and hands them NodeSLO changes:

    part                                            runs when
    cgroup QoS: QoSHookPlugin + Reconciler          a class enables cpuQOS or memoryQOS, or --qos=on
    BE CPU suppression: BESuppressor                resourceUsedThresholdWithBE.enable
    network QoS: NetworkQoS                         a class enables networkQOS and
                                                    --network-qos-interface names the egress interface

and nothing at all runs with `--qos=off`; with simulated devices unless `--qos=on` (simulated
nodes share this machine, and their pods have no cgroups); or where there is no kubepods cgroup
(no kubelet on this machine: the agent never creates one and never touches other cgroups).

The NodeSLO file is checked every `config_poll_s`. A changed file is parsed and handed to the
running parts (`set_config`) and starts the parts it newly enables; parts it disables stay
running and apply the neutral settings (that is how each part switches off). A file that does
not parse is logged and the last good config stays; if there was none yet, QoS waits for one.
The hook plugin can only be registered at start-up (the hook server's plugins are fixed), so
cgroup QoS enabled later is applied by the reconciler, and by the hook path after a restart.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from prometheus_client import CollectorRegistry

from agent import qos
from agent.periodic import Periodic
from agent.qos.config import ClassQoS, QoSConfig
from agent.settings import QoSMode, QoSSettings
from apis.errors import TesseraError

__all__ = ["NodeQoS"]

log = logging.getLogger(__name__)


class _Part(Protocol):
    def set_config(self, config: QoSConfig) -> None: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


def _classes(config: QoSConfig) -> tuple[ClassQoS, ...]:
    strategy = config.resource_qos
    return strategy.lsr, strategy.ls, strategy.be, strategy.system


def _cgroup_qos(config: QoSConfig) -> bool:
    return any(c.cpu.enable or c.memory.enable for c in _classes(config))


def _network_qos(config: QoSConfig) -> bool:
    return any(c.network.enable for c in _classes(config))


class NodeQoS:
    """The running QoS parts of this node. Build with `open()`; `plugin` goes to the hook server."""

    def __init__(
        self,
        settings: QoSSettings,
        *,
        cgroups: qos.KubeCgroups,
        pods: qos.PodSource,
        lookup: qos.PodLookup,
        registry: CollectorRegistry,
        node_labels: Callable[[], Mapping[str, str]],
    ) -> None:
        """Reads the NodeSLO file now; nothing runs before `start()`."""
        self._settings = settings
        self._cgroups = cgroups
        self._config = config = _load(settings.config_path, node_labels)
        self._pods = pods
        self._registry = registry
        self._node_labels = node_labels
        self._parts: dict[str, _Part] = {}
        self._told_no_interface = False
        self._stamp = self._file_stamp()
        #: check_config runs on the watch thread and on demand; one at a time, so a caller that
        #: finds the file unchanged returns only after the other has applied it.
        self._reload = threading.Lock()
        force = settings.mode is QoSMode.ON
        self.plugin = (
            qos.QoSHookPlugin(config=config, pods=lookup, cgroups=cgroups)
            if config is not None and (force or _cgroup_qos(config))
            else None
        )
        self._watch = Periodic("qos-config", self.check_config, settings.config_poll_s)

    @classmethod
    def open(
        cls,
        settings: QoSSettings,
        *,
        simulated: bool,
        pods: qos.PodSource,
        lookup: qos.PodLookup,
        registry: CollectorRegistry,
        node_labels: Callable[[], Mapping[str, str]],
    ) -> NodeQoS | None:
        """The node's QoS, or None (with a log line saying why) when none may run here.

        `node_labels` is asked for the Node's labels when a config file is read (a ConfigMap's
        `nodeStrategies` select nodes by label).
        """
        if settings.mode is QoSMode.OFF:
            log.info("Node QoS off (--qos=off)")
            return None
        if simulated and settings.mode is QoSMode.AUTO:
            log.info("Node QoS off: devices are simulated (--qos=on runs it on this machine's kubepods anyway)")
            return None
        try:
            cgroups = qos.KubeCgroups.detect(qos.Hierarchy.detect(), root=settings.cgroup_root)
        except qos.CgroupError as e:
            log.warning("Node QoS off: no kubepods cgroup on this machine", extra={"error": str(e)})
            return None
        return cls(
            settings,
            cgroups=cgroups,
            pods=pods,
            lookup=lookup,
            registry=registry,
            node_labels=node_labels,
        )

    @property
    def running(self) -> tuple[str, ...]:
        """Names of the parts running (`reconciler`, `be-suppression`, `network`), for logs and tests."""
        return tuple(sorted(self._parts))

    def start(self) -> None:
        if self._config is not None:
            self._ensure_parts(self._config)
        if self._settings.config_path is not None:
            self._watch.start()

    def stop(self) -> None:
        """Stop every loop; cgroup and tc settings stay as they are (idempotent)."""
        self._watch.stop()
        for part in self._parts.values():
            part.stop()

    def check_config(self) -> None:
        """Reload the NodeSLO file if it changed; hand it to the parts."""
        with self._reload:
            stamp = self._file_stamp()
            if stamp == self._stamp:
                return
            self._stamp = stamp
            config = _load(self._settings.config_path, self._node_labels)
            if config is None:
                return
            log.info("QoS config changed", extra={"path": str(self._settings.config_path)})
            self._config = config
            if self.plugin is not None:
                self.plugin.set_config(config)
            for part in self._parts.values():
                part.set_config(config)
            self._ensure_parts(config)

    def _ensure_parts(self, config: QoSConfig) -> None:
        """Start the parts `config` enables that are not running yet."""
        if "reconciler" not in self._parts and (self.plugin is not None or _cgroup_qos(config)):
            self._add(
                "reconciler",
                qos.Reconciler(
                    cgroups=self._cgroups,
                    pods=self._pods,
                    config=config,
                    interval_s=self._settings.reconcile_interval_s,
                    registry=self._registry,
                ),
            )
        if "be-suppression" not in self._parts and config.cpu_suppress.enable:
            sampler = qos.CgroupUsageSampler(self._cgroups, self._pods)
            self._add(
                "be-suppression",
                qos.BESuppressor(cgroups=self._cgroups, sampler=sampler, config=config, registry=self._registry),
            )
        if "network" not in self._parts and _network_qos(config):
            if not self._settings.network_interface:
                if not self._told_no_interface:
                    log.warning("The NodeSLO enables network QoS, but --network-qos-interface is not set: it stays off")
                    self._told_no_interface = True
            else:
                self._add(
                    "network",
                    qos.NetworkQoS(ifname=self._settings.network_interface, config=config, pods=self._pods),
                )

    def _add(self, name: str, part: _Part) -> None:
        part.start()
        self._parts[name] = part
        log.info("Started node QoS part", extra={"part": name})

    def _file_stamp(self) -> tuple[int, int] | None:
        path = self._settings.config_path
        try:
            stat = os.stat(path) if path is not None else None
        except OSError:
            return None
        return (stat.st_mtime_ns, stat.st_size) if stat is not None else None


def _load(path: Path | None, node_labels: Callable[[], Mapping[str, str]]) -> QoSConfig | None:
    """The NodeSLO from `path` (Koordinator's defaults without one); None, logged, when it is invalid."""
    if path is None:
        return QoSConfig()
    try:
        return qos.load_config(path, node_labels=node_labels())
    except TesseraError as e:  # ConfigError, or any other parse problem: bad input, never a crash
        log.error("Invalid QoS config; keeping the last good one (none: QoS waits)", extra={"error": str(e)})
        return None
