"""One soak run: start the system, run the workload, the killer, the faults and the checker side by
side for the duration, let the cluster settle, check once more, stop everything.

The system is `tessera up`'s (cli/localcluster: the same components, supervision and start-up),
on simulated nodes only, with the ElasticQuota plugin on, in a data directory of its own. Each
activity runs in its own thread so that a request hanging on a killed API server delays only
that activity. After the duration the killer and the faults stop (every faulted GPU is reset),
the workload stops creating, and the checker runs until nothing is wrong or every liveness
grace has run out (`SoakSettings.settle_s`); then every component must be up.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from apis.crds.device import Device, DeviceType
from apis.errors import ConfigError
from apis.extension import names
from cli.bench.soak.apps import DEPLOYMENTS, GPUS_RESERVED, Apps
from cli.bench.soak.chaos import GPUFaults, Kill, Killer, Loss, NodeLoss, runtime_proxy_note
from cli.bench.soak.checker import Checker
from cli.bench.soak.invariants import Violation, all_invariants
from cli.bench.soak.invariants.liveness import components_down
from cli.bench.soak.migrating import Migrating
from cli.bench.soak.observe import BoundWatch, Record
from cli.bench.soak.quotaplay import QuotaPlay
from cli.bench.soak.reserving import GPUS_RESERVING, Reserving
from cli.bench.soak.settings import SoakSettings
from cli.bench.soak.workload import Workload
from cli.localcluster import LocalCluster, UpSettings, demo
from cli.localcluster.components import Component
from kube import resources
from kube.client import Client
from kube.process import ServingProcess

__all__ = ["SoakResult", "run_soak"]

log = logging.getLogger(__name__)

_COMPONENTS_UP_TIMEOUT_S = 60.0


@dataclass(slots=True)
class SoakResult:
    setup_s: float
    ran_s: float
    nodes: int
    gpus: int
    pods_created: int
    pods_scheduled: int
    pods_deleted: int
    gangs_created: int
    create_failures: int
    kills: list[Kill]
    faults_injected: int
    faults_recovered: int
    checks: int
    checks_skipped: int
    create_to_bound_s: list[float]
    violations: list[Violation]
    shapes: dict[str, int] = field(default_factory=dict)
    deployments: int = 0
    rollouts: int = 0
    jobs_created: int = 0
    jobs_completed: int = 0
    node_losses: list[Loss] = field(default_factory=list)
    nodes_seen_lost: int = 0
    pods_evicted: int = 0
    reservations_created: int = 0
    reservation_owners: int = 0
    #: How the soak saw its Reservations end: Succeeded (used), Failed (expired).
    reservations_ended: dict[str, int] = field(default_factory=dict)
    #: PodMigrationJobs the soak created, by mode; every job at the end (the descheduler's too), by phase.
    migrations_created: dict[str, int] = field(default_factory=dict)
    migrations_by_phase: dict[str, int] = field(default_factory=dict)
    #: The quota family: its pods (those outside every quota among them), quota edits, the pods
    #: reclaim evicted (its Events), and its pods by the resource names they asked in.
    quota_pods: int = 0
    quota_pods_outside: int = 0
    quota_edits: int = 0
    quota_reclaimed: int = 0
    quota_spellings: dict[str, int] = field(default_factory=dict)

    @property
    def kills_survived(self) -> int:
        return sum(1 for k in self.kills if k.back_at is not None)


def run_soak(settings: SoakSettings, *, progress: Callable[[str], None] = lambda _: None) -> SoakResult:
    with _data_dir(settings.data_dir) as data_dir:
        up = UpSettings(
            data_dir=data_dir,
            nodes=settings.nodes,
            profile=settings.profile,
            local_agent=False,
            scheduler_address=f"unix://{data_dir / 'scheduler.sock'}",
            start_timeout=settings.start_timeout_s,
            scheduler_plugins=("ElasticQuota",),
            kube_controller_manager_args=settings.kube_controller_manager_args(),
            agent_args=settings.agent_args(),
        )
        up.validate()
        # The killer hears the supervisor's events; it reads the components once they exist.
        killer = Killer(lambda: cluster.components, interval_s=settings.kill_interval_s, seed=settings.seed)
        cluster = LocalCluster(up, on_event=killer.on_event, on_notice=progress)
        started = time.time()
        try:
            cluster.start()
            with cluster.client(user_agent="tessera-soak") as client:
                return _soak(settings, cluster, client, killer=killer, started=started, progress=progress)
        finally:
            progress("stopping the system")
            cluster.stop()


@contextlib.contextmanager
def _data_dir(given: Path | None) -> Iterator[Path]:
    if given is not None:
        given.mkdir(parents=True, exist_ok=True)
        yield given.resolve()
        return
    scratch = Path(tempfile.mkdtemp(prefix="tessera-soak-"))
    try:
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _soak(
    settings: SoakSettings,
    cluster: LocalCluster,
    client: Client,
    *,
    killer: Killer,
    started: float,
    progress: Callable[[str], None],
) -> SoakResult:
    if missing := demo.wait_nodes_ready(client, cluster.simulated_nodes, [], settings.start_timeout_s):
        raise ConfigError(f"nodes not ready within {settings.start_timeout_s:g} s: {missing}")
    devices = [Device.from_dict(o) for o in client.resource(names.DEVICES).list_all().items]
    gpus = sum(len(d.of_type(DeviceType.GPU)) for d in devices)
    gpus_per_node = max(len(d.of_type(DeviceType.GPU)) for d in devices)
    setup_s = time.time() - started
    progress(f"{settings.nodes} nodes with {gpus} GPUs ready after {setup_s:.1f} s")
    progress(runtime_proxy_note(cluster.components))

    record = Record()
    watch = BoundWatch(client, record)
    # The Deployments' and Jobs' pods take their share first, so the bare pods that fit still fit.
    # The Reservations and their owners likewise.
    workload = Workload(client, record, settings, total_gpus=max(0.0, gpus - GPUS_RESERVED - GPUS_RESERVING))
    workload.setup()
    apps = Apps(client, seed=settings.seed, toleration_s=settings.eviction_toleration_s)
    apps.setup()
    reserving = Reserving(client, record, seed=settings.seed, toleration_s=settings.eviction_toleration_s)
    migrating = Migrating(client, seed=settings.seed)
    quotaplay = QuotaPlay(
        client, record, total_gpus=gpus, seed=settings.seed, toleration_s=settings.eviction_toleration_s
    )
    quotaplay.setup()
    agents = [c for c in cluster.components if c.node]
    faults = GPUFaults(
        agents,
        gpus_per_node=gpus_per_node,
        interval_s=settings.fault_interval_s,
        duration_s=settings.fault_duration_s,
        seed=settings.seed,
    )
    nodes_api = client.resource(resources.NODES)
    node_loss = NodeLoss(
        agents,
        nodes_api.delete,
        interval_s=settings.node_loss_interval_s,
        down_s=settings.node_down_s,
        seed=settings.seed,
        delete_after_s=settings.node_delete_after_s,
    )
    checker = Checker(
        client,
        record,
        all_invariants(settings.bounds()),
        calm_since=lambda: max(killer.calm_since(), node_loss.calm_since()),
        kills_calm_since=killer.calm_since,
        on_violation=lambda v: progress(f"VIOLATION {v.invariant}: {v.message}"),
    )
    watch.start()
    threads = [
        threading.Thread(target=workload.run, name="soak-workload", daemon=True),
        threading.Thread(target=apps.run, name="soak-apps", daemon=True),
        threading.Thread(target=reserving.run, name="soak-reservations", daemon=True),
        threading.Thread(target=migrating.run, name="soak-migrations", daemon=True),
        threading.Thread(target=quotaplay.run, name="soak-quotas", daemon=True),
        threading.Thread(target=killer.run, name="soak-killer", daemon=True),
        threading.Thread(target=faults.run, name="soak-faults", daemon=True),
        threading.Thread(target=node_loss.run, name="soak-node-loss", daemon=True),
        threading.Thread(target=checker.run, args=(settings.check_interval_s,), name="soak-checker", daemon=True),
    ]
    began = time.time()
    try:
        for thread in threads:
            thread.start()
        _report_progress(settings, began, workload=workload, killer=killer, checker=checker, progress=progress)
        for stoppable in (killer, faults, node_loss, workload, apps, reserving, migrating, quotaplay, checker):
            stoppable.stop()
        for thread in threads:
            thread.join()
        node_loss.bring_all_back()
        reserving.delete_all()
        ran_s = time.time() - began
        progress(f"duration over after {ran_s:.0f} s; resetting faulted GPUs and letting the cluster settle")
        faults.recover_all(settings.settle_s)
        checker.settle(settings.settle_s, settings.check_interval_s)
        for violation in components_down(_components_up(cluster.components, _COMPONENTS_UP_TIMEOUT_S)):
            checker.persistence.counted[violation.key] = violation
    finally:
        watch.stop()
    return SoakResult(
        setup_s=setup_s,
        ran_s=ran_s,
        nodes=settings.nodes,
        gpus=gpus,
        pods_created=workload.created,
        pods_scheduled=len(record.bound_at),
        pods_deleted=workload.deleted,
        gangs_created=workload.gangs,
        create_failures=workload.create_failures,
        kills=list(killer.kills),
        faults_injected=faults.injected,
        faults_recovered=faults.recovered,
        checks=checker.checks,
        checks_skipped=checker.skipped,
        create_to_bound_s=record.create_to_bound_s(),
        violations=checker.violations,
        shapes=dict(workload.by_shape),
        deployments=len(DEPLOYMENTS),
        rollouts=apps.rollouts,
        jobs_created=apps.jobs_created,
        jobs_completed=apps.jobs_completed,
        node_losses=list(node_loss.losses),
        nodes_seen_lost=record.nodes_seen_lost,
        pods_evicted=record.evicted,
        reservations_created=reserving.created,
        reservation_owners=reserving.owners_created,
        reservations_ended=dict(reserving.ended),
        migrations_created=dict(migrating.created),
        migrations_by_phase=dict(migrating.phases()),
        quota_pods=quotaplay.created,
        quota_pods_outside=quotaplay.created_outside,
        quota_edits=quotaplay.edits,
        quota_reclaimed=len(record.reclaimed),
        quota_spellings=dict(quotaplay.by_spelling),
    )


def _report_progress(
    settings: SoakSettings,
    began: float,
    *,
    workload: Workload,
    killer: Killer,
    checker: Checker,
    progress: Callable[[str], None],
) -> None:
    """Wait out the duration, saying now and then how it goes."""
    every = max(10.0, min(60.0, settings.duration_s / 10))
    end = began + settings.duration_s
    while (left := end - time.time()) > 0:
        time.sleep(min(every, left))
        progress(
            f"{time.time() - began:.0f} s: {workload.created} pods created, {workload.deleted} deleted, "
            f"{len(killer.kills)} kills, {checker.checks} checks, {len(checker.violations)} violations"
        )


def _up(component: Component) -> bool:
    process = component.process
    if not process.running:
        return False
    return process.ready() if isinstance(process, ServingProcess) else True


def _components_up(components: list[Component], timeout_s: float) -> dict[str, bool]:
    """Whether each component runs and is ready, waiting up to `timeout_s` for all of them
    (the last victim may still be in its restart backoff)."""
    deadline = time.time() + timeout_s
    while True:
        ready = {c.name: _up(c) for c in components}
        if all(ready.values()) or time.time() >= deadline:
            return ready
        time.sleep(0.5)
