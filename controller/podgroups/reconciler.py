"""The PodGroup reconciler: keeps each PodGroup's status (phase, scheduled, running, succeeded,
failed, scheduleStartTime; occupiedBy for scheduler-plugins') true to its member pods and says
each phase change with an Event on the PodGroup.

Two of them run, one per API group: Koordinator's PodGroups (`scheduling.sigs.k8s.io`, members
labelled `pod-group.scheduling.sigs.k8s.io: name`, Koordinator's state machine) and
scheduler-plugins' (`scheduling.x-k8s.io`, members labelled `scheduling.x-k8s.io/pod-group: name`,
that project's state machine, `status.next_upstream_status`).

Key: `namespace/name` of a PodGroup. Members are the pods of that namespace with the label, found
through an index of a pod informer. Scheduled counts members with a node (the scheduler binds a
Strict gang's min members together). Writes a merge patch of `status` only when it differs from
the cache, or when the PodGroup has no phase yet (it gets Pending).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from apis.crds.podgroup import PodGroup
from apis.extension import names
from apis.extension.names import GroupVersionResource
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
    def __init__(
        self,
        groups: Store[PodGroup | Malformed],
        pods: Store[Pod],
        api: StatusWriter,
        recorder: EventRecorder,
        *,
        now: Callable[[], str] = now_rfc3339,
        name: str = "podgroup",
    ) -> None:
        self.name = name
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
        if status == GroupStatus.of(group) and group.phase_given:
            return Result()
        self._api.patch(
            group.meta.name, {"status": status.to_dict()}, namespace=group.meta.namespace, subresource="status"
        )
        with self._lock:
            announce = self._announced.get(key) != status.phase.value and status.phase is not group.phase
            self._announced[key] = status.phase.value
        if announce:
            scheduled = "" if status.upstream else f"{status.scheduled} scheduled, "
            message = (
                f"phase {group.phase.value} → {status.phase.value}: {len(members)} members, "
                f"{scheduled}{status.running} running, min {group.min_member}"
            )
            self._recorder.normal(ObjectReference.of(group), REASON_PHASE, message)
            log.info("PodGroup phase changed", extra={"podGroup": key, "phase": status.phase.value})
        return Result()


def _group_of(pod: Pod) -> list[str]:
    name = pod.labels.get(names.LABEL_POD_GROUP)
    return [f"{pod.namespace}/{name}"] if name else []


def _upstream_group_of(pod: Pod) -> list[str]:
    name = pod.labels.get(names.LABEL_UPSTREAM_POD_GROUP)
    return [f"{pod.namespace}/{name}"] if name else []


def _group_key(group: PodGroup | Malformed) -> list[str]:
    if isinstance(group, PodGroup):
        return [group.meta.key]
    ref = group.reference
    return [f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name]


@dataclass(frozen=True, slots=True)
class _Kind:
    """One API group's PodGroups: what to watch, and which label makes a pod a member."""

    name: str  # the controller's
    resource: GroupVersionResource
    parse: Callable[[Any], PodGroup]
    label: str
    group_of: Callable[[Pod], list[str]]


KOORDINATOR = _Kind("podgroup", names.POD_GROUPS, PodGroup.from_dict, names.LABEL_POD_GROUP, _group_of)
UPSTREAM = _Kind(
    "upstream-podgroup",
    names.UPSTREAM_POD_GROUPS,
    PodGroup.upstream_from_dict,
    names.LABEL_UPSTREAM_POD_GROUP,
    _upstream_group_of,
)


def add_to_manager(manager: Manager) -> tuple[Controller, Controller]:
    """Wire the two reconcilers: each group's PodGroups, and the pods labelled with one (indexed
    by group)."""
    return _wire(manager, KOORDINATOR), _wire(manager, UPSTREAM)


def _wire(manager: Manager, kind: _Kind) -> Controller:
    groups = manager.informers.informer(kind.resource, parse=tolerant(kind.parse, kind.resource))
    pods = manager.informers.informer(
        PODS, parse=Pod.from_dict, label_selector=kind.label, indexers={_BY_GROUP: kind.group_of}
    )
    # Koordinator's PodGroup CRD has no status subresource (ours neither), scheduler-plugins' has
    # one: status goes where it is kept.
    api = StatusAwareAPI(manager.client.resource(kind.resource))
    reconciler = PodGroupReconciler(groups.store, pods.store, api, manager.events, name=kind.name)
    controller = manager.add(reconciler, ControllerOptions(workers=1))
    controller.watch(groups, keys=_group_key)
    controller.watch(
        pods, keys=kind.group_of, changed=lambda old, new: (old.phase, old.node_name) != (new.phase, new.node_name)
    )
    return controller
