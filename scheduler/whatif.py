"""What would the scheduler do with these pods on this cluster? No cluster needed.

`tessera what-if -f snapshot.yaml` feeds Nodes, Device CRs and Pods (as `kubectl get -o yaml`
writes them, `List` kinds included) to the same core the live scheduler runs: pods that already
have `spec.nodeName` are loaded as running, then every other pod is scheduled in the order
given, each placement committed before the next. The result per pod is its node (or none), the
annotations the scheduler would write, and for a pod that fits nowhere the reason per node.
A pod whose `schedulerName` no profile serves is not placed, as the live scheduler would leave
it alone: the result says so (a pod that names no scheduler has `default-scheduler`; serve it
with a config that has that profile, like `tessera up`'s `DATA_DIR/scheduler/config.yaml`).

Pure: the caller parses YAML into dicts; this module turns them into objects and results.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from apis.crds.device import Device
from apis.errors import ValidationError
from apis.extension import names
from apis.k8s.core import Node, Pod
from scheduler.core import Outcome, Scheduler
from scheduler.framework.status import Shortfall

__all__ = ["Snapshot", "WhatIfResult", "parse_objects", "run"]

_LIST_KINDS = frozenset({"List", "NodeList", "PodList", "DeviceList"})
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Snapshot:
    nodes: tuple[Node, ...] = ()
    devices: tuple[Device, ...] = ()
    pods: tuple[Pod, ...] = ()
    #: `kind` of every object skipped (Namespaces, Services, ...), for a warning.
    ignored: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WhatIfResult:
    pod: str
    node: str | None
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: node -> reasons it was rejected (only for pods that fit nowhere)
    reasons: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: kube-scheduler's one-line summary, for pods that fit nowhere
    message: str = ""
    #: nodes that missed by resources alone, closest first, with what they lack
    nearest: tuple[tuple[str, tuple[Shortfall, ...]], ...] = ()
    #: why the pod was not scheduled at all (no profile serves its schedulerName)
    reason: str = ""

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "pod": self.pod,
            "node": self.node,
            "annotations": dict(self.annotations),
            "reasons": {node: list(r) for node, r in self.reasons.items()},
        }
        if self.message:
            out["message"] = self.message
        if self.nearest:
            out["nearest"] = {node: [str(s) for s in shortfalls] for node, shortfalls in self.nearest}
        if self.reason:
            out["reason"] = self.reason
        return out


def parse_objects(docs: Iterable[object], *, source: str = "snapshot") -> Snapshot:
    """Nodes, Devices and Pods from parsed YAML/JSON documents, in order. Raises
    ValidationError naming the document that is not a valid object."""
    nodes: list[Node] = []
    devices: list[Device] = []
    pods: list[Pod] = []
    ignored: list[str] = []

    def visit(doc: object, where: str) -> None:
        if doc is None:
            return
        if not isinstance(doc, Mapping):
            raise ValidationError(where, f"expected a Kubernetes object, got {type(doc).__name__}")
        kind = doc.get("kind")
        if kind in _LIST_KINDS:
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise ValidationError(f"{where}.items", "expected a list")
            for i, item in enumerate(items):
                visit(item, f"{where}.items[{i}]")
        elif kind == "Node":
            nodes.append(_parse(Node.from_dict, doc, where))
        elif kind == names.DEVICES.kind:
            devices.append(_parse(Device.from_dict, doc, where))
        elif kind == "Pod":
            pods.append(_parse(Pod.from_dict, doc, where))
        else:
            ignored.append(str(kind))

    for i, doc in enumerate(docs):
        visit(doc, f"{source}[{i}]")
    return Snapshot(tuple(nodes), tuple(devices), tuple(pods), tuple(ignored))


def _parse(parser: Callable[[object], _T], doc: Mapping[str, object], where: str) -> _T:
    try:
        return parser(doc)
    except ValidationError as e:
        raise ValidationError(f"{where}: {e.field}", e.reason, obj=e.obj) from None


def run(snapshot: Snapshot, scheduler: Scheduler) -> list[WhatIfResult]:
    """Load the snapshot into the scheduler's cache and schedule its pending pods in order."""
    cache = scheduler.cache
    for node in snapshot.nodes:
        cache.add_node(node)
    for device in snapshot.devices:
        cache.add_device(device)
    pending = []
    for pod in snapshot.pods:
        if pod.node_name:
            cache.add_pod(pod)
        elif not pod.is_terminal:
            pending.append(pod)
    results = []
    for pod in pending:
        if scheduler.framework_for(pod) is None:
            reason = f"schedulerName {pod.scheduler_name} is not served by this scheduler"
            results.append(WhatIfResult(pod.key, None, reason=reason))
        else:
            results.append(_result(scheduler.schedule_one(pod)))
    return results


def _result(outcome: Outcome) -> WhatIfResult:
    if outcome.scheduled:
        return WhatIfResult(outcome.pod, outcome.node, dict(outcome.annotations))
    diagnosis = outcome.diagnosis
    return WhatIfResult(
        pod=outcome.pod,
        node=None,
        reasons={node: tuple(reasons) for node, reasons in diagnosis.reasons_by_node().items()},
        message=outcome.status.message,
        nearest=tuple(diagnosis.nearest()),
    )
