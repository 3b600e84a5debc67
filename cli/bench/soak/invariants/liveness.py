"""Liveness: nothing acknowledged is lost, no pod that fits stays pending, every component is up.

- An object is lost when a create the API server acknowledged (with a uid) is gone, or has another
  uid, without the soak having deleted it or having seen it where the node lifecycle controller may
  evict it (on a lost node: `ClusterState.evictable`): SQLite must keep every acknowledged write
  across `kill -9` of the API server.
- A pod that fits (`fit.FreeDevices`) and stays pending for `Bounds.pending_s` — counted from its
  first sighting or the last kill, whichever is later — is stuck. Pods labelled `MAY_WAIT` (those
  a quota may hold back: admission depends on the other quotas' demand) are left to the quota
  invariants; a gang counts when all its pending members fit together and it has all its members.
- Components: each must be running and ready at the end (`components_down`, fed by the driver:
  processes are not API objects).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from apis.errors import AnnotationError
from apis.extension.gang import gang_from_pod
from apis.k8s.core import Pod
from cli.bench.soak.fit import FreeDevices
from cli.bench.soak.invariants.base import Bounds, Invariant, Violation
from cli.bench.soak.invariants.gangs import strict_gangs
from cli.bench.soak.state import ClusterState, created_at

__all__ = ["MAY_WAIT", "components_down", "fitting_pending", "invariants", "lost"]

#: A pod with this label set to "true" may legitimately wait (its quota may be full).
MAY_WAIT: Final = "soak.tessera.dev/may-wait"


def invariants(bounds: Bounds) -> list[Invariant]:
    return [
        Invariant("object-lost", lost),
        Invariant("fitting-pod-pending", fitting_pending, grace_s=bounds.pending_s),
    ]


def lost(state: ClusterState) -> list[Violation]:
    present = {p.key: p.uid for p in state.pods}
    reclaimed = {e.pod for e in state.reclaimed}  # the quota family judges those evictions
    violations = []
    for key, uid in sorted(state.acknowledged.items()):
        if key in state.deleted or key in state.evictable or key in reclaimed or present.get(key) == uid:
            continue
        now = f"it has uid {present[key]}" if key in present else "it is gone"
        violations.append(Violation("object-lost", (key,), f"{key} was created with uid {uid}; {now}"))
    return violations


def _pending(pod: Pod) -> bool:
    return not pod.node_name and not pod.is_terminal and not pod.is_deleting and pod.labels.get(MAY_WAIT) != "true"


def fitting_pending(state: ClusterState) -> list[Violation]:
    free = FreeDevices(state)
    gangs = strict_gangs(state.pods)
    violations = []
    judged: set[str] = set()
    for pod in sorted((p for p in state.pods if _pending(p)), key=lambda p: (created_at(p, state), p.key)):
        try:
            gang = gang_from_pod(pod)
        except AnnotationError:
            continue
        if gang is None:
            if free.place(pod):
                violations.append(Violation("fitting-pod-pending", (pod.key,), f"{pod.key} fits but is pending"))
            continue
        if gang.name in judged or gang.name not in gangs:
            continue
        judged.add(gang.name)
        spec, members = gangs[gang.name]
        waiting = [p for p in members if _pending(p)]
        if len(members) >= (spec.min_available or 1) and free.place_all(waiting):
            violations.append(
                Violation(
                    "fitting-pod-pending",
                    (f"gang {gang.name}", *sorted(p.key for p in waiting)),
                    f"gang {gang.name}: its {len(waiting)} pending members fit together but are pending",
                )
            )
    return violations


def components_down(ready: Mapping[str, bool]) -> list[Violation]:
    """The components that are not running and ready (by name: `apiserver`, `agent/sim-1`)."""
    return [
        Violation("component-down", (name,), f"{name} is not running and ready")
        for name, up in sorted(ready.items())
        if not up
    ]
