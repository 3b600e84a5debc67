"""Where the dashboard's data comes from: informers on the API server, the scheduler's gRPC API
and its metrics. The only I/O besides the HTTP server.

`ClusterSources` keeps Devices, Pods, PodGroups, ElasticQuotas, Reservations,
PodMigrationJobs, ResourceClaims and ResourceSlices current (list + watch through
`kube.Informer`) and calls `on_change` from the informers' threads on every change.
Reservations, PodMigrationJobs, ResourceClaims and ResourceSlices that do not parse are kept as
`Invalid` (`dashboard.invalid`); the page lists the first two with their error.
`SchedulerPoller` asks the scheduler, every `poll_interval`, for its pending pods and explains
the oldest (re-explaining a pod only when its attempts change, or every `_REEXPLAIN_S`), and
scrapes its metrics; it too calls `on_change` when what it knows changed. A scheduler that does
not answer is a line in `errors`, never a stop: the page shows the map without it.
"""

from __future__ import annotations

import collections
import logging
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import grpc
from prometheus_client.parser import text_string_to_metric_families

from apis.crds.device import Device
from apis.crds.elasticquota import ElasticQuota
from apis.crds.podgroup import PodGroup
from apis.crds.podmigrationjob import PodMigrationJob
from apis.crds.reservation import Reservation
from apis.dra import RESOURCE_CLAIMS, RESOURCE_SLICES
from apis.dra.claim import ResourceClaim
from apis.dra.slice import ResourceSlice
from apis.extension import names
from apis.k8s.core import Pod
from dashboard import explanation
from dashboard.health import Samples, Scrape
from dashboard.invalid import Invalid, tolerant
from dashboard.settings import DashboardSettings
from dashboard.workload import SchedulerView
from kube.client import Client
from kube.errors import APIError
from kube.informer import Informer
from kube.resources import PODS
from kube.restconfig import Credentials
from proto.scheduler.v1 import scheduler_pb2 as pb
from proto.scheduler.v1 import scheduler_pb2_grpc

__all__ = ["ClusterSources", "SchedulerPoller", "SchedulerReport"]

log = logging.getLogger(__name__)

#: A pod whose attempts did not change is explained again after this long (nodes changed).
_REEXPLAIN_S: Final = 10.0
#: Rates and the p99 are over at least this window of scrapes.
_RATE_WINDOW_S: Final = 10.0
_RPC_TIMEOUT_S: Final = 5.0


class ClusterSources:
    """The informers; `start()` begins listing, `stop()` ends them. Thread-safe reads."""

    def __init__(self, client: Client, *, on_change: Callable[[], None]) -> None:
        self.devices: Informer[Device] = Informer(client, names.DEVICES, parse=Device.from_dict)
        self.pods: Informer[Pod] = Informer(client, PODS, parse=Pod.from_dict)
        self.pod_groups: Informer[PodGroup] = Informer(client, names.POD_GROUPS, parse=PodGroup.from_dict)
        self.upstream_pod_groups: Informer[PodGroup] = Informer(
            client, names.UPSTREAM_POD_GROUPS, parse=PodGroup.upstream_from_dict
        )
        self.quotas: Informer[ElasticQuota] = Informer(client, names.ELASTIC_QUOTAS, parse=ElasticQuota.from_dict)
        self.reservations: Informer[Reservation | Invalid] = Informer(
            client, names.RESERVATIONS, parse=tolerant(names.RESERVATIONS.kind, Reservation.from_dict)
        )
        self.migrations: Informer[PodMigrationJob | Invalid] = Informer(
            client, names.POD_MIGRATION_JOBS, parse=tolerant(names.POD_MIGRATION_JOBS.kind, PodMigrationJob.from_dict)
        )
        # Dynamic Resource Allocation (resource.k8s.io/v1): what claims hold of the GPUs. On a
        # cluster that does not serve it they list nothing (the informer says not_served).
        self.claims: Informer[ResourceClaim | Invalid] = Informer(
            client, RESOURCE_CLAIMS, parse=tolerant(RESOURCE_CLAIMS.kind, ResourceClaim.from_dict)
        )
        self.slices: Informer[ResourceSlice | Invalid] = Informer(
            client, RESOURCE_SLICES, parse=tolerant(RESOURCE_SLICES.kind, ResourceSlice.from_dict)
        )
        self._all: tuple[Informer[Any], ...] = (
            self.devices,
            self.pods,
            self.pod_groups,
            self.upstream_pod_groups,
            self.quotas,
            self.reservations,
            self.migrations,
            self.claims,
            self.slices,
        )

        def changed(*_: object) -> None:
            on_change()

        for informer in self._all:
            informer.add_handlers(on_add=changed, on_update=changed, on_delete=changed)

    def start(self) -> None:
        for informer in self._all:
            informer.start()

    def synced(self) -> str:
        """'' once devices and pods are listed (enough for the map), else what is missing."""
        missing = [i.gvr.plural for i in (self.devices, self.pods) if not i.has_synced]
        return f"not yet listed: {', '.join(missing)}" if missing else ""

    def stop(self) -> None:
        for informer in self._all:
            informer.stop()


@dataclass(frozen=True, slots=True)
class SchedulerReport:
    """What the poller last learnt: by pending pod (`namespace/name`), and the scrapes."""

    pending: dict[str, SchedulerView]
    scrape: Scrape | None
    previous: Scrape | None
    errors: tuple[str, ...]


