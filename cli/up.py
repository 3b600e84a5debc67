"""`tessera up`: the whole system on this machine, each component its own process (`make run`).

Flags become `UpSettings`; `cli.localcluster.LocalCluster` starts and supervises the processes;
this module talks to the person at the terminal: where everything is, what to try, what went
wrong, and the demo's placement table. It stays up until Ctrl-C (or SIGTERM) and then stops
every component. See docs/user/up.md.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Final

from agent.discovery.simulated import BUILTIN_PROFILES, load_profile
from apis.errors import ConfigError, TesseraError
from cli.launchers import prometheus
from cli.localcluster import components, demo, demoworkloads, quotademo, state
from cli.localcluster.cluster import LocalCluster
from cli.localcluster.settings import DEFAULT_DATA_DIR, MAX_NODES, UpSettings
from cli.localcluster.supervisor import EventKind, SupervisorEvent
from kube import logs
from scheduler.service import ADDRESS_ENV, default_address

log = logging.getLogger(__name__)

#: Lines of a log shown when a wait for its component ran out.
_LOG_LINES: Final = 15


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = UpSettings()
    parser.add_argument(
        "--nodes",
        type=int,
        default=defaults.nodes,
        metavar="N",
        help=f"simulated GPU nodes, each an agent process (default {defaults.nodes}, at most {MAX_NODES})",
    )
    parser.add_argument(
        "--profile",
        default=defaults.profile,
        metavar="PROFILE|FILE",
        help=f"their devices: {', '.join(BUILTIN_PROFILES)} or a profile YAML file (default {defaults.profile})",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        metavar="DIR",
        help=f"objects, logs, sockets and the state file; kept between runs (default ./{DEFAULT_DATA_DIR})",
    )
    parser.add_argument(
        "--port", type=int, default=defaults.port, metavar="P", help="the API server's port (default: a free one)"
    )
    parser.add_argument(
        "--demo", action="store_true", help="submit a sample workload and print where each pod went, or why not"
    )
    parser.add_argument(
        "--no-local-agent",
        dest="local_agent",
        action="store_false",
        help="run no agent for this machine (only the simulated nodes)",
    )
    parser.add_argument(
        "--scheduler-address",
        default=None,
        metavar="ADDRESS",
        help=f"the scheduler's gRPC API (default ${ADDRESS_ENV}, else {default_address({})}, "
        "where tessera explain looks)",
    )
    parser.add_argument(
        "--prometheus",
        action="store_true",
        help="also run Prometheus (Debian's prometheus package, or any on PATH) scraping every component, "
        "with deploy/monitoring/rules.yaml loaded",
    )
    parser.add_argument(
        "--start-timeout",
        type=float,
        default=defaults.start_timeout,
        metavar="SECONDS",
        help="how long each start-up step may take (a component getting ready, the demo's nodes "
        "getting Ready); past it, tessera up stops, says what it waited for and exits 1 "
        f"(default {defaults.start_timeout:g})",
    )


def settings_from(args: argparse.Namespace) -> UpSettings:
    """Raises ConfigError naming what is wrong with the flags (a profile that does not load too)."""
    settings = UpSettings(
        data_dir=args.data_dir,
        nodes=args.nodes,
        profile=args.profile,
        port=args.port,
        local_agent=args.local_agent,
        demo=args.demo,
        scheduler_address=args.scheduler_address or default_address(dict(os.environ)),
        start_timeout=args.start_timeout,
        prometheus=args.prometheus,
    )
    settings.validate()
    if settings.nodes:
        load_profile(settings.profile)
    if settings.prometheus:
        prometheus.binary()  # missing: say so now, before anything starts
    return settings


class _StartTimeout(TesseraError):
    """A start-up step after the components' (the demo's nodes getting Ready) ran out of time."""


class _Console:
    """What `tessera up` prints: for people, concise, safe to call from supervisor threads."""

    def __init__(self) -> None:
        self._base = Path.cwd()
        self._lock = threading.Lock()

    def say(self, text: str = "") -> None:
        """Print a line. A console that is gone (`tessera up | head`, a closed terminal) must not
        cut start-up or shutdown short: the line goes to the log instead."""
        with self._lock:
            try:
                print(text, flush=True)
            except OSError as e:
                log.warning("Cannot print to the console", extra={"line": text, "error": str(e)})

    def path(self, path: Path | str) -> str:
        """Relative to where `tessera up` runs when it is below it: shorter, still usable."""
        absolute = Path(path).resolve()
        try:
            return str(absolute.relative_to(self._base))
        except ValueError:
            return str(absolute)

    def event(self, event: SupervisorEvent) -> None:
        log = self.path(event.log) if event.log is not None else "none"
        if event.kind is EventKind.EXITED:
            self.say(f"! {event.name} {_how_it_ended(event.exit_code)}; restarting in {event.delay:.1f} s (log: {log})")
        elif event.kind is EventKind.START_FAILED:
            first_line = event.message.splitlines()[0] if event.message else "no reason given"
            self.say(f"! {event.name} did not start again: {first_line}; next try in {event.delay:.1f} s (log: {log})")
        elif event.restarts:
            self.say(f"  {event.name} is back (pid {event.pid}, restart {event.restarts})")


def _how_it_ended(code: int | None) -> str:
    if code is None:
        return "ended"
    if code < 0:
        try:
            return f"was killed ({signal.Signals(-code).name})"
        except ValueError:
            return f"was killed (signal {-code})"
    return f"exited with code {code}"


def run(args: argparse.Namespace) -> int:
    try:
        settings = settings_from(args)
    except ConfigError as e:
        print(f"tessera up: {e}", file=sys.stderr)
        return 2
    console = _Console()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    with (settings.data_dir / "up.log").open("a", buffering=1) as log_file:
        # This process's own log (supervision, the demo's informers) goes to a file: the console is for people.
        logs.setup(args.v, args.logging_format, stream=log_file)
        return _run(settings, console)


def _run(settings: UpSettings, console: _Console) -> int:
    started = state.process_created(os.getpid())  # wall clock, so the interpreter's start counts too
    cluster = LocalCluster(
        settings,
        on_event=console.event,
        on_notice=lambda text: console.say(f"  {text}"),
    )
    # Stopped like Ctrl-C, also where SIGINT came ignored (a background job of a script).
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    console.say(f"tessera up: starting in {console.path(cluster.data_dir)} ({_nodes_in_words(settings)})")
    try:
        try:
            cluster.start()
        except TesseraError as e:
            print(f"tessera up: could not start: {e}", file=sys.stderr)
            return 1
        _print_components(console, cluster)
        console.say(f"Everything is up in {time.time() - started:.1f} s.")
        if settings.demo:
            try:
                _run_demo(console, cluster)
            except _StartTimeout as e:
                print(f"tessera up: could not start: {e}", file=sys.stderr)
                return 1
            except TesseraError as e:  # the system is up: say what went wrong and stay up
                console.say(f"! The demo failed: {e}")
        _print_try(console, cluster)
        threading.Event().wait()  # until Ctrl-C or SIGTERM
    except KeyboardInterrupt:
        console.say()
    finally:
        _stop(console, cluster)
    return 0


def _nodes_in_words(settings: UpSettings) -> str:
    parts = ["this machine"] if settings.local_agent else []
    if settings.nodes:
        parts.append(f"{settings.nodes} simulated {settings.profile} node{'s' if settings.nodes != 1 else ''}")
    return " and ".join(parts)


def _stop(console: _Console, cluster: LocalCluster) -> None:
    """Stop what was started; a second Ctrl-C does not cut the shutdown short."""
    signal.signal(signal.SIGINT, _still_stopping(console))
    signal.signal(signal.SIGTERM, _still_stopping(console))
    if cluster.owns_data_dir:
        console.say("Stopping …")
        cluster.stop()
        console.say("Stopped. Objects are kept in the data directory; tessera up there again resumes.")


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _still_stopping(console: _Console) -> Callable[[int, FrameType | None], None]:
    def handler(_signum: int, _frame: FrameType | None) -> None:
        console.say("Still stopping; every component is being shut down …")

    return handler


def _print_components(console: _Console, cluster: LocalCluster) -> None:
    rows = []
    for component in cluster.components:
        process = component.process
        where = process.url
        grpc = component.state(0).grpc
        if grpc:
            where += f"  gRPC {grpc}"
        rows.append((component.title, where, console.path(process.log_path)))
    width = [max(len(r[i]) for r in rows) for i in range(2)]
    for title, where, log in rows:
        console.say(f"  {title.ljust(width[0])}  {where.ljust(width[1])}  log: {log}")


def _run_demo(console: _Console, cluster: LocalCluster) -> None:
    """Submit the demo and print its table. Raises _StartTimeout when the nodes do not get Ready
    (with GPUs) within the start timeout; pods not placed by then are shown as such."""
    started = time.monotonic()
    timeout = cluster.settings.start_timeout
    with cluster.client() as client:
        local = [cluster.local_node] if cluster.local_node else []
        if missing := demo.wait_nodes_ready(client, cluster.simulated_nodes, local, timeout):
            raise _StartTimeout(_nodes_not_ready(cluster, missing, timeout))
        created = demo.submit(client)
        unplaced = demo.wait_placed(client, timeout)
        workloads = demoworkloads.submit(client)
        owned = demoworkloads.wait_pods(client, timeout)
        unplaced |= demo.wait_placed(client, timeout, owned)
        rows = demo.placements(client) + demo.placements(client, owned)
        quotademo.submit(client)  # after: team B takes only the GPUs the pods above left
        quotas_missing = quotademo.wait_written(client, timeout)
        quotas = quotademo.render(client)
    kept = len(demo.DEMO_PODS) - created
    note = f"; {kept} kept from an earlier run" if kept else ""
    console.say()
    console.say(f"Demo workload in namespace {demo.NAMESPACE} ({created} pods submitted{note}):")
    console.say(demo.render(rows))
    console.say(
        f"(the last rows are the pods of Deployment infer and Job train{'' if workloads else ', kept'}: "
        f"`kubectl get deploy,job,pods -n {demo.NAMESPACE}`)"
    )
    if unplaced:
        scheduler = next(c for c in cluster.components if c.name == "scheduler").process.log_path
        console.say(
            f"! Not every pod was placed within {timeout:g} s (log: {console.path(scheduler)}); "
            f"`kubectl get pods -n {demo.NAMESPACE} -w` shows what happens next."
        )
    console.say(f"(placed in {time.monotonic() - started:.1f} s)")
    console.say()
    console.say(
        f"Elastic quota: {quotademo.TEAM_B} asks for {quotademo.BORROWERS} one-GPU pods, 3 on its min and 2 on "
        f"{quotademo.TEAM_A}'s idle guarantee (docs/user/quota.md shows them given back):"
    )
    console.say(quotas)
    if quotas_missing:
        console.say(f"! Not written within {timeout:g} s: " + "; ".join(f"{q}: {w}" for q, w in quotas_missing.items()))


def _nodes_not_ready(cluster: LocalCluster, missing: dict[str, str], timeout: float) -> str:
    """Which nodes were not ready, why, and how their agents' logs end."""
    lines = [f"the demo's nodes were not ready within {timeout:g} s:"]
    lines += [f"  {node}: {what}" for node, what in missing.items()]
    for component in cluster.components:
        if component.node in missing:
            lines.append(f"{component.name}:{component.process.log_end(_LOG_LINES)}")
    return "\n".join(lines)


