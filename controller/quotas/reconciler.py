"""The quota reconciler: each ElasticQuota's status and annotations, and reclaim.

Key: `namespace/name` of an ElasticQuota. Every quota, pod and node change can move any quota's
runtime (idle resources are shared by weight), so each queues every quota; the work queue merges
them and a reconcile that finds nothing different writes nothing.

A reconcile
1. writes the annotations (`runtime`, `request`, `allocated`, `guaranteed`,
   `non-preemptible-used`) and `status` (`used`, the `Valid` condition) that differ from the
   cache, and writes nothing while the cache is older than its own last write (no second,
   identical write: the event of that write queues the key again);
2. says once, with a Warning Event, why a quota is invalid (a broken rule, a bad annotation, or
   an object that does not parse: condition `Valid=False`), and never stops for it;
3. reclaims: a leaf quota whose used stays above its runtime past the grace period loses its
   pods as `reclaim.plan` picks them, through the Eviction API, at most as fast as the token
   bucket allows, with an Event on the quota and on each pod.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, NoReturn, Protocol

from apis.crds.elasticquota import ElasticQuota
from apis.extension import names
from apis.extension import quota as quota_labels
from apis.k8s import resources
from apis.k8s.core import Node, Pod
from apis.k8s.meta import now_rfc3339
from apis.quota import QuotaManager
from apis.quota.charge import quota_request
from controller.quotas import reclaim
from controller.quotas.feed import feed
from controller.quotas.metrics import QuotaMetrics
from controller.quotas.settings import QuotaSettings
from controller.quotas.status import (
    REASON_MALFORMED,
    QuotaFigures,
    annotations_patch,
    status_patch,
    valid_condition,
)
from controller.runtime import Controller, ControllerOptions, Malformed, Manager, PermanentError, Result, tolerant
from controller.runtime.ratelimit import TokenBucket
from controller.runtime.written import WrittenVersions
from kube import errors
from kube.cache import Store
from kube.events import ObjectReference
from kube.resources import NODES, PODS, Patch
from kube.status import StatusAwareAPI

__all__ = ["NAME", "QuotaReconciler", "add_to_manager"]

log = logging.getLogger(__name__)

NAME: Final = "elasticquota"
REASON_INVALID_QUOTA: Final = "InvalidElasticQuota"
REASON_RECLAIMED: Final = "QuotaReclaimed"
REASON_POD_RECLAIMED: Final = "ReclaimedByQuota"
#: How soon a quota still over its runtime is looked at again when no pod can be evicted now.
_RETRY: Final = 5.0


class QuotaWriter(Protocol):
    def patch(self, name: str, patch: Patch, *, namespace: str = "", subresource: str = "") -> Any: ...


class EventSink(Protocol):
    """`kube.EventRecorder` (a list in unit tests)."""

    def normal(self, ref: ObjectReference, reason: str, message: str) -> None: ...

    def warning(self, ref: ObjectReference, reason: str, message: str) -> None: ...


class Evictor(Protocol):
    def post(self, name: str, subresource: str, body: dict[str, Any], *, namespace: str = "") -> Any: ...


class QuotaReconciler:
    name = NAME

    def __init__(
        self,
        quotas: Store[ElasticQuota | Malformed],
        pods: Store[Pod],
        manager: QuotaManager,
        *,
        api: QuotaWriter,
        evictor: Evictor,
        recorder: EventSink,
        metrics: QuotaMetrics,
        settings: QuotaSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], str] = now_rfc3339,
    ) -> None:
        self._quotas = quotas
        self._pods = pods
        self._manager = manager
        self._api = api
        self._evictor = evictor
        self._recorder = recorder
        self._metrics = metrics
        self._settings = settings = settings or QuotaSettings()
        self._clock = clock
        self._now = now
        self._timer = reclaim.OveruseTimer(settings.reclaim_grace)
        self._bucket = TokenBucket(settings.eviction_qps, settings.eviction_burst, clock=clock)
        self._lock = threading.Lock()
        self._written = WrittenVersions()
        #: key -> the problem last announced by an Event.
        self._announced: dict[str, str] = {}
        #: pod key -> (uid, quota) of pods we evicted that the cache still shows as running.
        self._evicted: dict[str, tuple[str, str]] = {}

    def reference(self, key: str) -> ObjectReference | None:
        quota = self._quotas.get(key)
        return ObjectReference.of(quota) if isinstance(quota, ElasticQuota) else None

    # --- the reconcile ----------------------------------------------------------------------------
    def reconcile(self, key: str) -> Result:
        quota = self._quotas.get(key)
        if quota is None:
            self._forget(key)
            return Result()
        if isinstance(quota, Malformed):
            self._malformed(key, quota)
        name = quota.meta.name
        problems = self._manager.problems().get(name, [])
        figures = QuotaFigures.of(self._manager, name, quota.min, self._manager.descendants(name))
        if not self._written.behind(key, quota.meta.resource_version):  # else our write's event queues it
            self._write_status(key, quota, figures, problems)
        self._announce(key, quota, problems)
        self._metrics.set(
            name,
            quota.meta.namespace,
            {
                "runtime": figures.runtime,
                "used": figures.used,
                "request": figures.request,
                "min": quota.min,
                "max": quota.max,
            },
        )
        # Parents hold no pods: their children reclaim. (The spec's label, not a copy of every spec.)
        is_parent = quota.meta.labels.get(names.LABEL_QUOTA_IS_PARENT) == "true"
        if not self._settings.reclaim or problems or is_parent:
            self._timer.forget(name)
            return Result()
        return self._reclaim(quota, figures.runtime)

    def _malformed(self, key: str, quota: Malformed) -> NoReturn:
        """Condition `Valid=False` (once per error), then a PermanentError: the runtime makes it
        a Warning Event once and does not retry until the object changes."""
        message = str(quota.error)
        ref = quota.reference
        with self._lock:
            first = self._announced.get(key) != message
            self._announced[key] = message
        if first:
            wanted = valid_condition([message], reason=REASON_MALFORMED)
            patch = status_patch({}, wanted, current_used={}, current_conditions=(), now=self._now())
            assert patch is not None  # no Valid condition is known: it changes
            try:
                self._api.patch(ref.name, patch, namespace=ref.namespace, subresource="status")
                self._metrics.status_writes.inc()
            except errors.NotFound:
                pass
        raise PermanentError(
            f"the controller cannot read this ElasticQuota: {message}", reason=REASON_INVALID_QUOTA, about=(ref,)
        )

    def _write_status(self, key: str, quota: ElasticQuota, figures: QuotaFigures, problems: list[str]) -> None:
        meta = quota.meta
        written: dict[str, Any] | None = None
        try:
            annotations = annotations_patch(quota, figures)
            if annotations is not None:
                written = self._api.patch(meta.name, annotations, namespace=meta.namespace)
                self._metrics.annotation_writes.inc()
            status = status_patch(
                figures.used,
                valid_condition(problems),
                current_used=quota.used,
                current_conditions=quota.conditions,
                now=self._now(),
            )
            if status is not None:
                written = self._api.patch(meta.name, status, namespace=meta.namespace, subresource="status")
                self._metrics.status_writes.inc()
        except errors.NotFound:
            return  # deleted meanwhile: its delete event forgets it
        if written is not None:
            self._written.record(key, written)
            log.info("Quota status written", extra={"quota": key, "used": resources.format_list(figures.used)})

    def _announce(self, key: str, quota: ElasticQuota, problems: list[str]) -> None:
        message = "; ".join(problems)
        with self._lock:
            if self._announced.get(key, "") == message:
                return
            self._announced[key] = message
        if message:
            self._recorder.warning(ObjectReference.of(quota), REASON_INVALID_QUOTA, message)
            log.warning("Invalid quota", extra={"quota": key, "problems": message})

    def _forget(self, key: str) -> None:
        namespace, _, name = key.rpartition("/")
        self._written.forget(key)
        with self._lock:
            self._announced.pop(key, None)
        self._timer.forget(name)
        self._metrics.forget(name, namespace)

    # --- reclaim ----------------------------------------------------------------------------------
    def _reclaim(self, quota: ElasticQuota, runtime: Mapping[str, int]) -> Result:
        name = quota.meta.name
        used = self._manager.used(name)
        if not reclaim.over(used, runtime):
            self._timer.observe(name, False, self._clock())
            return Result()  # the common case: no pass over the pods
        candidates, leaving = self._candidates(name)
        used = resources.sub(used, leaving)  # pods on their way out give back
        left = self._timer.observe(name, bool(reclaim.over(used, runtime)), self._clock())
        if left is None:
            return Result()
        if left > 0:
            return Result(requeue_after=left)
        chosen = reclaim.plan(used, runtime, candidates)
        if chosen.still_over and not chosen.victims:
            log.info(
                "Quota over its runtime; nothing it holds can be evicted",
                extra={"quota": quota.meta.key, "over": resources.format_list(chosen.still_over)},
            )
            return Result(requeue_after=_RETRY)
        for victim in chosen.victims:
            wait = self._bucket.take()
            if wait > 0:
                return Result(requeue_after=wait)
            if not self._evict(quota, victim, used, runtime):
                return Result(requeue_after=_RETRY)
        return Result(requeue_after=_RETRY) if chosen.still_over else Result()

    def _candidates(self, name: str) -> tuple[list[reclaim.Candidate], dict[str, int]]:
        """The quota's bound pods that could go, and what its pods already leaving still use."""
        candidates: list[reclaim.Candidate] = []
        leaving: dict[str, int] = {}
        with self._lock:
            evicted = dict(self._evicted)
        for pod in self._pods.list():
            if not pod.node_name or pod.is_terminal or self._manager.quota_of(pod) != name:
                continue
            request = quota_request(pod.requests())
            if pod.is_deleting or evicted.get(pod.key, ("", ""))[0] == pod.uid:
                leaving = resources.add(leaving, request)
                continue
            candidates.append(
                reclaim.Candidate(
                    pod.key, pod.priority, pod.meta.creation_timestamp, request, quota_labels.is_preemptible(pod)
                )
            )
        with self._lock:  # forget evictions the cache has caught up with
            for key, (uid, _quota) in evicted.items():
                current = self._pods.get(key)
                if current is None or current.uid != uid or current.is_deleting:
                    self._evicted.pop(key, None)
        return candidates, leaving

    def _evict(
        self, quota: ElasticQuota, victim: reclaim.Candidate, used: Mapping[str, int], runtime: Mapping[str, int]
    ) -> bool:
        """Evict one pod; False when the API refuses for now (a PodDisruptionBudget)."""
        pod = self._pods.get(victim.key)
        if pod is None:
            return True
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod.name, "namespace": pod.namespace},
            "deleteOptions": {"preconditions": {"uid": pod.uid}},
        }
        try:
            self._evictor.post(pod.name, "eviction", body, namespace=pod.namespace)
        except (errors.NotFound, errors.Conflict):
            return True  # gone already, or a new pod of the same name: nothing to reclaim here
        except errors.TooManyRequests as e:
            log.info("Eviction refused for now", extra={"pod": pod.key, "quota": quota.meta.key, "error": str(e)})
            return False
        with self._lock:
            self._evicted[pod.key] = (pod.uid, quota.meta.name)
        self._metrics.evicted(quota.meta.name, quota.meta.namespace)
        since = self._timer.since(quota.meta.name)
        held = f"{self._clock() - since:.0f}s" if since is not None else "past the grace period"
        why = (
            f"quota {quota.meta.key} used {_show(used, runtime)} above its runtime {_show(runtime, runtime)} "
            f"for {held} (grace {self._settings.reclaim_grace:g}s): its borrowed resources are needed back "
            "by other quotas"
        )
        asks = _show(victim.request, runtime)
        what = f"evicted pod {pod.key} (priority {pod.priority}, {asks}): {why}"
        self._recorder.normal(ObjectReference.of(quota), REASON_RECLAIMED, what)
        self._recorder.normal(ObjectReference.of(pod), REASON_POD_RECLAIMED, f"evicted: {why}")
        fields = {"pod": pod.key, "quota": quota.meta.key, "priority": pod.priority}
        log.info("Pod evicted to reclaim quota", extra=fields)
        return True


