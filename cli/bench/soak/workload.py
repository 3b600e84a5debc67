"""The soak's workload: a mix of pod shapes created at a steady rate, deleted when they have run.

Shapes are a list (`SHAPES`) with weights: fractional and whole-GPU pods, GPU + RDMA pods on one
PCIe switch, Strict gangs, and pods in namespaces whose ElasticQuota (`QUOTAS`) holds them back
when full. The workload keeps the GPUs its pods ask for below `target_load` of the cluster, so
pods that are not quota-limited always fit somewhere (the "no pod that fits stays pending"
invariant has something to hold). A bound pod lives for a random lifetime, then is deleted (a
gang all at once); a quota-limited pod still pending after that lifetime is deleted too.

Every create the API server acknowledges is recorded with its uid, every delete before it is
sent (`observe.Record`), which is what the object-lost invariant checks against. A create that
fails (the API server was just killed) may have happened anyway: it is not counted as
acknowledged, and the item (a gang short of a member can never be whole) is deleted at once; a
delete is retried until the pod is gone.

To add a shape (reservations, Deployments and Jobs once the API server has them): an entry in
`SHAPES` with what it asks for, or a new `Shape` field and its handling in `_create`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from apis.extension import names
from cli.bench.soak.invariants.liveness import MAY_WAIT
from cli.bench.soak.observe import Record
from cli.bench.soak.settings import SoakSettings
from cli.bench.soak.tolerations import lost_node_tolerations
from cli.launchers.scheduler import pod_manifest
from kube import errors, resources
from kube.client import Client

__all__ = ["HALF", "NAMESPACE", "PART_OF", "QUOTAS", "SHAPES", "Shape", "Workload"]

log = logging.getLogger(__name__)

NAMESPACE: Final = "soak"
PART_OF: Final = {"app.kubernetes.io/part-of": "tessera-soak"}
_JOINT_GPU_RDMA: Final = json.dumps({"deviceTypes": ["gpu", "rdma"], "requiredScope": "SamePCIe"})
HALF: Final = {names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50"}
#: What every pod asks besides devices: little, so CPU and memory never decide a placement.
_BASE: Final = {names.CPU: "10m", names.MEMORY: "16Mi"}


@dataclass(frozen=True, slots=True)
class Shape:
    name: str
    weight: int
    requests: Mapping[str, str]
    #: GPUs one pod of this shape occupies (a share counts as its fraction).
    gpus: float
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: Gang sizes (min, max), all Strict with min-available = size; (0, 0): not a gang.
    gang: tuple[int, int] = (0, 0)
    #: Created in a namespace an ElasticQuota limits (and labelled MAY_WAIT).
    quota: bool = False


SHAPES: Final = (
    Shape("quarter", 20, {names.GPU_CORE: "25", names.GPU_MEMORY_RATIO: "25"}, 0.25),
    Shape("half", 20, HALF, 0.5),
    Shape("memory", 5, {names.GPU_CORE: "25", names.GPU_MEMORY: "8Gi"}, 0.25),
    Shape("whole", 15, {names.NVIDIA_GPU: "1"}, 1.0),
    Shape("pair", 5, {names.NVIDIA_GPU: "2"}, 2.0),
    Shape(
        "gpu-rdma",
        8,
        {names.NVIDIA_GPU: "1", names.RDMA: "1"},
        1.0,
        {names.ANNOTATION_DEVICE_JOINT_ALLOCATE: _JOINT_GPU_RDMA},
    ),
    Shape("gang", 7, {names.NVIDIA_GPU: "1"}, 1.0, gang=(2, 4)),
    Shape("quota", 15, HALF, 0.5, quota=True),
    Shape("cpu", 5, {}, 0.0),
)

#: Namespaces with an ElasticQuota of the same name (a quota named after the namespace is its
#: pods' quota): each may use at most two GPUs' worth, so its pods queue behind the quota.
QUOTAS: Final = {
    "soak-team-a": {names.GPU_CORE: "200", names.GPU_MEMORY_RATIO: "200"},
    "soak-team-b": {names.GPU_CORE: "100", names.GPU_MEMORY_RATIO: "100"},
}


@dataclass(slots=True)
class _Item:
    """One pod, or one gang's pods, created together and deleted together."""

    keys: list[str]
    gpus: float
    may_wait: bool
    lifetime_s: float
    created: float
    deleting: bool = False


