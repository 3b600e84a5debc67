"""Everything the page shows, from the objects and the scheduler's answers: one pure function.

`server` calls `state()` with what the informers hold after each burst of changes; tests and the
benchmark call it with objects they make. `tessera top` uses `cluster()` for the map alone.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence

from apis.crds.device import Device, DeviceType
from apis.crds.elasticquota import ElasticQuota
from apis.crds.podgroup import PodGroup
from apis.crds.podmigrationjob import PodMigrationJob
from apis.crds.reservation import Reservation
from apis.dra.claim import ResourceClaim
from apis.dra.slice import ResourceSlice
from apis.errors import InvalidRequestError
from apis.extension.devicerequest import DeviceRequest, pod_device_requests
from apis.k8s.core import Pod
from dashboard import gpumap, health, snapshot, workload
from dashboard.invalid import Invalid
from dashboard.migrations import rows as migration_rows
from dashboard.reservations import rows as reservation_rows
from dashboard.workload import SchedulerView

__all__ = ["cluster", "pending_requests", "state"]


def pending_requests(pods: Iterable[Pod]) -> list[DeviceRequest]:
    """The GPU requests of the pods no node holds yet (invalid requests left out: no node could
    take them anyway, and the scheduler says why)."""
    out = []
    for pod in pods:
        if pod.node_name or pod.is_terminal or pod.is_deleting:
            continue
        try:
            request = pod_device_requests(pod).get(DeviceType.GPU)
        except InvalidRequestError:
            continue
        if request is not None:
            out.append(request)
    return out


def cluster(
    devices: Iterable[Device],
    pods: Sequence[Pod],
    held_by: Iterable[Reservation | Invalid] = (),
    *,
    claims: Iterable[ResourceClaim | Invalid] = (),
    slices: Iterable[ResourceSlice | Invalid] = (),
) -> tuple[gpumap.ClusterMap, dict[tuple[str, int], int], gpumap.Totals]:
    """The GPU map (with what the Reservations in `held_by` hold, and the allocated `claims`
    by `slices`), its fragmented GPUs (node, minor -> percent) and its totals."""
    built = gpumap.build(devices, pods, held_by, claims=claims, slices=slices)
    fragments = gpumap.fragmented(built.nodes, pending_requests(pods))
    return built, fragments, gpumap.totals(built.nodes, fragments)


def state(
    *,
    devices: Iterable[Device],
    pods: Sequence[Pod],
    pod_groups: Iterable[PodGroup],
    quotas: Sequence[ElasticQuota],
    scheduler: Mapping[str, SchedulerView],
    scrapes: tuple[health.Scrape | None, health.Scrape | None],
    now: datetime.datetime,
    errors: Sequence[str] = (),
    reservations: Sequence[Reservation | Invalid] = (),
    jobs: Iterable[PodMigrationJob | Invalid] = (),
    claims: Iterable[ResourceClaim | Invalid] = (),
    slices: Iterable[ResourceSlice | Invalid] = (),
) -> snapshot.State:
    """The page's state. `scrapes` is (latest, an earlier one) of the scheduler's metrics;
    Reservations and PodMigrationJobs (`jobs`) that did not parse come as `Invalid` and are listed so."""
    built, fragments, totals = cluster(devices, pods, reservations, claims=claims, slices=slices)
    latest, earlier = scrapes
    return snapshot.render(
        built,
        fragments,
        totals,
        pending=workload.pending(pods, now=now, scheduler=scheduler),
        gangs=workload.gangs(pods, pod_groups, now=now),
        quotas=workload.quota_tree(quotas),
        health=health.health(latest, earlier) if latest is not None else None,
        now=now.timestamp(),
        errors=errors,
        reservations=reservation_rows(reservations),
        migrations=migration_rows(jobs, pods=pods, reservations=reservations),
    )
