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
from apis.k8s.core import Pod
from apis.k8s.meta import now_rfc3339
from kube import errors
from kube.backoff import Backoff
from kube.client import Client
from kube.informer import Informer
from kube.logs import V
from kube.resources import MERGE_PATCH, PODS, STRATEGIC_MERGE_PATCH

__all__ = ["PodLifecycle", "fake_container_id", "running_status"]

log = logging.getLogger(__name__)

_BACKOFF: Final = Backoff(initial=0.5, maximum=10.0)
_RUNNING_CONDITIONS: Final = ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")
_READY_CONDITIONS: Final = ("ContainersReady", "Ready")


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
    ) -> None:
        self.node_name = node_name
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
        self.informer.add_handlers(on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new))
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
        return pod.is_deleting or pod.phase == "Pending" or exits or _marked_not_ready(pod)

    def _enqueue(self, pod: Pod) -> None:
        if not self._needs_action(pod):
            return
        with self._cond:
            if pod.key not in self._queued:
                self._queued.add(pod.key)
                self._queue.append(pod.key)
                self._cond.notify()

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
        pod = self.informer.store.get(key)
        if pod is None or not self._needs_action(pod):
            return
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
        patch = running_status(raw, host_ip=self._host_ip, pod_ip=self._pod_ip(pod.uid), now=now_rfc3339())
        self._pods.patch(
            pod.name, patch, namespace=pod.namespace, patch_type=STRATEGIC_MERGE_PATCH, subresource="status"
        )
        log.log(
            V(2),
            "Pod Running (SIMULATED kubelet: no container was started)",
            extra={"pod": key, "node": self.node_name},
        )
