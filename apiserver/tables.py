"""Server-side printing (`meta.k8s.io/v1 Table`): the columns `kubectl get` shows.

kubectl asks for `as=Table` and prints whatever columns the server sends; without them it can
only print names. Built-in kinds get the columns kube-apiserver prints for them (pods: READY,
STATUS, RESTARTS, AGE, and IP/NODE with `-o wide`); custom resources get their CRD's
`additionalPrinterColumns` (simple JSONPaths: `.a.b`, `.a[0].b`).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from apiserver.catalog import Column, ResourceType

__all__ = ["human_duration", "table", "wants_table"]

Obj = Mapping[str, Any]
_NAME = Column("Name", "string", ".metadata.name", description="Name must be unique within a namespace.")
_PATH_RE = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]")


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


def human_duration(seconds: float) -> str:
    """Kubernetes' duration.HumanDuration: `45s`, `5m30s`, `3h`, `2d4h`, `1y20d`."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def _age(timestamp: object) -> str:
    if not isinstance(timestamp, str) or not timestamp:
        return "<unknown>"
    try:
        then = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return "<unknown>"
    return human_duration((datetime.datetime.now(datetime.UTC) - then).total_seconds())


def _path(obj: Any, json_path: str) -> Any:
    value = obj
    for key, index in _PATH_RE.findall(json_path):
        if key:
            value = value.get(key) if isinstance(value, Mapping) else None
        else:
            value = value[int(index)] if isinstance(value, list) and int(index) < len(value) else None
        if value is None:
            return None
    return value


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _section(obj: Obj, name: str) -> Mapping[str, Any]:
    value = obj.get(name)
    return value if isinstance(value, Mapping) else {}


def _pod_row(obj: Obj) -> list[Any]:
    spec, status = _section(obj, "spec"), _section(obj, "status")
    statuses = [s for s in status.get("containerStatuses") or () if isinstance(s, Mapping)]
    ready = sum(1 for s in statuses if s.get("ready"))
    phase = status.get("reason") or status.get("phase") or "Pending"
    for s in statuses:  # as kubectl's printer: an exited container's reason (Completed, Error)
        terminated = (s.get("state") or {}).get("terminated")
        if isinstance(terminated, Mapping) and terminated.get("reason"):
            phase = terminated["reason"]
    if _meta(obj).get("deletionTimestamp"):
        phase = "Terminating"
    restarts = sum(s.get("restartCount", 0) for s in statuses if isinstance(s.get("restartCount"), int))
    containers = spec.get("containers")
    count = len(containers) if isinstance(containers, list) else 0
    return [
        f"{ready}/{count}",
        phase,
        restarts,
        _age(_meta(obj).get("creationTimestamp")),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
    ]


def _node_row(obj: Obj) -> list[Any]:
    conditions = [c for c in _section(obj, "status").get("conditions") or () if isinstance(c, Mapping)]
    ready = next((c.get("status") for c in conditions if c.get("type") == "Ready"), None)
    state = {"True": "Ready", "False": "NotReady"}.get(str(ready), "Unknown")
    if _section(obj, "spec").get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = _meta(obj).get("labels") or {}
    roles = sorted(
        k.removeprefix("node-role.kubernetes.io/") for k in labels if k.startswith("node-role.kubernetes.io/")
    )
    info = _section(_section(obj, "status"), "nodeInfo")
    return [
        state,
        ",".join(roles) or "<none>",
        _age(_meta(obj).get("creationTimestamp")),
        info.get("kubeletVersion", ""),
    ]


def _event_row(obj: Obj) -> list[Any]:
    involved = _section(obj, "involvedObject")
    last = obj.get("lastTimestamp") or obj.get("eventTime") or _meta(obj).get("creationTimestamp")
    return [
        _age(last),
        obj.get("type", ""),
        obj.get("reason", ""),
        f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
        obj.get("message", ""),
    ]


def _replicas(obj: Obj, field: str) -> int:
    value = _section(obj, "status").get(field)
    return value if isinstance(value, int) else 0


def _desired(obj: Obj) -> int:
    value = _section(obj, "spec").get("replicas")
    return value if isinstance(value, int) else 0


def _deployment_row(obj: Obj) -> list[Any]:
    return [
        f"{_replicas(obj, 'readyReplicas')}/{_desired(obj)}",
        _replicas(obj, "updatedReplicas"),
        _replicas(obj, "availableReplicas"),
        _age(_meta(obj).get("creationTimestamp")),
    ]