class SchedulerPoller:
    """Asks the scheduler on a thread of its own; `report()` is the latest answer."""

    def __init__(
        self, settings: DashboardSettings, *, on_change: Callable[[], None], credentials: Credentials | None = None
    ) -> None:
        """`credentials`: what the scheduler's `/metrics` is asked with (the dashboard's own,
        which RBAC must allow `get` on `/metrics`)."""
        self._settings = settings
        self._on_change = on_change
        self._credentials = credentials
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._channel: grpc.Channel | None = None
        #: pod -> (attempts, when, its chain, whether it fits somewhere): what the last Explain said.
        self._explained: dict[str, tuple[int, float, tuple[explanation.Step, ...], bool]] = {}
        self._scrapes: collections.deque[Scrape] = collections.deque()
        self._report = SchedulerReport({}, None, None, ())
        self._lock = threading.Lock()

    def report(self) -> SchedulerReport:
        with self._lock:
            return self._report

    def start(self) -> None:
        settings = self._settings
        if not settings.scheduler_target and not settings.scheduler_metrics_url and not settings.scheduler_address_file:
            return
        if self._settings.scheduler_target:
            self._channel = grpc.insecure_channel(self._settings.scheduler_target)
        self._thread = threading.Thread(target=self._loop, name="scheduler-poller", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=_RPC_TIMEOUT_S * 2)
        if self._channel is not None:
            self._channel.close()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                report = self._poll()
            except Exception:  # a loop boundary: one bad poll must not end the dashboard's view
                log.exception("Polling the scheduler failed")
                report = SchedulerReport({}, None, None, ("polling the scheduler failed: see the dashboard's log",))
            with self._lock:
                changed = report != self._report
                self._report = report
            if changed:
                self._on_change()
            self._stop.wait(self._settings.poll_interval)

    def _poll(self) -> SchedulerReport:
        errors: list[str] = []
        pending: dict[str, SchedulerView] = {}
        if self._channel is not None:
            try:
                pending = self._pending()
            except grpc.RpcError as e:
                errors.append(f"the scheduler at {self._settings.scheduler_target} did not answer: {e.details()}")
        scrape, previous = None, None
        url = self._metrics_url()
        if url:
            try:
                authorization = self._credentials.authorization() if self._credentials is not None else None
                insecure = self._settings.scheduler_metrics_insecure
                scrape = Scrape(time.monotonic(), _scrape(url, authorization, insecure=insecure))
            except (OSError, ValueError, APIError) as e:
                errors.append(f"the scheduler's metrics at {url}: {e}")
            if scrape is not None:
                self._scrapes.append(scrape)
                while len(self._scrapes) > 2 and scrape.at - self._scrapes[1].at >= _RATE_WINDOW_S:
                    self._scrapes.popleft()
                previous = self._scrapes[0] if len(self._scrapes) > 1 else None
        return SchedulerReport(pending, scrape, previous, tuple(errors))

    def _metrics_url(self) -> str:
        """The metrics URL as given, or from the scheduler's address file as it is now ('' when
        the file is missing: the scheduler is (re)starting)."""
        path = self._settings.scheduler_address_file
        if path is None:
            return self._settings.scheduler_metrics_url
        try:
            address = path.read_text(encoding="utf-8").strip()
        except OSError:
            return ""
        return f"http://{address}/metrics" if address else ""

    def _pending(self) -> dict[str, SchedulerView]:
        stub = scheduler_pb2_grpc.SchedulerStub(self._channel)  # type: ignore[no-untyped-call]  # generated, untyped
        listed = stub.ListPending(pb.ListPendingRequest(), timeout=_RPC_TIMEOUT_S).pods
        now = time.monotonic()
        oldest = sorted(listed, key=lambda p: -p.waiting_seconds)[: self._settings.explain_limit]
        keep: dict[str, tuple[int, float, tuple[explanation.Step, ...], bool]] = {}
        for p in oldest:
            cached = self._explained.get(p.pod)
            if cached is not None and cached[0] == p.attempts and now - cached[1] < _REEXPLAIN_S:
                keep[p.pod] = cached
                continue
            namespace, _, name = p.pod.partition("/")
            answer = stub.Explain(pb.ExplainRequest(namespace=namespace, name=name), timeout=_RPC_TIMEOUT_S)
            keep[p.pod] = (p.attempts, now, explanation.chain(answer), bool(answer.fits))
        self._explained = keep
        return {
            p.pod: SchedulerView(
                queue=p.queue,
                attempts=p.attempts,
                message=p.message,
                steps=keep[p.pod][2] if p.pod in keep else (),
                fits=keep[p.pod][3] if p.pod in keep else False,
            )
            for p in listed
        }


def _scrape(url: str, authorization: str | None = None, *, insecure: bool = False) -> Samples:
    """Every sample of a Prometheus text endpoint, asked with `authorization` (the Authorization
    header); `insecure`: HTTPS without verifying the certificate. Raises OSError (no answer, or a
    refusal: 401, 403) or ValueError."""
    request = urllib.request.Request(url, headers={"Authorization": authorization} if authorization else {})
    context = None
    if insecure:
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with urllib.request.urlopen(request, timeout=_RPC_TIMEOUT_S, context=context) as response:
            text = response.read().decode()
    except urllib.error.URLError as e:
        raise OSError(str(e.reason)) from e
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
