"""Saying that a device is over-committed, where people look: a Warning Event on the node and the pod.

The scheduler never over-commits a device itself; a pod that bypassed it does — one created with
`spec.nodeName` and a record of devices of its own (an annotation the cache's holdings sources
read), or a record edited by hand.
The cache notices (`ClusterCache.overcommits`) and DeviceShare then treats the device as full;
this module tells people. The informers' handlers call `check` after every change to a node's
pods or Device CR, under the cache lock; each over-commitment (a device and its holders) is
reported once while it lasts:

- a Warning `DeviceOvercommitted` Event on the node, and on the pod whose arrival or edit caused
  it (on every holder when a Device CR change did), naming the device, the pods and the totals;
- a warning log line, and an info line when it ends.

`tessera_scheduler_overcommitted_devices{node}` is read from the cache at scrape time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from apis.crds.device import DeviceType
from apis.k8s.core import Node, Pod
from kube import EventRecorder, ObjectReference
from scheduler.cache import Overcommit

__all__ = ["REASON_DEVICE_OVERCOMMITTED", "OvercommitReporter"]

log = logging.getLogger(__name__)

REASON_DEVICE_OVERCOMMITTED = "DeviceOvercommitted"
_CONSEQUENCE = "the scheduler places nothing more on it until a holder is deleted or its annotation is fixed"

#: A device and its holders (`Overcommit.key`).
_Key = tuple[DeviceType, int, tuple[str, ...]]


class OvercommitReporter:
    """Remembers the over-commitments reported per node. Not thread-safe: call under the cache lock."""

    def __init__(
        self,
        recorder: EventRecorder,
        *,
        pods: Callable[[str], Pod | None],
        nodes: Callable[[str], Node | None],
    ) -> None:
        """`pods` and `nodes` look objects up by key (`namespace/name`, node name) for their UIDs."""
        self._recorder = recorder
        self._pods = pods
        self._nodes = nodes
        self._known: dict[str, frozenset[_Key]] = {}

    def check(self, node: str, overcommits: tuple[Overcommit, ...], *, cause: Pod | None = None) -> None:
        """Report what is new among the node's over-committed devices; forget what ended.

        `cause` is the pod whose change was just applied (None for a Device CR change)."""
        known = self._known.get(node, frozenset())
        if not overcommits and not known:
            return
        current = {o.key: o for o in overcommits}
        for key in known - current.keys():
            log.info("Device over-commit ended", extra={"node": node, "device": f"{key[0].value} {key[1]}"})
        for key, over in current.items():
            if key not in known:
                self._report(node, over, cause)
        if current:
            self._known[node] = frozenset(current)
        else:
            self._known.pop(node, None)

    def _report(self, node: str, over: Overcommit, cause: Pod | None) -> None:
        message = f"{over.describe()} on node {node}; {_CONSEQUENCE}"
        log.warning(
            "Device over-committed",
            extra={"node": node, "device": f"{over.type.value} {over.minor}", "pods": ",".join(over.pods)},
        )
        node_obj = self._nodes(node)
        ref = ObjectReference.of(node_obj) if node_obj is not None else ObjectReference("Node", node, api_version="v1")
        self._recorder.warning(ref, REASON_DEVICE_OVERCOMMITTED, message)
        if cause is not None and cause.key in over.pods:
            self._recorder.warning(ObjectReference.of(cause), REASON_DEVICE_OVERCOMMITTED, message)
            return
        for key in over.pods:
            pod = self._pods(key)
            if pod is not None:
                self._recorder.warning(ObjectReference.of(pod), REASON_DEVICE_OVERCOMMITTED, message)