def _print_try(console: _Console, cluster: LocalCluster) -> None:
    kubeconfig = cluster.kubeconfig
    faulty = next((c for c in cluster.components if c.node in cluster.simulated_nodes), None)
    dashboard = next((c for c in cluster.components if c.name == "dashboard"), None)
    scraper = next((c for c in cluster.components if c.name == "prometheus"), None)
    console.say()
    if dashboard is not None:
        console.say(f"Dashboard: {dashboard.process.url}/   (tessera top: the same GPU map in this terminal)")
    if scraper is not None:
        console.say(f"Prometheus: {scraper.process.url}/   (every component, deploy/monitoring's rules and alerts)")
    console.say(
        f"Scheduler names served: {', '.join(components.SERVED_SCHEDULER_NAMES)} "
        "(Koordinator's examples run unchanged; a pod naming another gets a SchedulerNameNotServed event)"
    )
    console.say("Try:")
    console.say(f"  export KUBECONFIG={kubeconfig}")
    if shutil.which("tessera") is None:  # run as .venv/bin/tessera (make run): put it on PATH for the commands below
        console.say(f"  export PATH={Path(sys.executable).parent}:$PATH")
    console.say("  kubectl get nodes                 # Ready, with koordinator.sh/gpu-* in allocatable")
    console.say("  kubectl get devices -o yaml       # the Device CRs: each node's GPUs and NICs")
    console.say("  kubectl get pods -A -o wide")
    if cluster.settings.demo:
        console.say(f"  tessera explain too-big -n {demo.NAMESPACE}   # why a pod is pending")
        console.say("  tessera quota                     # the teams' quotas: min, max, runtime, used, request")
    else:
        console.say("  tessera explain POD -n NAMESPACE  # why a pod is pending")
    console.say("  kubectl get nodes,devices,pods -A -o yaml > cluster.yaml")
    console.say("  tessera what-if -f cluster.yaml   # schedule pending pods (add -f your-pod.yaml) offline")
    if faulty is not None:
        where = (
            ""
            if cluster.data_dir == Path("tessera-data").resolve()
            else f" --data-dir {console.path(cluster.data_dir)}"
        )
        console.say(
            f"  tessera gpu fault --node {faulty.node} --minor 3 --xid 79{where}   # GPU 3 of {faulty.node} fails"
        )
    console.say(f"State: {console.path(cluster.data_dir / state.FILE_NAME)}. Ctrl-C stops everything.")
