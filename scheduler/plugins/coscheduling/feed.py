"""Coscheduling's feeds (`scheduler.framework.feeds`): the PodGroups of both APIs into each
profile's gang book, and what is wrong with a gang said on its pods.

- **PodGroups**, Koordinator's (`scheduling.sigs.k8s.io`) and scheduler-plugins'
  (`scheduling.x-k8s.io`), each object carrying which it is (`PodGroup.resource`). Every
  profile's Coscheduling keeps its own book, so each registers its handlers; the two watches are
  not waited for at start (a cluster without a CRD still schedules: until one syncs, its
  PodGroups' members wait). A PodGroup created or changed may complete its gang or change its
  min: `POD_GROUP_CHANGED` moves the pods Coscheduling refused.
- **Warnings on pods**, from the scheduler's pod watch: a gang value ignored for its default (an
  unknown mode, a total below min, a malformed duration or groups list) is said once per gang, as
  a `GangValueIgnored` Warning Event on the pod that set the gang up (once for the scheduler,
  whichever profile registers first: every profile's book counts every pod); a pending pod of
  the profile that comes to name both kinds of gang gets one `GangConflict` Warning Event (its
  PreFilter refuses it with the same words).

The pods themselves reach the book through `PodSetExtension.pod_added` (the scheduler's pod
handlers call it before these run), so a warning reads a gang that already counts the pod.
"""

from __future__ import annotations

from typing import Final

from apis.crds.podgroup import PodGroup
from apis.extension import names
from apis.extension.gang import gang_conflict
from apis.k8s.core import Pod
from scheduler.framework.events import ClusterEvent, EventAction
from scheduler.framework.feeds import About, Feeds, Handlers, Watch
from scheduler.plugins.coscheduling.gangs import GangBook

__all__ = [
    "POD_GROUPS",
    "POD_GROUP_CHANGED",
    "REASON_GANG_CONFLICT",
    "REASON_GANG_VALUE_IGNORED",
    "UPSTREAM_POD_GROUPS",
    "watch_pod_groups",
    "watch_pods",
]

#: A PodGroup (of either API) was created, changed or deleted.
POD_GROUP_CHANGED: Final = ClusterEvent(names.POD_GROUPS.kind, EventAction.ALL, "PodGroupChange")
POD_GROUPS: Final = Watch(names.POD_GROUPS, PodGroup.from_dict, required=False)
#: scheduler-plugins' PodGroups (Kubeflow, KubeRay): the same handlers, the group in each object.
UPSTREAM_POD_GROUPS: Final = Watch(names.UPSTREAM_POD_GROUPS, PodGroup.upstream_from_dict, required=False)
REASON_GANG_VALUE_IGNORED: Final = "GangValueIgnored"
#: A pending pod names one of Koordinator's gangs and a scheduler-plugins PodGroup.
REASON_GANG_CONFLICT: Final = "GangConflict"


def watch_pod_groups(feeds: Feeds, book: GangBook) -> None:
    """Keep `book`'s PodGroups current from both watches."""

    def changed(group: PodGroup) -> None:
        book.add_pod_group(group)
        feeds.emit(POD_GROUP_CHANGED)

    handlers = Handlers(added=changed, updated=lambda _old, new: changed(new), deleted=book.delete_pod_group)
    for watch in (POD_GROUPS, UPSTREAM_POD_GROUPS):
        feeds.watch(watch, handlers)


def watch_pods(feeds: Feeds, book: GangBook, *, profile: str) -> None:
    """Say what is wrong with a gang on its pods (see the module docstring)."""
    warned: set[str] = set()

    def ignored(pod: Pod) -> None:
        gang = book.gang_of(pod.uid or pod.key)
        if gang is None or not gang.problems or gang.name in warned:
            return
        warned.add(gang.name)
        for problem in gang.problems:
            message = f"gang {gang.name}: {problem}; using the default"
            feeds.warn(About.of(names.CORE_PODS, pod.meta), REASON_GANG_VALUE_IGNORED, message)

    def conflict(old: Pod | None, pod: Pod) -> None:
        if pod.node_name or pod.scheduler_name != profile:
            return
        said = gang_conflict(pod)
        if said and (old is None or gang_conflict(old) != said):
            feeds.warn(About.of(names.CORE_PODS, pod.meta), REASON_GANG_CONFLICT, said)

    feeds.pods(Handlers(added=ignored, updated=lambda _old, new: ignored(new)), key="Coscheduling/ignored")
    feeds.pods(Handlers(added=lambda pod: conflict(None, pod), updated=conflict))
