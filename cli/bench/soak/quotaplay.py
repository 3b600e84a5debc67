"""The soak's quota family: a quota tree whose teams borrow from each other, pods asking for GPUs in
every spelling quotas accept, inside the tree and outside it, and random edits of the quotas.

The tree: `soak-org` (is-parent, min = max = a sixth of the cluster's GPUs) over `soak-lend` and
`soak-borrow`, each the quota of the namespace of its name, each guaranteed half of it and allowed
all of it. The whole tree is written in one spelling, drawn from the seed (whole GPUs,
`koordinator.sh/gpu` percent, gpu-core with gpu-memory-ratio, the deprecated names): Koordinator's
webhook compares a child's keys with its parent's as written, so a tree mixes no spellings. Every
`interval_s` on average a pod asking for a GPU or a share of one, in a spelling drawn from
`SPELLINGS` (whole GPUs, `koordinator.sh/gpu` percent, gpu-core with the memory as a ratio or in
bytes, memory alone, `gpu.shared`, Koordinator's deprecated `kubernetes.io/*` names), goes to one of
the two teams (labelled `MAY_WAIT`: its quota may hold it back) or outside every quota (the soak's
namespace, at most `OUTSIDE_GPUS` of them at once: they must fit like any other pod). The teams take
turns (`PHASE_S` each): while it is `soak-borrow`'s turn its pods (living 60–120 s once bound) take
the lender's idle share; then `soak-lend`'s pods (15–60 s) come back for their min, and the
borrower, over its runtime past the controller's grace period, is reclaimed — which is what the
quota invariant `quota-reclaim-without-overuse` judges. A pending team pod goes after twice its
lifetime. Every `edit_interval_s` on average one team quota is edited: a new min (within the
parent's) and a new max.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from apis.extension import names
from apis.extension.quotacount import counted
from apis.k8s.resources import parse_list
from cli.bench.soak.invariants.liveness import MAY_WAIT
from cli.bench.soak.observe import Record
from cli.bench.soak.tolerations import lost_node_tolerations
from cli.bench.soak.workload import NAMESPACE, PART_OF
from cli.launchers.scheduler import pod_manifest
from kube import errors, resources
from kube.client import Client

__all__ = ["BORROW", "LEND", "OUTSIDE_GPUS", "PARENT", "PHASE_S", "SPELLINGS", "QuotaPlay"]

log = logging.getLogger(__name__)

PARENT: Final = "soak-org"
LEND: Final = "soak-lend"
BORROW: Final = "soak-borrow"
#: GPUs' worth the pods outside every quota may hold at once.
OUTSIDE_GPUS: Final = 1.0
#: How long each team's turn lasts (seconds).
PHASE_S: Final = 50.0
#: How long a team's pods live once bound: the borrower's outlast the controller's grace period.
_LIFETIMES: Final = {BORROW: (60.0, 120.0), LEND: (15.0, 60.0), "": (15.0, 60.0)}
_BASE: Final = {names.CPU: "10m", names.MEMORY: "16Mi"}
#: Every way a pod asks for GPUs, with the GPUs' worth it takes (memory in bytes: of an 80 GiB GPU).
SPELLINGS: Final[tuple[tuple[dict[str, str], float], ...]] = (
    ({names.NVIDIA_GPU: "1"}, 1.0),
    ({names.KOORD_GPU: "100"}, 1.0),
    ({names.KOORD_GPU: "50"}, 0.5),
    ({names.DEPRECATED_KOORD_GPU: "50"}, 0.5),
    ({names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50"}, 0.5),
    ({names.GPU_CORE: "25", names.GPU_MEMORY: "20Gi"}, 0.25),
    ({names.GPU_MEMORY: "8Gi"}, 0.1),
    ({names.GPU_MEMORY_RATIO: "50"}, 0.5),
    ({names.GPU_CORE: "100", names.GPU_MEMORY_RATIO: "100", names.GPU_SHARED: "2"}, 1.0),
    ({names.DEPRECATED_GPU_CORE: "50", names.DEPRECATED_GPU_MEMORY_RATIO: "50"}, 0.5),
)
#: One amount of whole GPUs in each spelling a quota tree may be written in.
_TREE_SPELLINGS: Final[tuple[Callable[[int], dict[str, str]], ...]] = (
    lambda gpus: {names.NVIDIA_GPU: str(gpus)},
    lambda gpus: {names.KOORD_GPU: str(100 * gpus)},
    lambda gpus: {names.GPU_CORE: str(100 * gpus), names.GPU_MEMORY_RATIO: str(100 * gpus)},
    lambda gpus: {names.DEPRECATED_GPU_CORE: str(100 * gpus), names.DEPRECATED_GPU_MEMORY_RATIO: str(100 * gpus)},
)


def _whole_gpus(amounts: object) -> int:
    """Whole GPUs in a quota's min or max, whatever its spelling."""
    return counted(parse_list(amounts)).get(names.GPU_CORE, 0) // 100


@dataclass(slots=True)
class _Pod:
    key: str
    gpus: float
    outside: bool
    lifetime_s: float
    created: float


