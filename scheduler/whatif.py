"""What would the scheduler do with these pods on this cluster? No cluster needed.

`tessera what-if -f snapshot.yaml` feeds Nodes, Device CRs and Pods (as `kubectl get -o yaml`
writes them, `List` kinds included) to the same core the live scheduler runs: pods that already
have `spec.nodeName` are loaded as running, then every other pod is scheduled in the order
given, each placement committed before the next. The result per pod is its node (or none), the
annotations the scheduler would write — and for two or more GPUs, whether NVLink joins them all
(as the node's Device says) — and for a pod that fits nowhere the reason per node.

Pure: the caller parses YAML into dicts; this module turns them into objects and results.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from apis.crds.device import Device, DeviceType
from apis.crds.elasticquota import ElasticQuota
from apis.errors import AnnotationError, ValidationError
from apis.extension import allocation, names
from apis.k8s import resources
from apis.k8s.core import Node, Pod
from scheduler.core import Outcome, Scheduler
from scheduler.framework.status import Shortfall

__all__ = ["QuotaReport", "Snapshot", "WhatIfResult", "parse_objects", "quota_reports", "run"]

_LIST_KINDS = frozenset({"List", "NodeList", "PodList", "DeviceList", "ElasticQuotaList"})
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Snapshot:
    nodes: tuple[Node, ...] = ()
    devices: tuple[Device, ...] = ()
    pods: tuple[Pod, ...] = ()
    quotas: tuple[ElasticQuota, ...] = ()
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
    #: For a pod given two or more GPUs: whether NVLink joins every two of them; else None.
    nvlink: bool | None = None

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
        if self.nvlink is not None:
            out["nvlink"] = self.nvlink
        return out


def parse_objects(docs: Iterable[object], *, source: str = "snapshot") -> Snapshot:
    """Nodes, Devices and Pods from parsed YAML/JSON documents, in order. Raises
    ValidationError naming the document that is not a valid object."""
    nodes: list[Node] = []
    devices: list[Device] = []
    pods: list[Pod] = []
    quotas: list[ElasticQuota] = []
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
        elif kind == names.ELASTIC_QUOTAS.kind:
            quotas.append(_parse(ElasticQuota.from_dict, doc, where))
        else:
            ignored.append(str(kind))

    for i, doc in enumerate(docs):
        visit(doc, f"{source}[{i}]")
    return Snapshot(tuple(nodes), tuple(devices), tuple(pods), tuple(quotas), tuple(ignored))


def _parse(parser: Callable[[object], _T], doc: Mapping[str, object], where: str) -> _T:
    try:
        return parser(doc)
    except ValidationError as e:
        raise ValidationError(f"{where}: {e.field}", e.reason, obj=e.obj) from None


def run(snapshot: Snapshot, scheduler: Scheduler) -> list[WhatIfResult]:
    """Load the snapshot into the scheduler's cache and schedule its pending pods in order.

    The snapshot's ElasticQuotas and every pod (pending or placed) go to the scheduler's quota
    manager first, so each quota's runtime is shared by the demand of the whole snapshot."""
    cache = scheduler.cache
    if snapshot.quotas:
        scheduler.quotas.set_quotas(snapshot.quotas)
        for pod in snapshot.pods:
            scheduler.quotas.update_pod(pod)
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
    devices = {device.node_name: device for device in snapshot.devices}
    return [_result(scheduler.schedule_one(pod), devices) for pod in pending]


def _result(outcome: Outcome, devices: Mapping[str, Device]) -> WhatIfResult:
    if outcome.scheduled:
        device = devices.get(outcome.node or "")
        nvlink = _nvlinked(outcome.annotations, device) if device is not None else None
        return WhatIfResult(outcome.pod, outcome.node, dict(outcome.annotations), nvlink=nvlink)
    diagnosis = outcome.diagnosis
    return WhatIfResult(
        pod=outcome.pod,
        node=None,
        reasons={node: tuple(reasons) for node, reasons in diagnosis.reasons_by_node().items()},
        message=outcome.status.message,
        nearest=tuple(diagnosis.nearest()),
    )


def _nvlinked(annotations: Mapping[str, str], device: Device) -> bool | None:
    """Whether NVLink joins every two of the pod's GPUs; None for fewer than two."""
    try:
        gpus = allocation.from_pod_annotations(annotations).get(DeviceType.GPU, ())
    except AnnotationError:
        return None  # the scheduler wrote it: cannot happen; the table shows it unreadable anyway
    if len(gpus) < 2:
        return None
    return device.nvlinked(g.minor for g in gpus)


@dataclass(frozen=True, slots=True)
class QuotaReport:
    """One ElasticQuota after what-if: quantities per resource, as Kubernetes strings."""

    name: str
    namespace: str
    parent: str
    min: resources.ResourceList
    max: resources.ResourceList
    request: resources.ResourceList
    runtime: resources.ResourceList
    used: resources.ResourceList

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "namespace": self.namespace,
            "parent": self.parent,
            **{key: resources.format_list(getattr(self, key)) for key in ("min", "max", "request", "runtime", "used")},
        }


def quota_reports(snapshot: Snapshot, scheduler: Scheduler) -> list[QuotaReport]:
    """Each of the snapshot's quotas after `run`: request, runtime and used (after placement)."""
    manager = scheduler.quotas
    specs = manager.specs()
    out = []
    for quota in snapshot.quotas:
        name = quota.meta.name
        spec = specs.get(name)
        out.append(
            QuotaReport(
                name=name,
                namespace=quota.meta.namespace,
                parent=spec.parent if spec is not None else "",
                min=quota.min,
                max=quota.max,
                request=manager.request(name),
                runtime=manager.runtime(name),
                used=manager.used(name),
            )
        )
    return out