def _show(amounts: Mapping[str, int], runtime: Mapping[str, int]) -> str:
    """The amounts of the quota's resources, as Kubernetes quantities (`{gpu-core: 200}`)."""
    shown = resources.format_list({r: amounts.get(r, 0) for r in sorted(runtime) if amounts.get(r, 0) or r in amounts})
    return "{" + ", ".join(f"{r}: {q}" for r, q in shown.items()) + "}"


def add_to_manager(manager: Manager, settings: QuotaSettings) -> Controller:
    """Wire the reconciler: ElasticQuotas, every pod and the nodes feed a QuotaManager, and any
    change of them queues every quota."""
    quotas = manager.informers.informer(
        names.ELASTIC_QUOTAS, parse=tolerant(ElasticQuota.from_dict, names.ELASTIC_QUOTAS)
    )
    pods = manager.informers.informer(PODS, parse=Pod.from_dict)
    nodes = manager.informers.informer(NODES, parse=Node.from_dict)
    quota_manager = QuotaManager()
    feed(quota_manager, quotas, pods, nodes)  # before the watches below: see controller.quotas.feed
    reconciler = QuotaReconciler(
        quotas.store,
        pods.store,
        quota_manager,
        # Koordinator's ElasticQuota CRD has no status subresource (ours neither).
        api=StatusAwareAPI(manager.client.resource(names.ELASTIC_QUOTAS)),
        evictor=manager.client.resource(PODS),
        recorder=manager.events,
        metrics=QuotaMetrics(manager.metrics.registry),
        settings=settings,
    )
    controller = manager.add(reconciler, ControllerOptions(workers=1))

    def every_quota(_obj: object) -> list[str]:
        return quotas.store.keys()

    controller.watch(quotas, keys=every_quota)
    controller.watch(pods, keys=every_quota, changed=_pod_changed)
    controller.watch(nodes, keys=every_quota, changed=lambda old, new: old.allocatable != new.allocatable)
    return controller


def _pod_changed(old: Pod, new: Pod) -> bool:
    """Pod updates that can move a quota's figures: binding, ending, leaving, relabelling."""

    def seen(pod: Pod) -> tuple[object, ...]:
        return (pod.node_name, pod.is_terminal, pod.is_deleting, pod.labels, pod.requests())

    return seen(old) != seen(new)
