"""The whole system on one machine: every component its own supervised process.

`tessera up` (cli/up.py) builds a `LocalCluster` from its flags, starts it, and stops it on
Ctrl-C. Start-up is as parallel as the dependencies allow — the API server first (everything
needs it), the CRDs and the components' RBAC (cli/localcluster/identities.py: each runs as its
own ServiceAccount with deploy/'s roles), then the controller, the scheduler and every agent at once — and waits on
readiness, never on a clock: each component says when it is ready (`/readyz`, `/healthz`).
Every step has a deadline (`--start-timeout`): past it, start-up fails naming the component,
what it was still waiting for and the end of its log; while a step takes long, a notice says
what it waits for, so nothing is ever silently stuck.

Restart safety comes from the components, which rebuild their state from the API server; this
module only keeps them running (cli/localcluster/supervisor.py), keeps the state file current
(cli/localcluster/state.py) and cleans up after an earlier `tessera up`: processes it left when it
was killed, nodes it ran that this one does not (cli/localcluster/retire.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from pathlib import Path
from typing import Final

import psutil
import yaml

from apis.errors import ConfigError
from cli.launchers.apiserver import ALL_CRDS, EmbeddedAPIServer
from cli.launchers.base import KubeconfigCredentials
from cli.localcluster import components, identities, monitoring, ownnames, state, webhook
from cli.localcluster.components import Component
from cli.localcluster.retire import retire_nodes
from cli.localcluster.settings import UpSettings, local_node_name, simulated_node_names
from cli.localcluster.supervisor import EventKind, Stopped, Supervised, SupervisorEvent
from kube import errors
from kube.client import Client
from kube.crds import install_crds
from kube.process import ServingProcess

__all__ = ["LocalCluster"]

log = logging.getLogger(__name__)

#: How long leftovers of a killed `tessera up` get to stop after SIGTERM before SIGKILL.
_LEFTOVER_GRACE_S: Final = 10.0
#: While components start, how often people hear which ones are still not ready, and why.
_PROGRESS_EVERY_S: Final = 10.0


class LocalCluster:
    """Start, supervise and stop the components; see the module docstring.

    `on_event` hears each start, exit and failed restart (from supervisor threads); `on_notice`
    gets sentences for people (leftovers stopped). Drive `start()`/`stop()` from one thread.
    """

    def __init__(
        self,
        settings: UpSettings,
        *,
        on_event: Callable[[SupervisorEvent], None],
        on_notice: Callable[[str], None],
    ) -> None:
        self.settings = settings
        self.data_dir = settings.data_dir.resolve()
        self.kubeconfig = self.data_dir / "kubeconfig"
        self.local_node = local_node_name() if settings.local_agent else ""
        self.simulated_nodes = simulated_node_names(settings.nodes)
        self._on_event = on_event
        self._on_notice = on_notice
        self._components: dict[str, Component] = {}
        self._kubeconfigs: dict[str, Path] = {}
        self._supervised: dict[str, Supervised] = {}
        self._state_lock = threading.Lock()
        self._phase = "starting"
        #: Set once no other `tessera up` runs on the data directory: from then on it is ours.
        self.owns_data_dir = False
        #: Nodes the previous `tessera up` on the data directory ran and this one does not.
        self._retiring: list[str] = []
        self._created = state.process_created(os.getpid())
        #: With `--prometheus`: its scrape jobs, whose targets files follow the state file.
        self._scrape_jobs: tuple[str, ...] = ()

    @property
    def components(self) -> list[Component]:
        return list(self._components.values())

    def start(self) -> None:
        """Start everything and return once every component is ready.

        Raises ConfigError when another `tessera up` runs on the data directory, naming each
        component that did not start within `settings.start_timeout` (what it waited for, the
        end of its log), or when the API server refuses or does not answer a request about the
        CRDs or earlier nodes. `stop()` then stops what did start.
        """
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._take_over()
        self.owns_data_dir = True
        self._write_state()
        tokens = identities.ensure_tokens(components.token_file(self.data_dir), self._identities())
        self._start([components.apiserver(self.data_dir, port=self.settings.port)])
        self._kubeconfigs = identities.component_kubeconfigs(self.data_dir / "kubeconfigs", self.kubeconfig, tokens)
        scraper = identities.IDENTITIES[identities.METRICS_SCRAPER].key
        metrics_token = components.metrics_token_file(self.data_dir)
        metrics_token.touch(mode=0o600, exist_ok=True)
        metrics_token.write_text(tokens[scraper] + "\n", encoding="utf-8")
        with self.client() as client:
            for directory in ALL_CRDS:
                with self._through_apiserver(f"installing the CRDs of {directory}"):
                    install_crds(client, directory, timeout=self.settings.start_timeout)
            with self._through_apiserver(f"applying the RBAC of {identities.DEPLOY}/*-rbac.yaml"):
                applied = identities.apply_rbac(client)
                deploy_names = [*identities.rbac_manifests(), *webhook.documents().values()]
                retired = ownnames.retire_deploy_names(client, deploy_names) + ownnames.prune(client, applied)
                if retired:
                    named = ", ".join(retired[:3]) + (", …" if len(retired) > 3 else "")
                    self._on_notice(
                        f"removed {len(retired)} object{'s' if len(retired) > 1 else ''} an earlier tessera up "
                        "applied and this one applies under "
                        f"names of its own, or not at all ({named}; {self.data_dir / 'up.log'} lists them)"
                    )
            with self._through_apiserver("removing the nodes an earlier run had"):
                self._retire_earlier_nodes(client)
        hooks = webhook.prepare(self.data_dir / "controller" / "webhook")
        self._start(self._node_and_control_plane(hooks))
        with self.client() as client, self._through_apiserver("registering the controller's quota webhook"):
            webhook.register(client, hooks)
        if self.settings.prometheus:
            self._start([self._prometheus()])
        self._phase = "ready"
        self._write_state()

    def stop(self) -> None:
        """Stop every component: first the others, all at once, then the API server they talk to
        while they stop (releasing Leases, finishing bindings). Idempotent; does nothing when
        another `tessera up` owns the data directory."""
        if not self.owns_data_dir:
            return
        self._phase = "stopping"
        self._write_state()
        others = [s for name, s in self._supervised.items() if name != "apiserver"]
        try:
            with futures.ThreadPoolExecutor(max_workers=max(1, len(others))) as pool:
                list(pool.map(Supervised.stop, others))
        finally:
            if "apiserver" in self._supervised:
                self._supervised["apiserver"].stop()
        self._phase = "stopped"
        self._write_state()

    def client(self, *, user_agent: str = "tessera-up") -> Client:
        """A client of the API server (close it when done)."""
        return Client.from_kubeconfig(self.kubeconfig, user_agent=user_agent)

    # --- start-up ----------------------------------------------------------------------------------
    def _identities(self) -> list[identities.Identity]:
        """Each control-plane component's ServiceAccount and each agent's node (`identities.py`)."""
        control = [name for name in identities.IDENTITIES if name != identities.AGENT]
        nodes = [self.local_node] if self.local_node else []
        agents = [f"{identities.AGENT}/{node}" for node in [*nodes, *self.simulated_nodes]]
        return identities.up_identities([*control, *agents])

    def _kubeconfig_of(self, component: str) -> Path:
        """The kubeconfig with the component's own identity (`identities.py`)."""
        return self._kubeconfigs[identities.identity_of(component).key]

    def _node_and_control_plane(self, hooks: webhook.WebhookSetup) -> list[Component]:
        data, kubeconfig = self.data_dir, self._kubeconfig_of
        scheduler = components.scheduler(
            data,
            kubeconfig("scheduler"),
            grpc_address=self.settings.scheduler_address,
            plugins=self.settings.scheduler_plugins,
        )
        dashboard = components.dashboard(data, kubeconfig("dashboard"), scheduler=scheduler)
        wanted = [
            components.controller(data, kubeconfig("controller"), args=hooks.controller_args()),
            components.kube_controller_manager(
                data, kubeconfig("kube-controller-manager"), args=self.settings.kube_controller_manager_args
            ),
            scheduler,
            components.descheduler(data, kubeconfig("descheduler"), scheduler=scheduler),
            dashboard,
        ]
        if self.local_node:
            wanted.append(components.local_agent(data, kubeconfig(f"agent/{self.local_node}"), node=self.local_node))
        wanted += [
            components.simulated_agent(
                data,
                kubeconfig(f"agent/{node}"),
                node=node,
                profile=self.settings.profile,
                args=self.settings.agent_args,
            )
            for node in self.simulated_nodes
        ]
        for component in wanted:  # what tessera up (and its soak) asks of them, it asks as the user
            if isinstance(component.process, ServingProcess):
                component.process.credentials = KubeconfigCredentials(self.kubeconfig)
        return wanted

    def _prometheus(self) -> Component:
        """Prometheus, configured to scrape what runs now (monitoring.py); its targets files follow
        the state file from here on (`_write_state`), so a component restarted on a new port is
        scraped there."""
        directory = self.data_dir / "prometheus"
        directory.mkdir(parents=True, exist_ok=True)
        ca_file = directory / "apiserver-ca.crt"
        apiserver = self._components["apiserver"].process
        ca_file.write_bytes(apiserver.ca_pem if isinstance(apiserver, EmbeddedAPIServer) and apiserver.ca_pem else b"")
        snapshot = self._snapshot()
        config = monitoring.prometheus_config(
            snapshot,
            ca_file=ca_file,
            token_file=components.admin_token_file(self.data_dir),
            targets_dir=directory / "targets",
        )
        self._scrape_jobs = tuple(job["job_name"] for job in config["scrape_configs"])
        monitoring.write_targets(snapshot, directory / "targets", self._scrape_jobs)
        path = directory / "prometheus.yml"
        path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        return components.prometheus(self.data_dir, config=path)

    def _start(self, wanted: Sequence[Component]) -> None:
        """Start `wanted` in parallel; raise ConfigError naming every one that did not start.

        Each start ends within the start timeout (it is the process's own deadline); meanwhile,
        every `_PROGRESS_EVERY_S`, a notice names the components still starting and what each
        waits for.
        """
        for component in wanted:
            self._components[component.name] = component
            self._supervised[component.name] = Supervised(
                component.name, component.process, on_event=self._event, start_timeout=self.settings.start_timeout
            )
        pool = futures.ThreadPoolExecutor(max_workers=len(wanted), thread_name_prefix="start")
        try:
            started = {c.name: pool.submit(self._supervised[c.name].start) for c in wanted}
            self._report_progress(started)
            failures = []
            for name, future in started.items():
                error = future.exception()
                if isinstance(error, Stopped):
                    failures.append(f"{name} did not start: stopped while it started")
                elif isinstance(error, ConfigError):  # names the process, what it waited for, its log
                    failures.append(f"{name} did not start: {error}")
                elif error is not None:
                    raise error
        finally:
            pool.shutdown(wait=False)
        if failures:
            raise ConfigError("\n\n".join(failures))

    def _report_progress(self, starting: dict[str, futures.Future[None]]) -> None:
        """Until every start in `starting` has ended: now and then, say which are still starting."""
        began = time.monotonic()
        while True:
            _, not_done = futures.wait(starting.values(), timeout=_PROGRESS_EVERY_S)
            if not not_done:
                return
            for name, future in starting.items():
                waiting_for = self._components[name].process.waiting_for
                if not future.done() and waiting_for:
                    self._on_notice(
                        f"still starting {name} after {time.monotonic() - began:.0f} s "
                        f"(at most {self.settings.start_timeout:g} s): waiting for {waiting_for}"
                    )

    @contextlib.contextmanager
    def _through_apiserver(self, step: str) -> Iterator[None]:
        """Turn an APIError of `step` into a ConfigError naming the step, the API server and how
        its log ends. Each request has the client's deadline, so the step cannot hang."""
        try:
            yield
        except errors.APIError as e:
            server = self._components["apiserver"].process
            raise ConfigError(f"{step} through the API server ({server.url}) failed: {e}{server.log_end()}") from e

    def _take_over(self) -> None:
        """Refuse to run beside another `tessera up` on this directory; stop what a killed one left."""
        previous = state.read(self.data_dir)
        if previous is None:
            return
        self._retiring = sorted(previous.nodes() - {self.local_node, *self.simulated_nodes})
        pid = state.running_up(previous)
        if pid is not None:
            raise ConfigError(
                f"tessera up already runs on {self.data_dir} (pid {pid}); stop it first (Ctrl-C there, or kill {pid})"
            )
        leftovers = state.leftovers(previous)
        if not leftovers:
            return
        for process in leftovers:
            process.terminate()
        _, alive = psutil.wait_procs(leftovers, timeout=_LEFTOVER_GRACE_S)
        for process in alive:
            process.kill()
        psutil.wait_procs(alive, timeout=_LEFTOVER_GRACE_S)
        pids = ", ".join(str(p.pid) for p in leftovers)
        self._on_notice(f"stopped {len(leftovers)} processes an earlier tessera up left running (pids {pids})")

    def _retire_earlier_nodes(self, client: Client) -> None:
        """Remove the nodes the previous run had and this one does not (cli/localcluster/retire.py)."""
        for node in retire_nodes(client, self._retiring):
            pods = f" and the {len(node.pods)} pods bound to it" if node.pods else ""
            self._on_notice(f"removed node {node.name}{pods}: an earlier tessera up ran it, this one does not")
        self._retiring = []

    # --- state ---------------------------------------------------------------------------------------
    def _event(self, event: SupervisorEvent) -> None:
        if event.kind is EventKind.STARTED:
            self._write_state()
        self._on_event(event)

    def _snapshot(self) -> state.UpState:
        return state.UpState(
            pid=os.getpid(),
            created=self._created,
            phase=self._phase,
            data_dir=str(self.data_dir),
            kubeconfig=str(self.kubeconfig),
            components={
                name: c.state(self._supervised[name].restarts if name in self._supervised else 0)
                for name, c in self._components.items()
            },
            retiring=tuple(self._retiring),
        )

    def _write_state(self) -> None:
        with self._state_lock:
            snapshot = self._snapshot()
            try:
                state.write(self.data_dir, snapshot)
                if self._scrape_jobs:
                    monitoring.write_targets(snapshot, self.data_dir / "prometheus" / "targets", self._scrape_jobs)
            except OSError as e:  # the directory was removed under us: stopping must still stop everything
                log.warning("Cannot write the state file", extra={"dataDir": str(self.data_dir), "error": str(e)})
                return
        log.debug("Wrote the state file", extra={"phase": self._phase, "at": str(self.data_dir / state.FILE_NAME)})