def _replicaset_row(obj: Obj) -> list[Any]:
    return [
        _desired(obj),
        _replicas(obj, "replicas"),
        _replicas(obj, "readyReplicas"),
        _age(_meta(obj).get("creationTimestamp")),
    ]


def _statefulset_row(obj: Obj) -> list[Any]:
    return [f"{_replicas(obj, 'readyReplicas')}/{_desired(obj)}", _age(_meta(obj).get("creationTimestamp"))]


def _daemonset_row(obj: Obj) -> list[Any]:
    selector = _section(_section(_section(obj, "spec"), "template"), "spec").get("nodeSelector") or {}
    return [
        _replicas(obj, "desiredNumberScheduled"),
        _replicas(obj, "currentNumberScheduled"),
        _replicas(obj, "numberReady"),
        _replicas(obj, "updatedNumberScheduled"),
        _replicas(obj, "numberAvailable"),
        ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>",
        _age(_meta(obj).get("creationTimestamp")),
    ]


def _job_state(obj: Obj) -> str:
    conditions = [c for c in _section(obj, "status").get("conditions") or () if isinstance(c, Mapping)]
    for kind in ("Complete", "Failed", "FailureTarget", "Suspended"):
        if any(c.get("type") == kind and c.get("status") == "True" for c in conditions):
            return {"FailureTarget": "Failed"}.get(kind, kind)
    return "Running"


def _seconds_between(start: object, end: object) -> str:
    try:
        began = datetime.datetime.fromisoformat(str(start).replace("Z", "+00:00"))
        ended = (
            datetime.datetime.fromisoformat(str(end).replace("Z", "+00:00"))
            if end
            else datetime.datetime.now(datetime.UTC)
        )
    except ValueError:
        return ""
    return human_duration((ended - began).total_seconds())


def _job_row(obj: Obj) -> list[Any]:
    spec, status = _section(obj, "spec"), _section(obj, "status")
    completions = spec.get("completions")
    done = _replicas(obj, "succeeded")
    return [
        _job_state(obj),
        f"{done}/{completions}" if isinstance(completions, int) else f"{done}/1 of {spec.get('parallelism', 1)}",
        _seconds_between(status.get("startTime"), status.get("completionTime")) if status.get("startTime") else "",
        _age(_meta(obj).get("creationTimestamp")),
    ]


def _cronjob_row(obj: Obj) -> list[Any]:
    """kube's printCronJob: the schedule, its zone, suspend, how many Jobs run, the last run."""
    spec, status = _section(obj, "spec"), _section(obj, "status")
    job_spec = _section(_section(spec, "jobTemplate"), "spec")
    containers = [
        c for c in _section(_section(job_spec, "template"), "spec").get("containers") or () if isinstance(c, Mapping)
    ]
    suspend = spec.get("suspend")
    selector = _section(job_spec, "selector").get("matchLabels") or {}
    last = status.get("lastScheduleTime")
    return [
        spec.get("schedule", ""),
        spec.get("timeZone") or "<none>",
        "<unset>" if not isinstance(suspend, bool) else str(suspend),
        len(status.get("active") or ()),
        _age(last) if last else "<none>",
        _age(_meta(obj).get("creationTimestamp")),
        ",".join(str(c.get("name", "")) for c in containers),
        ",".join(str(c.get("image", "")) for c in containers),
        ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>",
    ]


def _pdb_row(obj: Obj) -> list[Any]:
    spec = _section(obj, "spec")
    return [
        "N/A" if spec.get("minAvailable") is None else str(spec["minAvailable"]),
        "N/A" if spec.get("maxUnavailable") is None else str(spec["maxUnavailable"]),
        _replicas(obj, "disruptionsAllowed"),
        _age(_meta(obj).get("creationTimestamp")),
    ]


def _claim_state(obj: Obj) -> str:
    """kube's printer for a ResourceClaim's STATE: pending, allocated, reserved, deleted."""
    status = _section(obj, "status")
    deleted = bool(_meta(obj).get("deletionTimestamp"))
    states = ["deleted"] if deleted else []
    if not status.get("allocation"):
        if not deleted:
            states.append("pending")
    else:
        states.append("allocated")
        if status.get("reservedFor"):
            states.append("reserved")
        elif deleted:
            states.append("deallocating")
    return ",".join(states)


def _resourceclaim_row(obj: Obj) -> list[Any]:
    return [_claim_state(obj), _age(_meta(obj).get("creationTimestamp"))]


def _resourceslice_row(obj: Obj) -> list[Any]:
    spec = _section(obj, "spec")
    return [
        spec.get("nodeName") or "<none>",
        spec.get("driver", ""),
        _section(spec, "pool").get("name", ""),
        _age(_meta(obj).get("creationTimestamp")),
    ]


