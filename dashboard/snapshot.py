"""The page's data as JSON-ready dicts, and what changed between two of them.

The browser keeps one row per node and replaces only the rows that changed, so a change on one
node of 500 costs one row on the wire and in the DOM. `State` is one rendering of everything
(nodes by name, plus a small summary: totals, pending pods, gangs, quotas, Reservations,
PodMigrationJobs, the scheduler's health); `diff` turns two states into the patch the server
streams: the changed node rows and the summary's changed entries (the Reservations and
migrations tables, their times absolute, change only when their objects do, so most patches
leave them out). Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from apis.k8s import resources
from apis.k8s.meta import Condition
from dashboard.explanation import Step
from dashboard.gpumap import GPU, RDMA, ClusterMap, NodeMap, Reserved, Share, Totals
from dashboard.health import SchedulerHealth
from dashboard.migrations import MigrationRow
from dashboard.reservations import ReservationRow
from dashboard.workload import Gang, PendingPod, QuotaNode

__all__ = ["MAX_FINISHED", "MAX_PENDING", "State", "diff", "node_json", "render"]

#: Pending pods sent to the page (oldest first); the rest are counted.
MAX_PENDING: Final = 200
#: Ended Reservations and PodMigrationJobs sent (newest first, after every live one); the rest are
#: counted. A descheduler at work leaves hundreds behind, and the table is about what happens now.
MAX_FINISHED: Final = 100
_ENDED: Final = frozenset({"Succeeded", "Failed", "Aborted"})

JSONDict = dict[str, Any]


@dataclass(frozen=True, slots=True)
class State:
    #: Node name -> its row, already serialized (so two states compare by string).
    nodes: Mapping[str, str]
    summary: JSONDict

    def full(self) -> str:
        """The whole state as one JSON document (what a new page gets first)."""
        nodes = ",".join(self.nodes[name] for name in sorted(self.nodes))
        return f'{{"nodes":[{nodes}],"removed":[],"summary":{json.dumps(self.summary, separators=(",", ":"))}}}'


def _share(s: Share) -> JSONDict:
    out: JSONDict = {"pod": s.pod, "core": s.core, "ratio": s.memory_ratio, "memory": s.memory, "vfs": s.vfs}
    if s.reservation:
        out["reservation"] = s.reservation
    if s.claim:
        out["claim"] = s.claim
    if s.partition:
        out["partition"] = s.partition
    return out


def _reserved(r: Reserved) -> JSONDict:
    return {
        "reservation": r.reservation,
        "owners": list(r.owners),
        "core": r.core,
        "ratio": r.memory_ratio,
        "memory": r.memory,
        "vfs": r.vfs,
    }


def _gpu(gpu: GPU, fragment: int) -> JSONDict:
    return {
        "minor": gpu.minor,
        "healthy": gpu.healthy,
        "problem": gpu.problem,
        "memory": gpu.memory,
        "nvlink": gpu.nvlink_group,
        "fragmented": fragment,
        "shares": [_share(s) for s in gpu.shares],
        "reserved": [_reserved(r) for r in gpu.reserved],
    }


def _rdma(nic: RDMA) -> JSONDict:
    return {
        "minor": nic.minor,
        "healthy": nic.healthy,
        "problem": nic.problem,
        "vfs": nic.vfs_total,
        "shares": [_share(s) for s in nic.shares],
        "reserved": [_reserved(r) for r in nic.reserved],
    }


def node_json(node: NodeMap, fragments: Mapping[tuple[str, int], int]) -> str:
    doc = {
        "name": node.name,
        "nvlink": [list(g) for g in node.nvlink],
        "groups": [
            {
                "pcie": group.pcie,
                "gpus": [_gpu(g, fragments.get((node.name, g.minor), 0)) for g in group.gpus],
                "rdma": [_rdma(n) for n in group.rdma],
            }
            for group in node.groups
        ],
    }
    return json.dumps(doc, separators=(",", ":"))


def _steps(steps: Sequence[Step]) -> list[JSONDict]:
    return [{"stage": s.stage, "plugin": s.plugin, "text": s.text} for s in steps]


def _conditions(conditions: Sequence[Condition]) -> list[JSONDict]:
    return [{"type": c.type, "status": c.status, "reason": c.reason, "message": c.message} for c in conditions]


def _capped(rows: Sequence[ReservationRow] | Sequence[MigrationRow]) -> list[Any]:
    """Every live row, then the first `MAX_FINISHED` ended ones (the rows come newest first)."""
    ended = [r for r in rows if r.phase in _ENDED]
    return [r for r in rows if r.phase not in _ENDED] + ended[:MAX_FINISHED]


def _reservation(r: ReservationRow) -> JSONDict:
    return {
        "name": r.name,
        "phase": r.phase,
        "node": r.node,
        "holds": r.holds,
        "devices": r.devices,
        "owners": list(r.owners),
        "currentOwners": list(r.current_owners),
        "created": r.created,
        "expires": r.expires,
        "expiresAt": r.expires_at,
        "reason": r.reason,
        "conditions": _conditions(r.conditions),
    }


def _migration(m: MigrationRow) -> JSONDict:
    return {
        "name": m.name,
        "phase": m.phase,
        "mode": m.mode,
        "pod": m.pod,
        "from": m.from_node,
        "to": m.to_node,
        "toPlanned": m.to_planned,
        "reservation": m.reservation,
        "reservationPhase": m.reservation_phase,
        "step": m.step,
        "reason": m.reason,
        "message": m.message,
        "why": m.why,
        "created": m.created,
        "paused": m.paused,
        "conditions": _conditions(m.conditions),
    }


def render(
    cluster: ClusterMap,
    fragments: Mapping[tuple[str, int], int],
    totals: Totals,
    *,
    pending: Sequence[PendingPod],
    gangs: Sequence[Gang],
    quotas: Sequence[QuotaNode],
    health: SchedulerHealth | None,
    now: float,
    errors: Sequence[str] = (),
    reservations: Sequence[ReservationRow] = (),
    migrations: Sequence[MigrationRow] = (),
) -> State:
    """Everything the page shows. `now` (epoch seconds) lets the page age what it shows."""
    summary: JSONDict = {
        "now": now,
        "totals": {
            "gpus": totals.gpus,
            "unhealthyGpus": totals.unhealthy_gpus,
            "allocated": totals.allocated,
            "idle": totals.idle,
            "fragmented": totals.fragmented,
            "unhealthy": totals.unhealthy,
            "reserved": totals.reserved,
        },
        "pending": [
            {
                "pod": p.pod,
                "age": p.age_seconds,
                "asks": p.asks,
                "gang": p.gang,
                "quota": p.quota,
                "queue": p.queue,
                "attempts": p.attempts,
                "message": p.message,
                "steps": _steps(p.steps),
            }
            for p in pending[:MAX_PENDING]
        ],
        "pendingTotal": len(pending),
        "gangs": [
            {
                "name": g.name,
                "minMember": g.min_member,
                "bound": g.bound,
                "waiting": g.waiting,
                "waitingSeconds": g.waiting_seconds,
                "phase": g.phase,
            }
            for g in gangs
        ],
        "quotas": [
            {
                "name": q.name,
                "parent": q.parent,
                "depth": q.depth,
                "isParent": q.is_parent,
                "resources": _quota_rows(q),
                "problems": list(q.problems),
            }
            for q in quotas
        ],
        "reservations": [_reservation(r) for r in _capped(reservations)],
        "reservationsTotal": len(reservations),
        "migrations": [_migration(m) for m in _capped(migrations)],
        "migrationsTotal": len(migrations),
        "health": None
        if health is None
        else {
            "podsPerSecond": health.pods_per_second,
            "p99CycleSeconds": health.p99_cycle_seconds,
            "queues": dict(health.queues),
            "boundTotal": health.bound_total,
        },
        "problems": [*cluster.problems, *errors],
    }
    return State({node.name: node_json(node, fragments) for node in cluster.nodes}, summary)


def _quota_rows(q: QuotaNode) -> list[JSONDict]:
    """One row per resource the quota names: amounts (for the bars) and quantities (for people);
    runtime and used are None when the controller has not written them."""
    rows = []
    for name in sorted({*q.min, *q.max}):
        amounts = {
            "min": q.min.get(name),
            "max": q.max.get(name),
            "runtime": None if q.runtime is None else q.runtime.get(name, 0),
            "used": None if q.used is None else q.used.get(name, 0),
        }
        rows.append(
            {
                "name": name,
                **amounts,
                "text": {k: None if v is None else resources.format_quantity(name, v) for k, v in amounts.items()},
            }
        )
    return rows


def diff(before: State | None, after: State) -> str | None:
    """The patch from `before` to `after` as JSON (changed node rows, removed node names, the
    summary's changed entries: the page keeps the others), or None when nothing changed. With no
    `before`, the whole state."""
    if before is None:
        return after.full()
    changed = [row for name, row in sorted(after.nodes.items()) if before.nodes.get(name) != row]
    removed = sorted(set(before.nodes) - set(after.nodes))
    if not changed and not removed and before.summary == after.summary:
        return None
    parts = {key: value for key, value in after.summary.items() if before.summary.get(key) != value}
    summary = json.dumps(parts, separators=(",", ":"))
    return f'{{"nodes":[{",".join(changed)}],"removed":{json.dumps(removed)},"summary":{summary}}}'
