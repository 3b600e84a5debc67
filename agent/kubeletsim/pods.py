"""The Pod half of the simulated kubelet: pods bound to the node become Running; deleted ones go.

kubelet starts the containers of every pod bound to its node and reports them in the pod's
status; when a pod is deleted it stops them and removes the pod (a delete with grace period 0).
`PodLifecycle` reports the same without running anything: phase Running, the Initialized /
PodReadyToStartContainers / ContainersReady / Ready conditions, a pod IP, and for each container
a running state with a made-up id (`containerd://<64 hex>`, stable per pod and container, so
tools that parse container ids keep working). Init containers are reported as completed. A pod
whose containers would exit (a Job's; `completion.py`) is reported Succeeded or Failed when its
time is up, or restarted in place as its restartPolicy says. A running pod whose Ready condition
the node lifecycle controller set False while the node was away is reported Ready again.

With a DRA manager (`claims.py`), a pod's ResourceClaims are prepared before it is reported
Running — a failure keeps it Pending, its containers `ContainerCreating`, with kubelet's Warning
Event `FailedPrepareDynamicResources`, and is tried again with backoff — and unprepared when it
ends: before a deleted pod is removed, when its containers exited for good, and for pods that are
gone (deleted while the agent was down) once the informer has synced and after each delete.

It is fed by the agent's informer of this node's pods: handlers queue pod keys, one worker thread
writes. A write the API server refuses or cannot take is retried with backoff; the informer's
cache decides what still needs doing, so nothing is done twice and nothing is lost.
"""

from __future__ import annotations

import hashlib
import heapq
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from agent.kubeletsim import completion
from agent.kubeletsim.claims import DRAManager, PrepareFailed
from apis.k8s.core import Pod
from apis.k8s.meta import now_rfc3339
from kube import errors
from kube.backoff import Backoff
from kube.client import Client
from kube.events import EventRecorder, ObjectReference
from kube.informer import Informer
from kube.logs import V
from kube.resources import MERGE_PATCH, PODS, STRATEGIC_MERGE_PATCH

__all__ = ["FAILED_PREPARE", "PodLifecycle", "fake_container_id", "running_status", "waiting_status"]

log = logging.getLogger(__name__)

_BACKOFF: Final = Backoff(initial=0.5, maximum=10.0)
_RUNNING_CONDITIONS: Final = ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")
_READY_CONDITIONS: Final = ("ContainersReady", "Ready")
_TERMINAL: Final = ("Succeeded", "Failed")
#: kubelet's Event reason when a pod's claims cannot be prepared (pkg/kubelet/events).
FAILED_PREPARE: Final = "FailedPrepareDynamicResources"
#: A queue key that is no pod's: unprepare the claims of pods that are gone.
_RECONCILE: Final = ""


def _marked_not_ready(pod: Pod) -> bool:
    """A running pod whose Ready condition someone else set False (its containers still run)."""
    return pod.phase == "Running" and any(c.type == "Ready" and c.status == "False" for c in pod.conditions)


def fake_container_id(pod_uid: str, container: str) -> str:
    """`containerd://<64 hex>`, the same for the same pod and container."""
    return "containerd://" + hashlib.sha256(f"{pod_uid}/{container}".encode()).hexdigest()