class Workload:
    """Creates and deletes the soak's pods; `run` until `stop` (from its own thread)."""

    def __init__(self, client: Client, record: Record, settings: SoakSettings, *, total_gpus: float) -> None:
        self._client = client
        self._pods = client.resource(resources.PODS)
        self._record = record
        self._settings = settings
        self._rng = random.Random(f"workload-{settings.seed}")
        self._budget = settings.target_load * total_gpus
        self._items: list[_Item] = []
        self._serial = 0
        self._stop = threading.Event()
        self.created = 0
        self.gangs = 0
        self.deleted = 0
        self.create_failures = 0
        self.by_shape: dict[str, int] = {shape.name: 0 for shape in SHAPES}

    def setup(self) -> None:
        """The namespaces and the quotas (idempotent)."""
        for namespace in (NAMESPACE, *QUOTAS):
            with contextlib.suppress(errors.AlreadyExists):
                self._client.resource(resources.NAMESPACES).create({"metadata": {"name": namespace}})
        for namespace, limit in QUOTAS.items():
            quota = {
                "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                "kind": "ElasticQuota",
                "metadata": {"name": namespace, "namespace": namespace, "labels": dict(PART_OF)},
                "spec": {"min": dict(limit), "max": dict(limit)},
            }
            with contextlib.suppress(errors.AlreadyExists):
                self._client.resource(names.ELASTIC_QUOTAS).create(quota, namespace=namespace)

    def run(self) -> None:
        interval = 1.0 / self._settings.rate
        while not self._stop.wait(interval):
            self.step(creating=True)

    def stop(self) -> None:
        self._stop.set()

    def step(self, *, creating: bool) -> None:
        """Delete what has run its lifetime; create one shape if the budget allows."""
        now = time.time()
        for item in [i for i in self._items if self._expired(i, now)]:
            self._delete(item)
        if creating and self._in_use() < self._budget:
            self._create(self._rng.choices(SHAPES, weights=[s.weight for s in SHAPES])[0])

    # --- lifetimes ---------------------------------------------------------------------------------
    def _in_use(self) -> float:
        return sum(i.gpus for i in self._items if not i.may_wait)

    def _expired(self, item: _Item, now: float) -> bool:
        if item.deleting:
            return True
        bound = [self._record.bound_at.get(key) for key in item.keys]
        if all(at is not None for at in bound):
            return now >= max(at for at in bound if at is not None) + item.lifetime_s
        return item.may_wait and now >= item.created + 2 * item.lifetime_s

    def _delete(self, item: _Item) -> None:
        item.deleting = True
        remaining = []
        for key in item.keys:
            namespace, name = key.split("/", 1)
            self._record.deleting(key)
            try:
                self._pods.delete(name, namespace=namespace)
            except errors.NotFound:  # a create that failed, or a delete that was done but not answered
                continue
            except errors.APIError as e:
                log.info("Delete failed; retrying later", extra={"pod": key, "error": str(e)})
                remaining.append(key)
                continue
            self.deleted += 1
        item.keys = remaining
        if not remaining:
            self._items.remove(item)

    # --- creating ------------------------------------------------------------------------------------
    def _create(self, shape: Shape) -> None:
        self._serial += 1
        low, high = shape.gang
        size = self._rng.randint(low, high) if high else 1
        namespace = self._rng.choice(sorted(QUOTAS)) if shape.quota else NAMESPACE
        base = f"{shape.name}-{self._serial}"
        annotations = dict(shape.annotations)
        if size > 1 or high:
            self.gangs += 1
            annotations |= {
                names.ANNOTATION_GANG_NAME: base,
                names.ANNOTATION_GANG_MIN_AVAILABLE: str(size),
                names.ANNOTATION_GANG_WAITING_TIME: f"{self._settings.gang_waiting_s:g}s",
            }
        labels = {**PART_OF, "soak.tessera.dev/shape": shape.name} | ({MAY_WAIT: "true"} if shape.quota else {})
        keys: list[str] = []
        item = _Item(keys, shape.gpus * size, shape.quota, self._rng.uniform(*self._settings.lifetime_s), time.time())
        self._items.append(item)
        for member in range(size):
            name = f"{base}-{member}" if size > 1 else base
            manifest = pod_manifest(
                name, {**_BASE, **shape.requests}, namespace=namespace, annotations=annotations, labels=labels
            )
            manifest["spec"]["tolerations"] = lost_node_tolerations(self._settings.eviction_toleration_s)
            key = f"{namespace}/{name}"
            keys.append(key)
            self._record.sending_create(key, may_wait=shape.quota)
            try:
                created = self._pods.create(manifest, namespace=namespace)
            except errors.APIError as e:
                log.info("Create failed", extra={"pod": key, "error": str(e)})
                self.create_failures += 1
                item.deleting = True  # it may exist anyway; a gang short of a member is never whole
                return
            self._record.acknowledge(key, created["metadata"]["uid"])
            self.created += 1
            self.by_shape[shape.name] += 1
