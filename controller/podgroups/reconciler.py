"""The PodGroup reconciler: keeps each PodGroup's status (phase, scheduled, running, succeeded,
failed, scheduleStartTime) true to its member pods and says each phase change with an Event on
the PodGroup.

Key: `namespace/name` of a PodGroup. Members are the pods of that namespace labelled
`pod-group.scheduling.sigs.k8s.io: name`, found through an index of the shared pod informer.
Scheduled counts members with a node (the scheduler binds a Strict gang's min members together).
Writes a merge patch of `status` only when it differs from the cache.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

from apis.crds.podgroup import PodGroup
from apis.extension import names
from apis.k8s.core import Pod
from apis.k8s.meta import now_rfc3339
from controller.podgroups.status import GroupStatus, next_status
from controller.runtime import Controller, ControllerOptions, Malformed, Manager, PermanentError, Result, tolerant
from kube.cache import Store
from kube.events import EventRecorder, ObjectReference
from kube.resources import PODS, Patch
from kube.status import StatusAwareAPI

__all__ = ["PodGroupReconciler", "add_to_manager"]

log = logging.getLogger(__name__)

_BY_GROUP = "podgroup"
REASON_PHASE = "PodGroupPhaseChanged"


class StatusWriter(Protocol):
    def patch(self, name: str, patch: Patch, *, namespace: str = "", subresource: str = "") -> Any: ...


class PodGroupReconciler:
    name = "podgroup"

    def __init__(
        self,
        groups: Store[PodGroup | Malformed],
        pods: Store[Pod],
        api: StatusWriter,
        recorder: EventRecorder,
        *,
        now: Callable[[], str] = now_rfc3339,
    ) -> None:
        self._groups = groups
        self._pods = pods
        self._api = api
        self._recorder = recorder
        self._now = now
        self._lock = threading.Lock()
        #: key -> the phase last announced by an Event (a stale cache does not announce it twice)
        self._announced: dict[str, str] = {}

    def reference(self, key: str) -> ObjectReference | None:
        group = self._groups.get(key)
        return ObjectReference.of(group) if isinstance(group, PodGroup) else None

    def reconcile(self, key: str) -> Result:
        group = self._groups.get(key)
        if group is None:
            with self._lock:
                self._announced.pop(key, None)
            return Result()
        if isinstance(group, Malformed):
            raise PermanentError(str(group.error), reason="MalformedPodGroup", about=(group.reference,))
        members = self._pods.by_index(_BY_GROUP, key)
        status = next_status(group, members, now=self._now())
        if status == GroupStatus.of(group) and group.schedule_start_time == status.schedule_start_time:
            return Result()
        self._api.patch(
            group.meta.name, {"status": status.to_dict()}, namespace=group.meta.namespace, subresource="status"
        )
        with self._lock:
            announce = self._announced.get(key) != status.phase.value and status.phase is not group.phase
            self._announced[key] = status.phase.value
        if announce:
            message = (
                f"phase {group.phase.value} → {status.phase.value}: {len(members)} members, "
                f"{status.scheduled} scheduled, {status.running} running, min {group.min_member}"
            )
            self._recorder.normal(ObjectReference.of(group), REASON_PHASE, message)
            log.info("PodGroup phase changed", extra={"podGroup": key, "phase": status.phase.value})
        return Result()


def _group_of(pod: Pod) -> list[str]:
    name = pod.labels.get(names.LABEL_POD_GROUP)
    return [f"{pod.namespace}/{name}"] if name else []


def _group_key(group: PodGroup | Malformed) -> list[str]:
    if isinstance(group, PodGroup):
        return [group.meta.key]
    ref = group.reference
    return [f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name]


def add_to_manager(manager: Manager) -> Controller:
    """Wire the reconciler: PodGroups, and the pods labelled with one (indexed by group)."""
    groups = manager.informers.informer(names.POD_GROUPS, parse=tolerant(PodGroup.from_dict, names.POD_GROUPS))
    pods = manager.informers.informer(
        PODS, parse=Pod.from_dict, label_selector=names.LABEL_POD_GROUP, indexers={_BY_GROUP: _group_of}
    )
    # Koordinator's PodGroup CRD has no status subresource (ours neither): status goes where it is kept.
    api = StatusAwareAPI(manager.client.resource(names.POD_GROUPS))
    reconciler = PodGroupReconciler(groups.store, pods.store, api, manager.events)
    controller = manager.add(reconciler, ControllerOptions(workers=1))
    controller.watch(groups, keys=_group_key)
    controller.watch(
        pods, keys=_group_of, changed=lambda old, new: (old.phase, old.node_name) != (new.phase, new.node_name)
    )
    return controller