def _strings(*names: str) -> tuple[Column, ...]:
    return tuple(Column(n, "integer" if n in _INTEGER_COLUMNS else "string", "") for n in names)


_INTEGER_COLUMNS = frozenset({"Up-to-date", "Available", "Desired", "Current", "Allowed Disruptions"})
#: Columns of the kinds of API groups, by storage id (kube-apiserver's printers for them).
_GROUPED: Mapping[str, tuple[tuple[Column, ...], Callable[[Obj], list[Any]]]] = {
    "deployments.apps": (_strings("Ready", "Up-to-date", "Available", "Age"), _deployment_row),
    "replicasets.apps": (_strings("Desired", "Current", "Ready", "Age"), _replicaset_row),
    "statefulsets.apps": (_strings("Ready", "Age"), _statefulset_row),
    "daemonsets.apps": (
        _strings("Desired", "Current", "Ready", "Up-to-date", "Available", "Node Selector", "Age"),
        _daemonset_row,
    ),
    "jobs.batch": (_strings("Status", "Completions", "Duration", "Age"), _job_row),
    "cronjobs.batch": (
        (
            Column("Schedule", "string", ""),
            Column("Timezone", "string", ""),
            Column("Suspend", "boolean", ""),
            Column("Active", "integer", ""),
            Column("Last Schedule", "string", ""),
            Column("Age", "string", ""),
            Column("Containers", "string", "", priority=1),
            Column("Images", "string", "", priority=1),
            Column("Selector", "string", "", priority=1),
        ),
        _cronjob_row,
    ),
    "poddisruptionbudgets.policy": (
        _strings("Min Available", "Max Unavailable", "Allowed Disruptions", "Age"),
        _pdb_row,
    ),
    "resourceclaims.resource.k8s.io": (_strings("State", "Age"), _resourceclaim_row),
    "resourceslices.resource.k8s.io": (_strings("Node", "Driver", "Pool", "Age"), _resourceslice_row),
}

_BUILTIN: Mapping[str, tuple[tuple[Column, ...], Callable[[Obj], list[Any]]]] = {
    "pods": (
        (
            Column("Ready", "string", ""),
            Column("Status", "string", ""),
            Column("Restarts", "integer", ""),
            Column("Age", "string", ""),
            Column("IP", "string", "", priority=1),
            Column("Node", "string", "", priority=1),
            Column("Nominated Node", "string", "", priority=1),
        ),
        _pod_row,
    ),
    "nodes": (
        (
            Column("Status", "string", ""),
            Column("Roles", "string", ""),
            Column("Age", "string", ""),
            Column("Version", "string", ""),
        ),
        _node_row,
    ),
    "events": (
        (
            Column("Last Seen", "string", ""),
            Column("Type", "string", ""),
            Column("Reason", "string", ""),
            Column("Object", "string", ""),
            Column("Message", "string", ""),
        ),
        _event_row,
    ),
}


def _columns_of(rt: ResourceType) -> tuple[tuple[Column, ...], Callable[[Obj], list[Any]]]:
    if not rt.group and rt.plural in _BUILTIN:
        return _BUILTIN[rt.plural]
    if rt.storage_id in _GROUPED and not rt.crd_name:
        return _GROUPED[rt.storage_id]
    columns = rt.columns or (Column("Age", "date", ".metadata.creationTimestamp"),)

    def row(obj: Obj) -> list[Any]:
        cells = []
        for c in columns:
            value = _path(obj, c.json_path)
            if c.type == "date":
                value = _age(value)
            elif isinstance(value, (dict, list)):
                value = str(value)
            cells.append(value)
        return cells

    return columns, row


def table(
    rt: ResourceType,
    objects: Sequence[Obj],
    *,
    rv: str,
    query: Mapping[str, str],
    meta: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    columns, row = _columns_of(rt)
    include = query.get("includeObject", "Metadata")
    rows = []
    for obj in objects:
        entry: dict[str, Any] = {"cells": [_meta(obj).get("name", ""), *row(obj)]}
        if include == "Object":
            entry["object"] = obj
        elif include != "None":
            entry["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": _meta(obj)}
        rows.append(entry)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": dict(meta or {"resourceVersion": rv}),
        "columnDefinitions": [
            {
                "name": c.name,
                "type": "string" if c.type == "date" else c.type,
                "format": "name" if c is _NAME else c.format,
                "description": c.description,
                "priority": c.priority,
            }
            for c in (_NAME, *columns)
        ],
        "rows": rows,
    }