def running_status(pod: Mapping[str, Any], *, host_ip: str, pod_ip: str, now: str) -> dict[str, Any]:
    """The `status` patch that reports `pod` (a raw Pod) Running on a node at `host_ip`.

    Host-network pods get the node's IP; others `pod_ip`.
    """
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    uid = str(meta.get("uid", ""))
    ip = host_ip if spec.get("hostNetwork") else pod_ip

    def status_of(container: Mapping[str, Any], state: dict[str, Any], *, ready: bool) -> dict[str, Any]:
        name = str(container.get("name", ""))
        image = str(container.get("image", ""))
        return {
            "name": name,
            "image": image,
            "imageID": f"{image}@sha256:{hashlib.sha256(image.encode()).hexdigest()}" if image else "",
            "containerID": fake_container_id(uid, name),
            "ready": ready,
            "started": ready,
            "restartCount": 0,
            "state": state,
        }

    running = {"running": {"startedAt": now}}
    completed = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}}
    status: dict[str, Any] = {
        "phase": "Running",
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": now,
        "conditions": [
            {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
            for kind in _RUNNING_CONDITIONS
        ],
        "containerStatuses": [status_of(c, running, ready=True) for c in spec.get("containers") or ()],
    }
    if spec.get("initContainers"):
        status["initContainerStatuses"] = [
            status_of(c, completed, ready=False) for c in spec.get("initContainers") or ()
        ]
    return {"status": status}


def waiting_status(pod: Mapping[str, Any], *, host_ip: str, now: str) -> dict[str, Any]:
    """The `status` patch kubelet writes for a pod it cannot start yet (its sync failed before the
    sandbox, as when its claims cannot be prepared): Pending, every container waiting in
    `ContainerCreating`, not ready."""
    spec = pod.get("spec") or {}
    names = [str(c.get("name", "")) for c in spec.get("containers") or ()]
    unready = f"containers with unready status: [{' '.join(names)}]"

    def condition(kind: str, status: str, reason: str = "", message: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": now}
        if reason:
            out.update(reason=reason, message=message)
        return out

    return {
        "status": {
            "phase": "Pending",
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "startTime": now,
            "conditions": [
                condition("PodReadyToStartContainers", "False"),
                condition("Initialized", "True"),
                condition("Ready", "False", "ContainersNotReady", unready),
                condition("ContainersReady", "False", "ContainersNotReady", unready),
            ],
            "containerStatuses": [
                {
                    "name": str(c.get("name", "")),
                    "image": str(c.get("image", "")),
                    "imageID": "",
                    "ready": False,
                    "started": False,
                    "restartCount": 0,
                    "state": {"waiting": {"reason": "ContainerCreating"}},
                }
                for c in spec.get("containers") or ()
            ],
        }
    }


class PodLifecycle:
    """Acts on this node's pods as kubelet would; see the module docstring.

    `start()` registers handlers on `informer` (a watch of the pods bound to `node_name`) and
    starts the worker; `stop()` ends it. `pod_ip(pod_uid)` gives a pod its made-up address.
    """

    def __init__(
        self,
        client: Client,
        informer: Informer[Pod],
        *,
        node_name: str,
        host_ip: str,
        pod_ip: Callable[[str], str],
        backoff: Backoff = _BACKOFF,
        dra: DRAManager | None = None,
        events: EventRecorder | None = None,
    ) -> None:
        """`dra`: prepare pods' ResourceClaims (none: a pod with claims runs unprepared);
        `events`: where `FailedPrepareDynamicResources` goes (kubelet's recorder)."""
        self.node_name = node_name
        self.dra = dra
        self._events = events
        self._prepare_delays: dict[str, Iterator[float]] = {}  # pod key -> its retries' backoff
        self._pods = client.resource(PODS)
        self.informer = informer
        self._host_ip = host_ip
        self._pod_ip = pod_ip
        self._backoff = backoff
        self._queue: deque[str] = deque()
        self._queued: set[str] = set()
        self._due: list[tuple[float, str]] = []  # (monotonic time, pod key): containers exit then
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("pod lifecycle already started")
        self.informer.add_handlers(
            on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new), on_delete=self._deleted
        )
        if self.dra is not None:
            self._enqueue_key(_RECONCILE)  # the claims of pods deleted while the agent was down
        self._thread = threading.Thread(target=self._run, name="simulated-kubelet-pods", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout_s)

    # --- queue -------------------------------------------------------------------------------------
    def _needs_action(self, pod: Pod) -> bool:
        if pod.node_name != self.node_name:
            return False
        exits = pod.phase == "Running" and completion.run_seconds(pod) is not None
        ended = pod.phase in _TERMINAL and self.dra is not None and self.dra.holds(pod.uid)
        return pod.is_deleting or pod.phase == "Pending" or exits or ended or _marked_not_ready(pod)

    def _enqueue(self, pod: Pod) -> None:
        if self._needs_action(pod):
            self._enqueue_key(pod.key)

    def _deleted(self, pod: Pod) -> None:
        self._prepare_delays.pop(pod.key, None)
        if self.dra is not None and self.dra.holds(pod.uid):
            self._enqueue_key(_RECONCILE)  # removed before its claims were unprepared

    def _enqueue_key(self, key: str) -> None:
        with self._cond:
            if key not in self._queued:
                self._queued.add(key)
                self._queue.append(key)
                self._cond.notify()

    def _retry_later(self, key: str) -> float:
        """Queue `key` again after its next backoff delay; the delay."""
        delay = next(self._prepare_delays.setdefault(key, self._backoff.delays()))
        with self._cond:
            heapq.heappush(self._due, (time.monotonic() + delay, key))
            self._cond.notify()
        return delay

    def _next(self) -> str | None:
        with self._cond:
            while not self._queue and not self._stopping:
                now = time.monotonic()
                while self._due and self._due[0][0] <= now:
                    _, due_key = heapq.heappop(self._due)
                    if due_key not in self._queued:
                        self._queued.add(due_key)
                        self._queue.append(due_key)
                if not self._queue:
                    self._cond.wait(timeout=self._due[0][0] - now if self._due else None)
            if self._stopping:
                return None
            key = self._queue.popleft()
            self._queued.discard(key)
            return key

    def _run(self) -> None:
        delays: Iterator[float] | None = None
        while (key := self._next()) is not None:
            try:
                self.handle(key)
                delays = None
            except errors.APIError as e:
                delays = delays or self._backoff.delays()
                delay = next(delays)
                log.warning("Pod status write failed; retrying", extra={"pod": key, "error": str(e), "retryIn": delay})
                with self._cond:
                    self._cond.wait_for(lambda: self._stopping, timeout=delay)
                pod = self.informer.store.get(key)
                if pod is not None:
                    self._enqueue(pod)
            except PrepareFailed as e:  # kubelet retries the pod's sync; the claims' state is kept
                delay = self._retry_later(key)
                log.warning(
                    "Cannot (un)prepare a pod's ResourceClaims; retrying",
                    extra={"pod": key or "(gone pods)", "err": str(e), "retryIn": delay},
                )
            except Exception:  # the loop boundary: one pod's bug must not stop the others
                log.exception("Pod handling failed", extra={"pod": key})

    def _exit_when_due(self, key: str, raw: dict[str, Any], pod: Pod) -> None:
        """The containers of a running pod exit once its run time is up (`completion.py`)."""
        seconds = completion.run_seconds(pod)
        started = completion.started_at(raw)
        if seconds is None or started is None:
            return
        left = started + seconds - time.time()
        if left > 0:
            with self._cond:
                heapq.heappush(self._due, (time.monotonic() + left, key))
                self._cond.notify()
            return
        patch = completion.exit_status(raw, pod, now=now_rfc3339())
        self._pods.patch(pod.name, patch, namespace=pod.namespace, patch_type=MERGE_PATCH, subresource="status")
        log.log(
            V(2),
            "Pod containers exited (SIMULATED kubelet)",
            extra={"pod": key, "node": self.node_name, "phase": patch["status"].get("phase", "Running")},
        )

    def _report_ready(self, key: str, pod: Pod) -> None:
        """Ready again: the node lifecycle controller set it False while this node was away."""
        now = now_rfc3339()
        conditions = [{"type": kind, "status": "True", "lastTransitionTime": now} for kind in _READY_CONDITIONS]
        self._pods.patch(
            pod.name,
            {"status": {"conditions": conditions}},
            namespace=pod.namespace,
            patch_type=STRATEGIC_MERGE_PATCH,
            subresource="status",
        )
        log.log(V(2), "Pod Ready again (SIMULATED kubelet)", extra={"pod": key, "node": self.node_name})

    # --- one pod -----------------------------------------------------------------------------------
    def handle(self, key: str) -> None:
        """Do what the pod `key` (namespace/name) needs now, if anything. Raises APIError."""
        if key == _RECONCILE:
            self._reconcile()
            return
        pod = self.informer.store.get(key)
        if pod is None or not self._needs_action(pod):
            return
        if self.dra is not None and (pod.is_deleting or pod.phase in _TERMINAL) and self.dra.holds(pod.uid):
            self.dra.unprepare(pod.uid)  # before the pod goes: its devices are free only then
        if pod.is_deleting:
            try:
                self._pods.delete(pod.name, namespace=pod.namespace, uid=pod.uid, grace_period_seconds=0)
            except errors.NotFound:
                return
            log.log(V(2), "Removed deleted pod (SIMULATED kubelet)", extra={"pod": key, "node": self.node_name})
            return
        raw = self._pods.get(pod.name, namespace=pod.namespace)  # the images and init containers
        if (raw.get("metadata") or {}).get("uid") != pod.uid:
            return
        phase = (raw.get("status") or {}).get("phase")
        if phase == "Running":
            if _marked_not_ready(pod):
                self._report_ready(key, pod)
            self._exit_when_due(key, raw, pod)
            return
        if phase != "Pending":
            return
        if self.dra is not None and pod.resource_claims and not self._prepared(key, pod, raw):
            return
        patch = running_status(raw, host_ip=self._host_ip, pod_ip=self._pod_ip(pod.uid), now=now_rfc3339())
        self._pods.patch(
            pod.name, patch, namespace=pod.namespace, patch_type=STRATEGIC_MERGE_PATCH, subresource="status"
        )
        log.log(
            V(2),
            "Pod Running (SIMULATED kubelet: no container was started)",
            extra={"pod": key, "node": self.node_name},
        )

    def _prepared(self, key: str, pod: Pod, raw: Mapping[str, Any]) -> bool:
        """Prepare the pod's claims; on failure report it as kubelet does and retry later."""
        assert self.dra is not None
        try:
            self.dra.prepare(pod)
        except PrepareFailed as e:
            message = f"Failed to prepare dynamic resources: {e}"
            if self._events is not None:
                self._events.warning(ObjectReference.of(pod), FAILED_PREPARE, message)
            first = key not in self._prepare_delays
            delay = self._retry_later(key)
            log.warning(
                "Failed to prepare dynamic resources (SIMULATED kubelet)",
                extra={"pod": key, "err": str(e), "retryIn": delay},
            )
            if first:
                patch = waiting_status(raw, host_ip=self._host_ip, now=now_rfc3339())
                self._pods.patch(
                    pod.name, patch, namespace=pod.namespace, patch_type=STRATEGIC_MERGE_PATCH, subresource="status"
                )
            return False
        self._prepare_delays.pop(key, None)
        return True

    def _reconcile(self) -> None:
        """Unprepare the claims of pods no longer bound here, once the informer knows them all."""
        assert self.dra is not None
        if not self.informer.has_synced:
            self._retry_later(_RECONCILE)
            return
        self.dra.reconcile(p.uid for p in self.informer.store.list())
        self._prepare_delays.pop(_RECONCILE, None)
