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

The NodeSLO comes from the NodeSLO object named after the node (agent.qos.nodeslo, watched),
else the `--qos-config` file (checked every `config_poll_s`), else Koordinator's defaults; the
rule, and what a source that does not parse does (the last good config stays), is
agent.qos.sources. `open()` lists the object before deciding (waiting `nodeslo_sync_timeout_s`
at most), so the first decision already includes it. A new config in force is handed to the
running parts (`set_config`) and starts the parts it newly enables; parts it disables stay
running and apply the neutral settings (that is how each part switches off). If nothing good
is in force yet, QoS waits for it. The hook plugin can only be registered at start-up (the hook
server's plugins are fixed), so cgroup QoS enabled later is applied by the reconciler, and by
the hook path after a restart.

Metrics: `tessera_agent_qos_config_source{source}` (1 for the source in force: nodeslo, file,
defaults) and `tessera_agent_qos_config_rejected_total{source}` (versions that did not parse).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge

from agent import qos
from agent.periodic import Periodic
from agent.qos.config import ClassQoS, QoSConfig
from agent.qos.nodeslo import NodeSLOWatch
from agent.qos.sources import ABSENT, Loaded, Source, choose
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
    """The running QoS parts of this node. Build with `open()`; `plugin` goes to the hook server.

    `check_config()` (the file) and `nodeslo_changed()` (the object) may be called from any
    thread; one lock orders them with `start()` and `stop()`.
    """

    def __init__(
        self,
        settings: QoSSettings,
        *,
        cgroups: qos.KubeCgroups,
        pods: qos.PodSource,
        lookup: qos.PodLookup,
        registry: CollectorRegistry,
        node_labels: Callable[[], Mapping[str, str]],
        nodeslo: NodeSLOWatch | None = None,
    ) -> None:
        """Reads the NodeSLO file now, and takes the NodeSLO object `nodeslo` has listed (if
        any); nothing runs before `start()`. `nodeslo` is stopped with this."""
        self._settings = settings
        self._cgroups = cgroups
        self._pods = pods
        self._registry = registry
        self._node_labels = node_labels
        self._nodeslo_watch = nodeslo
        self._parts: dict[str, _Part] = {}
        self._told_no_interface = False
        self._lock = threading.Lock()
        self._stopped = False
        self._source_gauge = Gauge(
            "tessera_agent_qos_config_source",
            "1 for where the node QoS config in force comes from (nodeslo, file, defaults), else 0",
            ["source"],
            registry=registry,
        )
        self._rejected = Counter(
            "tessera_agent_qos_config_rejected_total",
            "NodeSLO versions that did not parse (the log and, for the object, an Event say why)",
            ["source"],
            registry=registry,
        )
        self._stamp = self._file_stamp()
        self._file = self._read_file()
        self._nodeslo = nodeslo.current if nodeslo is not None else ABSENT
        self._count_rejected(Source.NODESLO, self._nodeslo)
        self._in_force = choose(nodeslo=self._nodeslo, file=self._file, in_force=None)
        self._show_source()
        config = self._in_force.config if self._in_force is not None else None
        force = settings.mode is QoSMode.ON
        self.plugin = (
            qos.QoSHookPlugin(config=config, pods=lookup, cgroups=cgroups)
            if config is not None and (force or _cgroup_qos(config))
            else None
        )
        self._watch = Periodic("qos-config", self.check_config, settings.config_poll_s)
        log.info(
            "Node QoS config",
            extra={"source": self._in_force.source.value if self._in_force is not None else "none yet: QoS waits"},
        )

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
        nodeslo: NodeSLOWatch | None = None,
    ) -> NodeQoS | None:
        """The node's QoS, or None (with a log line saying why) when none may run here.

        `node_labels` is asked for the Node's labels when a config file is read (a ConfigMap's
        `nodeStrategies` select nodes by label). `nodeslo`, when QoS runs, is started here and
        listed (waiting `settings.nodeslo_sync_timeout_s` at most) before the first decision;
        the caller must `stop()` what this returns even if it never starts it.
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
        if nodeslo is not None:
            nodeslo.start(sync_timeout_s=settings.nodeslo_sync_timeout_s)
        try:
            return cls(
                settings,
                cgroups=cgroups,
                pods=pods,
                lookup=lookup,
                registry=registry,
                node_labels=node_labels,
                nodeslo=nodeslo,
            )
        except BaseException:
            if nodeslo is not None:
                nodeslo.stop()
            raise

    @property
    def running(self) -> tuple[str, ...]:
        """Names of the parts running (`reconciler`, `be-suppression`, `network`), for logs and tests."""
        return tuple(sorted(self._parts))

    @property
    def config(self) -> QoSConfig | None:
        """The config in force; None while QoS waits for a good one."""
        in_force = self._in_force
        return in_force.config if in_force is not None else None

    @property
    def source(self) -> Source | None:
        """Where the config in force came from; None while QoS waits for a good one."""
        in_force = self._in_force
        return in_force.source if in_force is not None else None

    def start(self) -> None:
        with self._lock:
            if self._in_force is not None:
                self._ensure_parts(self._in_force.config)
        if self._settings.config_path is not None:
            self._watch.start()
        if self._nodeslo_watch is not None:
            self._nodeslo_watch.subscribe(self.nodeslo_changed)

    def stop(self) -> None:
        """Stop every loop and the watch; cgroup and tc settings stay as they are (idempotent)."""
        if self._nodeslo_watch is not None:
            self._nodeslo_watch.stop()
        self._watch.stop()
        with self._lock:
            self._stopped = True
            for part in self._parts.values():
                part.stop()

    def check_config(self) -> None:
        """Re-read the NodeSLO file if it changed, and apply what is in force then.

        Runs on the file watch's thread and on demand: the whole check holds the lock, so a caller
        that finds the file unchanged returns only after the other caller has applied it."""
        with self._lock:
            stamp = self._file_stamp()
            if stamp == self._stamp:
                return
            self._stamp = stamp
            self._file = self._read_file()
            self._refresh()

    def nodeslo_changed(self, loaded: Loaded) -> None:
        """A new version of the NodeSLO object (`ABSENT`: deleted), read; apply what is in force then.
        The same `loaded` again (the watch repeats its current one on `subscribe`) changes nothing."""
        with self._lock:
            if loaded is self._nodeslo:
                return
            self._count_rejected(Source.NODESLO, loaded)
            self._nodeslo = loaded
            self._refresh()

    # --- under the lock ------------------------------------------------------------------------------
    def _refresh(self) -> None:
        chosen = choose(nodeslo=self._nodeslo, file=self._file, in_force=self._in_force)
        if chosen is None or chosen == self._in_force or self._stopped:
            return
        log.info("QoS config changed", extra={"source": chosen.source.value})
        self._in_force = chosen
        self._show_source()
        if self.plugin is not None:
            self.plugin.set_config(chosen.config)
        for part in self._parts.values():
            part.set_config(chosen.config)
        self._ensure_parts(chosen.config)

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

    def _show_source(self) -> None:
        for source in Source:
            in_force = self._in_force is not None and self._in_force.source is source
            self._source_gauge.labels(source=source.value).set(1 if in_force else 0)

    # --- the file --------------------------------------------------------------------------------------
    def _count_rejected(self, source: Source, loaded: Loaded) -> None:
        if loaded.malformed:
            self._rejected.labels(source=source.value).inc()

    def _read_file(self) -> Loaded:
        """The file's NodeSLO; `ABSENT` without `--qos-config`; malformed (logged) when invalid."""
        path = self._settings.config_path
        if path is None:
            return ABSENT
        try:
            return Loaded(present=True, config=qos.load_config(path, node_labels=self._node_labels()))
        except TesseraError as e:  # ConfigError, or any other parse problem: bad input, never a crash
            log.error(
                "Invalid QoS config file; the last good config stays in force (none yet: QoS waits)",
                extra={"error": str(e)},
            )
            loaded = Loaded(present=True)
            self._count_rejected(Source.FILE, loaded)
            return loaded

    def _file_stamp(self) -> tuple[int, int] | None:
        path = self._settings.config_path
        try:
            stat = os.stat(path) if path is not None else None
        except OSError:
            return None
        return (stat.st_mtime_ns, stat.st_size) if stat is not None else None
