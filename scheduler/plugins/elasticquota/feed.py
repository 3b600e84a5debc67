"""ElasticQuotas and every pod's quota charge, fed into the scheduler's QuotaManager: the
ElasticQuota plugin's feeds (`scheduler.framework.feeds`), registered when a profile enables it,
so a cluster without the CRD is never watched for it.

Quotas come from their own watch; pods from the scheduler's pod informer (one watch), where every
non-terminal pod counts in its quota's request and, once bound, in its used — so `used` is exact
after a restart, before any cycle. A Reservation's reserve pod is charged by the plugin's Reserve
while the Reservation is placed; once it holds nothing (terminal, deleted) the charge goes. The
Reservations are followed only when something else watches them (the Reservation plugin: without
it none is scheduled, so none is charged).

A quota that does not parse keeps its last valid version (the informer's rule); one that breaks
the tree's rules gets a Warning Event naming the rule (after the first list, once for all; then
for each change), and its pods are refused with that rule at PreFilter. A quota change may let
refused pods fit: `QUOTA_CHANGED` moves them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from apis.crds.elasticquota import ElasticQuota
from apis.crds.reservation import Reservation
from apis.errors import TesseraError
from apis.extension import names
from apis.k8s.core import Pod
from kube.quotas import QuotaManager
from scheduler.framework.events import ClusterEvent, EventAction
from scheduler.framework.feeds import About, Feeds, Handlers, Watch

__all__ = ["QUOTA_CHANGED", "REASON_INVALID_QUOTA", "QuotaFeed"]

REASON_INVALID_QUOTA: Final = "InvalidElasticQuota"
#: An ElasticQuota was created, changed or deleted.
QUOTA_CHANGED: Final = ClusterEvent(names.ELASTIC_QUOTAS.kind, EventAction.ALL, "ElasticQuotaChange")
QUOTAS: Final = Watch(names.ELASTIC_QUOTAS, ElasticQuota.from_dict)
RESERVATIONS: Final = Watch(names.RESERVATIONS, Reservation.from_dict)


class QuotaFeed:
    """Feeds one QuotaManager (the scheduler's: registered once, whichever profile asks first)."""

    def __init__(self, manager: QuotaManager, feeds: Feeds) -> None:
        self._manager = manager
        self._feeds = feeds
        #: The quotas seen, by name: what the first list's check speaks about.
        self._quotas: dict[str, ElasticQuota] = {}
        self._synced = False

    def register(self, key: object) -> None:
        """Register the quota watch and the pod and Reservation handlers (once per `key`)."""
        manager = self._manager
        self._feeds.watch(
            QUOTAS,
            Handlers(
                added=self._changed,
                updated=lambda _old, new: self._changed(new),
                deleted=self._deleted,
                synced=self._first_list,
                invalid=self._invalid,
            ),
            key=(key, "quotas"),
        )
        self._feeds.pods(
            Handlers(
                added=manager.update_pod, updated=lambda _old, new: manager.update_pod(new), deleted=manager.remove_pod
            ),
            key=(key, "pods"),
        )
        self._feeds.watch(
            RESERVATIONS,
            Handlers(
                added=self._reservation,
                updated=lambda _old, new: self._reservation(new),
                deleted=self._released,
                opens=False,
            ),
            key=(key, "reservations"),
        )

    def _changed(self, quota: ElasticQuota) -> None:
        self._quotas[quota.meta.name] = quota
        self._manager.set_quota(quota)
        if self._synced:
            self._report(quota, self._manager.problems().get(quota.meta.name, []))
        self._feeds.emit(QUOTA_CHANGED)

    def _deleted(self, quota: ElasticQuota) -> None:
        self._quotas.pop(quota.meta.name, None)
        self._manager.remove_quota(quota.meta.name)
        self._feeds.emit(QUOTA_CHANGED)

    def _first_list(self) -> None:
        """Say which of the listed quotas break a rule (once, not per quota listed: checking the
        tree costs a pass over every quota)."""
        self._synced = True
        problems = self._manager.problems()
        for quota in self._quotas.values():
            self._report(quota, problems.get(quota.meta.name, []))

    def _report(self, quota: ElasticQuota, problems: list[str]) -> None:
        if problems:
            self._feeds.warn(About.of(names.ELASTIC_QUOTAS, quota.meta), REASON_INVALID_QUOTA, "; ".join(problems))

    def _invalid(self, raw: Mapping[str, Any], error: TesseraError) -> None:
        message = f"the scheduler cannot read this ElasticQuota; it keeps the last valid version: {error}"
        self._feeds.warn(About.raw(names.ELASTIC_QUOTAS, raw), REASON_INVALID_QUOTA, message)

    def _reservation(self, reservation: Reservation) -> None:
        if reservation.phase.terminal or reservation.meta.deletion_timestamp:
            self._released(reservation)

    def _released(self, reservation: Reservation) -> None:
        """The Reservation holds nothing any more: what Reserve charged for it goes."""
        pod: Pod = reservation.reserve_pod()
        self._manager.remove_pod(pod)
