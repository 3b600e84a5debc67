"""The quota reconciler: each ElasticQuota's status and annotations, and reclaim.

Key: `namespace/name` of an ElasticQuota. A quota, pod or node change can move many quotas'
runtimes (idle resources are shared by weight), but rarely all: after each change the watches
queue only the quotas whose request, used or runtime the shared `QuotaManager` says may have
moved (`observe`, from `QuotaManager.drain_changes`), as the scheduler's runtime recomputes only
the partitions a change reaches. The work queue merges keys, and a reconcile that finds nothing
different writes nothing. `observe` also steps reclaim's circuit breaker (`breaker`) with the
tree's figures after every change.

A reconcile
1. writes the annotations (`runtime`, `request`, `allocated`, `guaranteed`,
   `non-preemptible-used`) and `status` (`used`, the `Valid` condition, and `ReclaimPaused` once
   the breaker has opened) that differ from the cache, and writes nothing while the cache is
   older than its own last write (no second, identical write: the event of that write queues the
   key again);
2. says once, with a Warning Event, why a quota is invalid (a broken rule, a bad annotation, or
   an object that does not parse: condition `Valid=False`), and never stops for it;
3. reclaims: a leaf quota whose used stays above its runtime past the grace period loses its
   pods as `reclaim.plan` picks them, through the Eviction API, at most as fast as the token
   bucket allows, with an Event on the quota and on each pod — only while every informer has
   settled (no list half delivered: never on runtimes from a cache that is not one state of the
   cluster) and the breaker is closed; while either is not so the grace periods start again.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, NoReturn, Protocol

from apis.crds.elasticquota import ElasticQuota
from apis.errors import AnnotationError
from apis.extension import names
from apis.extension import quota as quota_labels
from apis.k8s import resources
from apis.k8s.core import Node, Pod
from apis.k8s.meta import now_rfc3339
from apis.quota import ROOT_QUOTA_NAME
from controller.quotas import reclaim
from controller.quotas.breaker import REASON_OPERATOR, REASON_STABLE, Breaker, Exposure, Figures, Trip
from controller.quotas.feed import feed
from controller.quotas.metrics import QuotaMetrics
from controller.quotas.settings import QuotaSettings
from controller.quotas.status import (
    CONDITION_RECLAIM_PAUSED,
    REASON_MALFORMED,
    REASON_RECLAIM_ALLOWED,
    QuotaFigures,
    annotations_patch,
    reclaim_condition,
    status_patch,
    valid_condition,
)
from controller.runtime import Controller, ControllerOptions, Malformed, Manager, PermanentError, Result, tolerant
from controller.runtime.ratelimit import TokenBucket
from controller.runtime.written import WrittenVersions
from kube import errors
from kube.cache import Store
from kube.events import ObjectReference
from kube.eviction import Evictor, evict
from kube.quotas import QuotaManager
from kube.resources import NODES, PODS, Patch
from kube.status import StatusAwareAPI

__all__ = ["NAME", "QuotaReconciler", "add_to_manager"]

log = logging.getLogger(__name__)

NAME: Final = "elasticquota"
REASON_INVALID_QUOTA: Final = "InvalidElasticQuota"
REASON_RECLAIMED: Final = "QuotaReclaimed"
REASON_POD_RECLAIMED: Final = "ReclaimedByQuota"
#: Warning Event on the quotas over their runtime when the breaker opens; Normal when it closes.
REASON_RECLAIM_PAUSED: Final = "QuotaReclaimPaused"
REASON_RECLAIM_RESUMED: Final = "QuotaReclaimResumed"
#: How soon a quota still over its runtime is looked at again when no pod can be evicted now.
_RETRY: Final = 5.0
#: At most this many quotas get an Event when the breaker opens or closes (the log names them all).
_EVENTS_PER_SWITCH: Final = 20


class QuotaWriter(Protocol):
    def patch(self, name: str, patch: Patch, *, namespace: str = "", subresource: str = "") -> Any: ...


class EventSink(Protocol):
    """`kube.EventRecorder` (a list in unit tests)."""

    def normal(self, ref: ObjectReference, reason: str, message: str) -> None: ...

    def warning(self, ref: ObjectReference, reason: str, message: str) -> None: ...


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
        synced: Callable[[], bool] = lambda: True,
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
        #: Whether every informer has settled (see the module docstring).
        self._synced = synced
        #: Queue keys of this controller (`Controller.enqueue`, set when wired).
        self.enqueue: Callable[..., None] = lambda *keys: None
        # The breaker and what it is fed, under `_step_lock` (informer threads and workers).
        self._step_lock = threading.RLock()
        self._breaker = Breaker(settings.breaker, clock=clock, now=now)
        self._exposure = Exposure()
        self._stepped = False
        #: quota name -> cache key, and the cache's size when it was built.
        self._keys: dict[str, str] = {}
        self._indexed = -1
        #: While the breaker is open, the quota whose reconcile looks again whether it may close.
        self._watch_key: str | None = None

    def reference(self, key: str) -> ObjectReference | None:
        quota = self._quotas.get(key)
        return ObjectReference.of(quota) if isinstance(quota, ElasticQuota) else None

    # --- the reconcile ----------------------------------------------------------------------------
    def reconcile(self, key: str) -> Result:
        self.enqueue(*self.observe())
        quota = self._quotas.get(key)
        if quota is None:
            self._forget(key)
            return Result()
        if isinstance(quota, Malformed):
            self._malformed(key, quota)
        self._operator_resume(quota)
        allowed = self._allows()
        name = quota.meta.name
        problems = self._manager.problems().get(name, [])
        spec = self._manager.spec(name)
        figures = QuotaFigures.of(self._manager, name, spec.min if spec is not None else {})
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
                "min": spec.min if spec is not None else quota.min,
                "max": spec.max if spec is not None else quota.max,
            },
        )
        # Parents hold no pods: their children reclaim. (The spec's label, not a copy of every spec.)
        is_parent = quota.meta.labels.get(names.LABEL_QUOTA_IS_PARENT) == "true"
        if not self._settings.reclaim or problems or is_parent:
            self._timer.forget(name)
            return self._look_again(key)
        if not allowed or not self._synced():
            # Nothing is evicted on figures the breaker distrusts or from a cache half relisted;
            # a quota still over once that has passed serves a whole grace period again.
            self._timer.forget(name)
            if reclaim.over(self._manager.used(name), figures.runtime):
                return Result(requeue_after=self._breaker_wait())
            return self._look_again(key)
        return self._reclaim(quota, figures.runtime)

    # --- what changed, and the breaker --------------------------------------------------------------
    def observe(self) -> list[str]:
        """Bring the breaker up to date with what the manager has seen since the last call, and
        say which quotas to reconcile: those whose figures may have moved (every quota when the
        breaker just opened, so each shows it). Called by the watches after every event (the
        manager has seen it first) and at the start of every reconcile."""
        with self._step_lock:
            changed = self._manager.drain_changes()
            if not changed:
                return []
            for name in changed:
                leaf = self._manager.is_leaf(name)
                self._exposure.set(name, self._excess(name) if leaf else None)
            if self._synced():
                figures = self._figures()
                self._metrics.tree(figures.root, figures.excess)
                # Without reclaim there is nothing to pause.
                if self._settings.reclaim and self._opens(figures):
                    return self._quotas.keys()
            return [key for name in changed if (key := self._key_of(name)) is not None]

    def _opens(self, figures: Figures) -> bool:
        """Step the breaker; whether this step opened it (under `_step_lock`)."""
        if not self._stepped:
            self._stepped = True
            self._first_step(figures)
        trip = self._breaker.step(figures)
        if trip is None:
            return False
        self._opened(trip)
        return True

    def _excess(self, name: str) -> dict[str, int]:
        return reclaim.over(self._manager.used(name), self._manager.runtime(name))

    def _figures(self) -> Figures:
        """The root's total (in the resources quotas limit) and the leaf quotas' excess now."""
        limited = self._manager.limited_resources()
        root = {r: v for r, v in self._manager.runtime(ROOT_QUOTA_NAME).items() if r in limited}
        return Figures(root=root, excess=self._exposure.total)

    def _first_step(self, figures: Figures) -> None:
        """The breaker's first figures after the caches synced: a controller before this one may
        have left reclaim paused (the quotas' condition says so, and why), and the runtimes it
        wrote are the step before this one — so figures that jumped while no controller ran
        trip the breaker too."""
        before: dict[str, int] = {}
        for quota in self._quotas.list():
            if not isinstance(quota, ElasticQuota):
                continue
            for c in quota.conditions:
                if c.type == CONDITION_RECLAIM_PAUSED and c.status == "True" and not self._breaker.is_open:
                    self._breaker.restore(c.reason, c.message, c.last_transition_time)
                    self._metrics.pauses.labels("Restored").inc()
                    self._metrics.paused.set(1)
                    self._watch_key = quota.meta.key
                    log.warning("Quota reclaim stays paused", extra={"reason": c.reason, "why": c.message})
            name = quota.meta.name
            if not self._manager.is_leaf(name):
                continue
            excess = self._exposure.of(name)  # without a runtime written: as it is now
            written = quota.meta.annotations.get(names.ANNOTATION_QUOTA_RUNTIME)
            if written:
                with contextlib.suppress(AnnotationError):
                    runtime = quota_labels.decode_resource_annotation(names.ANNOTATION_QUOTA_RUNTIME, written)
                    excess = reclaim.over(self._manager.used(name), runtime)
            before = resources.add(before, excess)
        self._breaker.step(Figures(root=figures.root, excess=before))

    def _opened(self, trip: Trip) -> None:
        over = self._exposure.over()
        log.warning(
            "Quota reclaim paused",
            extra={"reason": trip.reason, "why": trip.message, "quotas_over_runtime": ",".join(over)},
        )
        self._metrics.pauses.labels(trip.reason).inc()
        self._metrics.paused.set(1)
        stable = self._settings.breaker.stable
        message = (
            f"quota reclaim paused ({trip.reason}): {trip.message}. No pod is evicted until no such jump has "
            f"been seen for {stable:g}s (and a collapsed root total is back), or an operator resumes it "
            "(tessera quota --resume-reclaim)"
        )
        self._announce_switch(over, "warning", REASON_RECLAIM_PAUSED, message)
        keys = self._quotas.keys()
        self._watch_key = min(keys) if keys else None

    def _allows(self) -> bool:
        """Whether reclaim may evict now (the breaker may close here, its figures stable)."""
        with self._step_lock:
            was_open = self._breaker.is_open
            allowed = self._breaker.allows()
            if was_open and allowed:
                self._closed(REASON_STABLE, "no jump of the figures for the stable period")
            return allowed

    def _breaker_wait(self) -> float:
        return _RETRY

    def _look_again(self, key: str) -> Result:
        """While the breaker is open one quota's reconcile comes back to see whether it may close."""
        if key == self._watch_key and self._breaker.is_open:
            return Result(requeue_after=self._breaker_wait())
        return Result()

    def _operator_resume(self, quota: ElasticQuota) -> None:
        asked = quota.meta.annotations.get(names.ANNOTATION_QUOTA_RESUME_RECLAIM)
        if not asked:
            return
        with self._step_lock:
            trip = self._breaker.trip
            if trip is None or not _not_before(asked, trip.at):
                return
            self._breaker.resume()
            where = f"{names.ANNOTATION_QUOTA_RESUME_RECLAIM}={asked} on {quota.meta.key}"
            self._closed(REASON_OPERATOR, f"an operator resumed it ({where})")

    def _closed(self, reason: str, why: str) -> None:
        """The breaker closed (under `_step_lock`): say so, and let every grace start again."""
        over = self._exposure.over()
        extra = {"reason": reason, "why": why, "quotas_over_runtime": ",".join(over)}
        log.info("Quota reclaim resumed", extra=extra)
        self._metrics.paused.set(0)
        self._timer.clear()
        self._watch_key = None
        message = (
            f"quota reclaim resumed ({reason}): {why}; a quota over its runtime for a whole grace period from "
            "now on has pods evicted"
        )
        self._announce_switch(over, "normal", REASON_RECLAIM_RESUMED, message)
        self.enqueue(*self._quotas.keys())

    def _announce_switch(self, over: list[str], kind: str, reason: str, message: str) -> None:
        for name in over[:_EVENTS_PER_SWITCH]:
            key = self._key_of(name)
            quota = self._quotas.get(key) if key is not None else None
            if not isinstance(quota, ElasticQuota):
                continue
            if kind == "warning":
                self._recorder.warning(ObjectReference.of(quota), reason, message)
            else:
                self._recorder.normal(ObjectReference.of(quota), reason, message)

    def _key_of(self, name: str) -> str | None:
        """The cache key of the quota named `name` (quota names are cluster-wide)."""
        key = self._keys.get(name)
        if (key is None or key not in self._quotas) and len(self._quotas) != self._indexed:
            cached = self._quotas.keys()
            self._keys = {k.rpartition("/")[2]: k for k in cached}
            self._indexed = len(self._quotas)
            key = self._keys.get(name)
        return key if key is not None and key in self._quotas else None

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
            trip = self._breaker.trip
            paused = (trip.reason, trip.message) if trip is not None else None
            resumed = self._breaker.closed_reason or REASON_RECLAIM_ALLOWED
            status = status_patch(
                figures.used,
                valid_condition(problems),
                current_used=quota.used,
                current_conditions=quota.conditions,
                now=self._now(),
                reclaim=reclaim_condition(paused, quota.conditions, resumed=resumed),
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
            request = self._manager.charge(pod)
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
        try:
            evict(self._evictor, pod.name, namespace=pod.namespace, uid=pod.uid)
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


def _not_before(asked: str, since: str) -> bool:
    """Whether the operator's time `asked` is not before `since` (both RFC 3339); False, with a
    log line, for a time that does not parse."""
    try:
        return _parse_time(asked) >= _parse_time(since)
    except ValueError:
        log.warning(
            "Ignoring an unreadable resume time",
            extra={"annotation": names.ANNOTATION_QUOTA_RESUME_RECLAIM, "value": asked},
        )
        return False


def _parse_time(text: str) -> datetime.datetime:
    parsed = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=datetime.UTC)


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
        synced=lambda: quotas.settled and pods.settled and nodes.settled,
    )
    controller = manager.add(reconciler, ControllerOptions(workers=1))
    reconciler.enqueue = controller.enqueue

    def the_quota_and_changed(quota: ElasticQuota | Malformed) -> list[str]:
        ref = quota.reference if isinstance(quota, Malformed) else ObjectReference.of(quota)
        return [f"{ref.namespace}/{ref.name}", *reconciler.observe()]

    def changed(_obj: object) -> list[str]:
        return reconciler.observe()

    controller.watch(quotas, keys=the_quota_and_changed)
    controller.watch(pods, keys=changed, changed=_pod_changed)
    controller.watch(nodes, keys=changed, changed=lambda old, new: old.allocatable != new.allocatable)
    return controller


def _pod_changed(old: Pod, new: Pod) -> bool:
    """Pod updates that can move a quota's figures: binding, ending, leaving, relabelling."""

    def seen(pod: Pod) -> tuple[object, ...]:
        return (pod.node_name, pod.is_terminal, pod.is_deleting, pod.labels, pod.requests())

    return seen(old) != seen(new)