class QuotaPlay:
    """See the module docstring; `run` until `stop` (from its own thread)."""

    def __init__(
        self,
        client: Client,
        record: Record,
        *,
        total_gpus: int,
        seed: int,
        toleration_s: float,
        interval_s: float = 2.0,
        edit_interval_s: float = 20.0,
    ) -> None:
        self._client = client
        self._pods_api = client.resource(resources.PODS)
        self._quotas_api = client.resource(names.ELASTIC_QUOTAS)
        self._record = record
        self._rng = random.Random(f"quotas-{seed}")
        self._toleration_s = toleration_s
        self._interval_s = interval_s
        self._edit_interval_s = edit_interval_s
        self.gpus = max(2, total_gpus // 6)
        self._pods: list[_Pod] = []
        self._serial = 0
        self._began = time.time()
        self._next_edit = self._began + edit_interval_s
        self._stop = threading.Event()
        self.created = 0
        self.created_outside = 0
        self.edits = 0
        self.by_spelling: dict[str, int] = {}
        self._spell = self._rng.choice(_TREE_SPELLINGS)

    # --- the tree ----------------------------------------------------------------------------------
    def setup(self) -> None:
        """The namespaces and the tree (idempotent)."""
        for namespace in (LEND, BORROW):
            with contextlib.suppress(errors.AlreadyExists):
                self._client.resource(resources.NAMESPACES).create({"metadata": {"name": namespace}})
        whole, half = self._spell(self.gpus), self._spell(self.gpus // 2)
        self._create_quota(PARENT, NAMESPACE, whole, whole, {names.LABEL_QUOTA_IS_PARENT: "true"})
        for team in (LEND, BORROW):
            self._create_quota(team, team, half, whole, {names.LABEL_QUOTA_PARENT: PARENT})

    def _create_quota(
        self, name: str, namespace: str, low: dict[str, str], high: dict[str, str], labels: dict[str, str]
    ) -> None:
        quota = {
            "apiVersion": names.ELASTIC_QUOTAS.api_version,
            "kind": names.ELASTIC_QUOTAS.kind,
            "metadata": {"name": name, "namespace": namespace, "labels": {**PART_OF, **labels}},
            "spec": {"min": low, "max": high},
        }
        with contextlib.suppress(errors.AlreadyExists):
            self._quotas_api.create(quota, namespace=namespace)

    def _edit(self) -> None:
        """One team's min and max anew (the sibling's min is kept, so the children's mins stay
        within the parent's)."""
        team = self._rng.choice((LEND, BORROW))
        sibling = BORROW if team == LEND else LEND
        try:
            other = self._quotas_api.get(sibling, namespace=sibling)
            taken = _whole_gpus(other["spec"].get("min", {}))
            low = self._rng.randint(0, max(0, self.gpus - taken))
            high = self._rng.randint(max(low, 1), self.gpus)
            spelled = self._spell(high)
            patch = {"spec": {"min": self._spell(low), "max": spelled}}
            self._quotas_api.patch(team, patch, namespace=team)
            self.edits += 1
            log.info(
                "Quota edited",
                extra={"quota": team, "min_gpus": low, "max": ",".join(f"{k}={v}" for k, v in spelled.items())},
            )
        except (errors.APIError, ValueError) as e:  # killed API server, or a refusal: try again later
            log.info("Quota edit failed", extra={"quota": team, "error": str(e)})

    # --- the pods ------------------------------------------------------------------------------------
    def run(self) -> None:
        while not self._stop.wait(self._rng.uniform(0.5, 1.5) * self._interval_s):
            self.step(creating=True)

    def stop(self) -> None:
        self._stop.set()

    def step(self, *, creating: bool) -> None:
        now = time.time()
        for pod in [p for p in self._pods if self._expired(p, now)]:
            self._delete(pod)
        if creating and now >= self._next_edit:
            self._next_edit = now + self._rng.uniform(0.5, 1.5) * self._edit_interval_s
            self._edit()
        if creating:
            self._create()

    def _expired(self, pod: _Pod, now: float) -> bool:
        bound = self._record.bound_at.get(pod.key)
        if bound is not None:
            return now >= bound + pod.lifetime_s
        return now >= pod.created + 2 * pod.lifetime_s

    def _delete(self, pod: _Pod) -> None:
        namespace, name = pod.key.split("/", 1)
        self._record.deleting(pod.key)
        try:
            self._pods_api.delete(name, namespace=namespace)
        except errors.NotFound:  # reclaim evicted it, or its create failed
            pass
        except errors.APIError as e:
            log.info("Delete failed; retrying later", extra={"pod": pod.key, "error": str(e)})
            return
        self._pods.remove(pod)

    def _create(self) -> None:
        asks, gpus = self._rng.choice(SPELLINGS)
        outside_in_use = sum(p.gpus for p in self._pods if p.outside)
        team = BORROW if int((time.time() - self._began) / PHASE_S) % 2 == 0 else LEND
        place = self._rng.choice((team, team, NAMESPACE))
        if place == NAMESPACE and outside_in_use + gpus > OUTSIDE_GPUS:
            place = team
        outside = place == NAMESPACE
        self._serial += 1
        name = f"spelled-{self._serial}"
        labels: dict[str, Any] = {**PART_OF, "soak.tessera.dev/shape": "quota-spelling"}
        if not outside:
            labels[MAY_WAIT] = "true"
        manifest = pod_manifest(name, {**_BASE, **asks}, namespace=place, labels=labels)
        manifest["spec"]["tolerations"] = lost_node_tolerations(self._toleration_s)
        key = f"{place}/{name}"
        self._record.sending_create(key, may_wait=not outside)
        pod = _Pod(key, gpus, outside, self._rng.uniform(*_LIFETIMES[place if not outside else ""]), time.time())
        self._pods.append(pod)
        try:
            created = self._pods_api.create(manifest, namespace=place)
        except errors.APIError as e:
            log.info("Create failed", extra={"pod": key, "error": str(e)})
            return
        self._record.acknowledge(key, created["metadata"]["uid"])
        self.created += 1
        self.created_outside += outside
        spelled = ",".join(sorted(asks))
        self.by_spelling[spelled] = self.by_spelling.get(spelled, 0) + 1
