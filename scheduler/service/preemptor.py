"""Acting on a preemption, off the scheduling thread: nominate the pod, delete its victims.

When PostFilter decided that evicting some pods makes room for a pending pod (`Preemption`),
the loop nominates the pod in the cache at once (so no pod of lower priority takes the room
meanwhile) and hands the decision over here. Worker threads then do the API calls, in kube's
order: the preemptor's `status.nominatedNodeName`, then each victim deleted, with its UID as a
precondition (a pod re-created under the same name is never hit), and Events — `Preempted` on
each victim saying by whom, why and where, and `Preempting` on the preemptor listing its
victims. As kube-scheduler, victims are deleted, not evicted through the Eviction API: the
PostFilter weighed PodDisruptionBudgets when it chose, and a budget that left no other way is
broken rather than the preemption stalled.

The victims stay in the cache, and in their quota's used, until the informer says they are
gone; the preemptor waits in the queue for that deletion (a Pod delete event). A deletion that
fails is logged and counted; the pod is retried with the next cluster event as any other.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

from apis.k8s.core import Pod
from kube import EventRecorder, ObjectReference, errors
from scheduler.framework.preemption import Preemption
from scheduler.service.metrics import SchedulerMetrics
from scheduler.service.podapi import PodAPI

__all__ = ["REASON_PREEMPTED", "REASON_PREEMPTING", "Preemptor"]

log = logging.getLogger(__name__)

#: kube-scheduler's Event on a victim.
REASON_PREEMPTED = "Preempted"
#: The Event on the pod room is made for.
REASON_PREEMPTING = "Preempting"


class Preemptor:
    def __init__(self, api: PodAPI, *, recorder: EventRecorder, metrics: SchedulerMetrics, workers: int = 2) -> None:
        self._api = api
        self._recorder = recorder
        self._metrics = metrics
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="scheduler-preemptor")

    def submit(self, pod: Pod, preemption: Preemption) -> None:
        """Nominate `pod` and evict the victims in the background."""
        self._executor.submit(self._run, pod, preemption)

    def stop(self) -> None:
        """Drop what has not started; a restarted scheduler decides again from the API."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _run(self, pod: Pod, preemption: Preemption) -> None:
        try:
            self._preempt(pod, preemption)
        except Exception:
            log.exception("Preemption failed unexpectedly", extra={"pod": pod.key, "node": preemption.node})

    def _preempt(self, pod: Pod, preemption: Preemption) -> None:
        node = preemption.node
        try:
            self._api.nominate(pod, node)
        except errors.NotFound:
            log.info("Preemptor deleted before its victims were evicted", extra={"pod": pod.key})
            return
        except errors.APIError as e:
            # The nomination is a hint for people and other schedulers; the cache already holds it.
            log.warning("Cannot write the nominated node", extra={"pod": pod.key, "node": node, "error": str(e)})
        self._recorder.normal(ObjectReference.of(pod), REASON_PREEMPTING, f"Preempting {preemption.describe()}")
        for victim in preemption.victims:
            try:
                self._api.delete(victim.pod)
            except errors.NotFound:
                self._metrics.preempted("gone")
                continue
            except errors.APIError as e:
                self._metrics.preempted("failed")
                log.warning(
                    "Preemption victim not deleted",
                    extra={"pod": victim.key, "preemptor": pod.key, "node": node, "error": str(e)},
                )
                continue
            self._metrics.preempted("evicted")
            message = f"Preempted by {pod.key} on node {node} ({preemption.reason}, priority {pod.priority})"
            self._recorder.normal(ObjectReference.of(victim.pod), REASON_PREEMPTED, message)
            log.info("Deleted preemption victim", extra={"pod": victim.key, "preemptor": pod.key, "node": node})
