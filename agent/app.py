"""The agent process: every node-side part, wired together, started and stopped as one.

`tessera agent` (cli/agent.py) turns flags into `AgentSettings` and calls `run(settings)`; tests
drive `Agent` directly. What it hosts:

    discovery + health + GPU metrics   NodeDevices (agent/devices/node.py)
    faults that outlive the process    FaultMemory (agent/health/memory.py): the state file in
                                       --state-dir and the Device CR's first read, restored
                                       before anything reports; Events on the Node
    Device CR                          DeviceReporter (agent/devices/reporter.py), woken on every change
    ResourceSlices (--dra)             SliceWriter (agent/devices/slicewriter.py), in each reporter pass
    pods bound to this node            one Informer (fieldSelector spec.nodeName), feeding QoS,
                                       the metrics' pod names, the device ledger and the
                                       simulated kubelet
    device ledger                      DeviceLedger (agent/ledger/): who holds which device share
    hook server                        device collision, GPU env, RDMA devices, QoS plugins on a
                                       unix socket
    DRA plugin (optional)              DRAPlugin (agent/dra/): kubelet's registration and DRA
                                       plugin sockets for `gpu.tessera.dev`; prepared claims in
                                       the ledger and the checkpoint, CDI specs
    events                             one EventRecorder: DeviceCollision on refused pods,
                                       GPUFaultRestored / GPUFaultCleared on the Node,
                                       FailedParsing on a NodeSLO it cannot read
    node QoS                           NodeQoS (agent/qos/node.py): what the NodeSLO enables, from
                                       the node's NodeSLO object (watched), else --qos-config
    simulated kubelet (optional)       SimulatedKubelet (agent/kubeletsim/)
    HTTP                               /metrics, /healthz (/livez), /readyz (also: the ledger is
                                       rebuilt from the informer), POST /health/clear
                                       (agent/devices/healthclear.py), and for simulated devices
                                       the fault injection routes (agent/devices/faults.py)

Start-up fails (ConfigError, with a message saying what to fix) only for what the agent cannot
run without: a bad flag or profile, a kubeconfig that does not load, a socket or port another
process holds. Everything that can recover does so while the agent runs: an API server that is
down (the reporter, the informers and the kubelet retry), a bad QoS config file or NodeSLO
(logged, and an Event on the NodeSLO; the last good config stays, and with none QoS waits for
one), a malformed object on the server (logged and skipped or replaced).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import psutil
from prometheus_client import CollectorRegistry

from agent.devices.faults import SimulatedFaults
from agent.devices.healthclear import HealthClear
from agent.devices.node import NodeDevices
from agent.devices.reporter import DeviceReporter
from agent.devices.routing import json_error
from agent.devices.slicewriter import SliceWriter
from agent.discovery.nvmllib import NVMLLibrary
from agent.discovery.settings import DiscoveryStack, open_discovery
from agent.discovery.simulated import NodeCapacity
from agent.health.memory import FaultMemory, NodeEventRecorder
from agent.health.statefile import StateFile
from agent.kubeletsim import SimulatedKubelet
from agent.kubeletsim.claims import ClaimStates, DRAManager
from agent.ledger import DeviceLedger, NodeSlots
from agent.qos.node import NodeQoS
from agent.qos.nodeslo import NodeSLOWatch
from agent.settings import AgentSettings
from apis.dra import RESOURCE_CLAIMS
from apis.errors import ConfigError, TesseraError
from apis.k8s.core import Pod
from kube import errors, serving
from kube.client import Client
from kube.delegation import Delegation
from kube.events import EventRecorder
from kube.hostcheck import HostPolicy
from kube.informer import Informer
from kube.lifecycle import wait_until_set, write_atomically
from kube.logs import V
from kube.resources import NODES, PODS

if TYPE_CHECKING:
    from agent.dra.plugin import DRAPlugin
    from agent.hooks import HookServer

__all__ = ["Agent", "run"]

log = logging.getLogger(__name__)

_UID_INDEX = "uid"
_COMPONENT = "tessera-agent"


class Agent:
    """One node's agent. `start()` raises ConfigError for what cannot run; `stop()` is idempotent."""

    def __init__(
        self, settings: AgentSettings, *, client: Client | None = None, nvml_library: NVMLLibrary | None = None
    ) -> None:
        self.settings = settings
        self._client = client
        self._nvml_library = nvml_library
        self._stops: list[Callable[[], None]] = []
        self.registry = CollectorRegistry()
        self.devices: NodeDevices | None = None
        self.memory: FaultMemory | None = None
        self.reporter: DeviceReporter | None = None
        self.pods: Informer[Pod] | None = None
        self.ledger: DeviceLedger | None = None
        self.events: EventRecorder | None = None
        self.qos: NodeQoS | None = None
        self.hooks: HookServer | None = None
        self.dra: DRAPlugin | None = None
        self.kubelet: SimulatedKubelet | None = None
        self.http: serving.Server | None = None

    def start(self) -> None:
        """Build and start every part. On failure, what was started is stopped again."""
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the parts in reverse order of starting."""
        while self._stops:
            stop = self._stops.pop()
            try:
                stop()
            except Exception:  # the shutdown boundary: the other parts still get stopped
                log.exception("Stopping a part of the agent failed")

    # --- wiring ------------------------------------------------------------------------------------
    def _start(self) -> None:
        s = self.settings
        node = s.node_name
        client = self._client or Client.from_settings(s.client)
        if self._client is None:
            self._stops.append(client.close)
        stack = open_discovery(
            s.discovery, nvml_library=self._nvml_library, hami_core_library=s.hooks.hami_core.library
        )
        self._stops.append(stack.close)
        # One recorder for all the agent's events: refused containers (on their pods), GPU faults
        # restored or cleared (on the Node), a NodeSLO it cannot read.
        self.events = events = EventRecorder(client, _COMPONENT, host=node)
        self._stops.append(events.close)

        pods: Informer[Pod] = Informer(
            client,
            PODS,
            parse=Pod.from_dict,
            field_selector=f"spec.nodeName={node}",
            indexers={_UID_INDEX: lambda p: [p.uid] if p.uid else []},
        )
        self.pods = pods
        self.ledger = DeviceLedger(synced=lambda: pods.has_synced)
        pods.add_handlers(self.ledger.pod_changed, self.ledger.pod_updated, self.ledger.pod_deleted)
        devices = NodeDevices(
            stack,
            node_name=node,
            registry=self.registry,
            health=s.health,
            metrics=s.metrics,
            discovery_interval_s=s.report.discovery_interval_s,
            partition_policy=s.report.gpu_partition_policy,
            pods=self._pod_by_uid,
        )
        self.devices = devices
        self._stops.append(devices.stop)  # also frees what it opened (NVML event sets), started or not
        memory = FaultMemory(
            devices.tracker,
            devices.inventory.gpus,
            StateFile(s.state_dir),
            events=NodeEventRecorder(events, node),
            node_name=node,
        )
        self.memory = memory
        memory.start()  # faults from the state file, before any monitor or the reporter runs
        slices = (
            SliceWriter(client, node_name=node, build=devices.pools, registry=self.registry) if s.report.dra else None
        )
        reporter = DeviceReporter(
            client,
            node_name=node,
            build=devices.build,
            resync_interval_s=s.report.resync_interval_s,
            registry=self.registry,
            on_first_read=memory.adopt,  # or from the Device CR, before the first write
            also=slices.sync if slices is not None else None,
        )
        self.reporter = reporter
        devices.on_change(reporter.wake)
        self.qos = NodeQoS.open(
            s.qos,
            simulated=s.simulated,
            pods=pods.store.list,
            lookup=self._pod_by_uid,
            registry=self.registry,
            node_labels=self._node_labels(client),
            nodeslo=NodeSLOWatch(client, node_name=node, events=events),
        )
        if self.qos is not None:
            self._stops.append(self.qos.stop)  # its NodeSLO watch already runs

        # What another process may hold (a port, a socket) is bound first, before any thread runs.
        http = self._serve_http(stack, HealthClear(memory, lambda: devices.inventory.gpus), Delegation(client))
        if s.dra.enabled:
            self.dra = self._dra_plugin(client, devices, self.ledger)
            self.dra.restore()  # what claims hold counts before the hook server admits anything
        if s.hooks.enabled:
            self._serve_hooks(events, devices, self.ledger)
        if self.dra is not None:
            self._run(self.dra.start, self.dra.stop)

        self._run(pods.start, pods.stop)
        devices.start()
        if s.kubelet.enabled:
            # kubelet's DRA manager: finds the plugins in the same plugins_registry directory
            # the DRA plugin (when on) registers in; claims are read as the node may read them.
            claims = client.resource(RESOURCE_CLAIMS)
            dra = DRAManager(
                get_claim=lambda namespace, name: claims.get(name, namespace=namespace),
                registry_dir=s.dra.registry_dir,
                states=ClaimStates(s.state_dir),
            )
            self.kubelet = SimulatedKubelet(
                client,
                pods,
                node_name=node,
                capacity=stack.profile.node if stack.profile is not None else _this_machine(),
                node_ip=s.kubelet.node_ip,
                lease_renew_s=s.kubelet.lease_renew_s,
                status_report_s=s.kubelet.status_report_s,
                on_registered=reporter.wake,
                taints=s.kubelet.taints,
                labels=s.kubelet.labels,
                dra=dra,
            )
            self._run(self.kubelet.start, self.kubelet.stop)
        self._run(reporter.start, reporter.stop)
        if self.qos is not None:
            self.qos.start()
        if s.metrics.address_file is not None:
            write_atomically(s.metrics.address_file, http.address + "\n")  # ready
        log.info(
            "Agent started",
            extra={
                "node": node,
                "simulatedDevices": s.simulated,
                "simulatedKubelet": s.kubelet.enabled,
                "gpus": len(devices.inventory.gpus),
                "rdma": len(devices.inventory.rdma),
                "metrics": http.address,
                "hookSocket": str(s.hooks.socket_path) if s.hooks.enabled else "off",
                "resourceSlices": "on" if s.report.dra else "off",
                "draPlugin": str(self.dra.server.socket_path) if self.dra is not None else "off",
                "stateDir": str(s.state_dir),
                "qos": "off" if self.qos is None else ",".join(self.qos.running) or "no part enabled",
            },
        )

    def _serve_http(self, stack: DiscoveryStack, clear: HealthClear, auth: Delegation) -> serving.Server:
        """/metrics, health, the operator's health clear, and the fault injection routes for
        simulated devices. Errors are JSON `{"error": ...}`, as those routes answer theirs.
        Everything but health is authenticated and authorized through the API server, as
        kubelet's port is (`kube.serving`); the node's name is one the server answers to."""
        s = self.settings.metrics
        faults = SimulatedFaults(stack.fake, node_name=self.settings.node_name) if stack.fake is not None else None
        self.http = serving.Server(
            "agent HTTP",
            host=s.host,
            port=s.port,
            registry=self.registry,
            liveness={"device-reporter": self._reporter_running},
            readiness={"device-ledger": self._ledger_ready},
            routes=[*clear.routes(), *(faults.routes() if faults is not None else ())],
            error=json_error,
            auth=auth,
            hosts=HostPolicy.with_names([self.settings.node_name]),
            tls=s.tls.context([self.settings.node_name]),
        )
        self.http.start()  # ConfigError when the port is taken
        self._stops.append(self.http.stop)
        return self.http

    def _serve_hooks(self, events: EventRecorder, devices: NodeDevices, ledger: DeviceLedger) -> None:
        """The hook server with the device collision, GPU env, RDMA devices and (when QoS runs
        cgroup QoS) QoS plugins; the collision check first, so a refused container is refused for it."""
        # gRPC and the runtime API's messages load here, only when the agent serves hooks.
        from agent.hooks import DeviceCollisionPlugin, GPUEnvPlugin, HookPlugin, HookServer, RDMADevicesPlugin

        s = self.settings

        def node_slots() -> NodeSlots:
            return NodeSlots.of(devices.inventory, devices.tracker.snapshot(), node=s.node_name)

        plugins: list[HookPlugin] = [
            DeviceCollisionPlugin(ledger, node=node_slots, registry=self.registry, events=events),
            GPUEnvPlugin(s.hooks.hami_core),
            RDMADevicesPlugin(sysfs_root=s.discovery.sysfs_root, dev_root=s.hooks.dev_root),
        ]
        if self.qos is not None and self.qos.plugin is not None:
            plugins.append(self.qos.plugin)
        self.hooks = HookServer(plugins, socket_path=s.hooks.socket_path)
        try:
            self.hooks.start()
        except OSError as e:
            raise ConfigError(f"hook server socket {s.hooks.socket_path}: {e}") from e
        self._stops.append(self.hooks.stop)

    def _dra_plugin(self, client: Client, devices: NodeDevices, ledger: DeviceLedger) -> DRAPlugin:
        """kubelet's DRA plugin for this node (gRPC and the resource API's parsers load here)."""
        from agent.dra.cdi import CDIDir
        from agent.dra.driver import DRADriver
        from agent.dra.plugin import DRAPlugin
        from agent.dra.prepared import Checkpoint
        from apis import dra
        from apis.dra.slice import ResourceSlice

        s = self.settings
        claims = client.resource(dra.RESOURCE_CLAIMS)
        slices = client.resource(dra.RESOURCE_SLICES)

        def list_slices() -> list[ResourceSlice]:
            out = []
            # its node's only: a node identity may list no others (the Node authorizer, as kube's)
            for raw in slices.list_all(field_selector=f"spec.nodeName={s.node_name}").items:
                try:
                    out.append(ResourceSlice.from_dict(raw))
                except TesseraError as e:  # someone else's broken slice must not stop ours
                    log.log(V(4), "ResourceSlice does not parse; skipped", extra={"err": str(e)})
            return out

        driver = DRADriver(
            node_name=s.node_name,
            ledger=ledger,
            node=lambda: NodeSlots.of(devices.inventory, devices.tracker.snapshot(), node=s.node_name),
            get_claim=lambda namespace, name: claims.get(name, namespace=namespace),
            list_slices=list_slices,
            checkpoint=Checkpoint(s.state_dir),
            cdi_dir=CDIDir(s.dra.cdi_dir),
            dev_root=s.hooks.dev_root,
            hami_core=s.hooks.hami_core,
        )
        return DRAPlugin(driver, plugin_dir=s.dra.plugin_dir, registry_dir=s.dra.registry_dir)

    def _run(self, start: Callable[[], None], stop: Callable[[], None]) -> None:
        start()
        self._stops.append(stop)

    def _pod_by_uid(self, uid: str) -> Pod | None:
        """One pod of this node from the informer's cache (never the network)."""
        found = self.pods.store.by_index(_UID_INDEX, uid) if self.pods is not None else []
        return found[0] if found else None

    def _node_labels(self, client: Client) -> Callable[[], Mapping[str, str]]:
        """The Node's labels when QoS asks (a ConfigMap's nodeStrategies select by them); {} without a Node."""

        def read() -> Mapping[str, str]:
            try:
                metadata = client.resource(NODES).get(self.settings.node_name).get("metadata") or {}
            except errors.APIError as e:
                log.warning("Cannot read the Node's labels for the QoS config", extra={"error": str(e)})
                return {}
            labels = metadata.get("labels") or {}
            return {str(k): str(v) for k, v in labels.items()}

        return read

    def _ledger_ready(self) -> str:
        """Ready once the node's pods are listed; until then the hook server answers "retry" to pods with devices."""
        if self.ledger is None or self.ledger.ready:
            return ""
        return "pods of this node not listed yet: device collisions cannot be checked"

    def _reporter_running(self) -> str:
        """The health check: the reporter loop runs (the API server being down is not the agent's fault)."""
        return "" if self.reporter is not None and self.reporter.alive else "device reporter not running"


def _this_machine() -> NodeCapacity:
    """This machine's CPUs and memory, for a simulated kubelet over real devices."""
    return NodeCapacity(cpus=psutil.cpu_count(logical=True) or 1, memory_bytes=psutil.virtual_memory().total)


def run(settings: AgentSettings) -> int:
    """Run the agent until SIGTERM or SIGINT; 0 after a clean stop, 1 when it cannot start."""
    stopping = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        if not stopping.is_set():
            log.info("Stopping agent", extra={"signal": signal.Signals(signum).name})
        stopping.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    agent = Agent(settings)
    try:
        agent.start()
    except ConfigError as e:
        log.error("Cannot start the agent", extra={"node": settings.node_name, "error": str(e)})
        return 1
    try:
        wait_until_set(stopping)
    finally:
        agent.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    log.info("Agent stopped", extra={"node": settings.node_name})
    return 0
