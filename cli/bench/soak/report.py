"""A soak's result as a `tessera bench` report: what ran, what was killed, what broke.

The main timing is create → bound (from sending the create to the watch seeing the pod bound,
kills included; quota-limited pods, which wait for their quota by design, left out).
`violations` is the count; `violation_list` names each broken invariant with the objects
involved. The run passes when there is none.
"""

from __future__ import annotations

from collections import Counter

from cli.bench._report import Latencies, Report
from cli.bench.soak.driver import SoakResult

__all__ = ["put"]


def put(result: SoakResult, report: Report) -> None:
    report.value("setup_seconds", round(result.setup_s, 1), "s", label="system up, nodes ready")
    report.value("seconds", round(result.ran_s, 1), "s", label="workload and chaos ran")
    report.value("gpus", result.gpus, "GPUs", label="GPUs in the cluster")
    report.value(
        "pods_created", result.pods_created, "pods", label="pods created (acknowledged)", gangs=result.gangs_created
    )
    report.value("pods_scheduled", result.pods_scheduled, "pods", label="pods seen bound")
    report.value(
        "pods_deleted", result.pods_deleted, "pods", label="pods deleted", failed_creates=result.create_failures
    )
    by_component = Counter(k.component.split("/")[0].replace("-", "_") for k in result.kills)
    report.value(
        "kills",
        len(result.kills),
        "kills",
        label="components killed (SIGKILL)",
        **{f"kills_{kind}": count for kind, count in sorted(by_component.items())},
    )
    report.value(
        "jobs_completed",
        result.jobs_completed,
        "jobs",
        label="Jobs seen complete",
        jobs_created=result.jobs_created,
        deployments=result.deployments,
        rollouts=result.rollouts,
    )
    report.value(
        "node_losses",
        len(result.node_losses),
        "nodes",
        label="nodes lost (agent frozen)",
        nodes_back=sum(1 for loss in result.node_losses if loss.back_at is not None),
        nodes_deleted=sum(1 for loss in result.node_losses if loss.deleted),
        nodes_seen_tainted=result.nodes_seen_lost,
    )
    report.value(
        "reservations",
        result.reservations_created,
        "reservations",
        label="Reservations created",
        reservation_owners=result.reservation_owners,
        **{f"reservations_{phase.lower()}": n for phase, n in sorted(result.reservations_ended.items())},
    )
    report.value(
        "migrations",
        sum(result.migrations_created.values()),
        "jobs",
        label="PodMigrationJobs created",
        **{f"migrations_{_snake(mode)}": n for mode, n in sorted(result.migrations_created.items())},
        **{f"migrations_{phase.lower()}": n for phase, n in sorted(result.migrations_by_phase.items())},
    )
    report.value(
        "quota_pods",
        result.quota_pods,
        "pods",
        label="quota family: pods in every GPU spelling",
        quota_pods_outside=result.quota_pods_outside,
        quota_edits=result.quota_edits,
        quota_reclaimed=result.quota_reclaimed,
        quota_spellings=len(result.quota_spellings),
    )
    report.value("pods_evicted", result.pods_evicted, "pods", label="pods evicted from lost nodes")
    report.value("kills_survived", result.kills_survived, "kills", label="killed components back up")
    report.value(
        "faults_injected",
        result.faults_injected,
        "faults",
        label="GPU faults (XID 79)",
        faults_recovered=result.faults_recovered,
    )
    report.value("checks", result.checks, "checks", label="invariant checks", checks_skipped=result.checks_skipped)
    if result.create_to_bound_s:
        report.latencies(Latencies.of(result.create_to_bound_s), label="create to bound")
    report.value("violations", len(result.violations), "", label="invariant violations (must be 0)")
    report.listing(
        "violation_list",
        [{"invariant": v.invariant, "objects": ", ".join(v.objects), "message": v.message} for v in result.violations],
        label="violations",
    )


def _snake(name: str) -> str:
    """`ReservationFirst` → `reservation_first`."""
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(name))
