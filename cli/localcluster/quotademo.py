"""`tessera up --demo`, elastic quota: two teams share 6 GPUs, and one borrows the other's.

The ElasticQuota `gpu-teams` (6 GPUs: min = max = `koordinator.sh/gpu-core: 600`) has two
children, `team-a` and `team-b`, each guaranteed 3 GPUs (min 300) and allowed all 6 (max 600),
each the quota of the namespace of its name. Team B submits 5 one-GPU pods: team A is idle, so
B's runtime is 5 GPUs and all 5 bind — 2 of them on A's guarantee. When team A's pods arrive
(docs/examples/quota-team-a.yaml, the steps in docs/user/quota.md), A's runtime rises to its
min, B's falls to 3 GPUs, and once B has stayed above it for the controller's grace period the
controller evicts B's 2 newest pods and A's pods bind.

The sizes leave room for the rest of the demo: the root's total is the cluster's GPUs less what
pods outside every quota use (the demo's other pods, its Deployment and Job: 9 of 16 GPUs while
the Job runs), and must hold gpu-teams' min for the teams to get their guarantees whole.

Submitting is idempotent (fixed names), as for the rest of the demo.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Final

from apis.crds.elasticquota import ElasticQuota
from apis.extension import names
from apis.k8s.core import Pod
from cli import quota as quota_cli
from cli.launchers.scheduler import pod_manifest
from cli.localcluster.demo import NAMESPACE, Watched
from kube import errors
from kube.client import Client
from kube.informer import Informer
from kube.resources import NAMESPACES, PODS

__all__ = ["BORROWERS", "PARENT", "TEAM_A", "TEAM_B", "render", "submit", "wait_written"]

PARENT: Final = "gpu-teams"
TEAM_A: Final = "team-a"
TEAM_B: Final = "team-b"
#: Team B's one-GPU pods: 3 on its own min, 2 borrowed from team A's.
BORROWERS: Final = 5
_GPUS: Final = {PARENT: (600, 600), TEAM_A: (300, 600), TEAM_B: (300, 600)}
_PART_OF: Final = {"app.kubernetes.io/part-of": "tessera-demo"}
_BORROWER: Final = "b-train-"


def _quota(name: str, namespace: str) -> dict[str, Any]:
    low, high = _GPUS[name]
    labels = {**_PART_OF}
    if name == PARENT:
        labels[names.LABEL_QUOTA_IS_PARENT] = "true"
    else:
        labels[names.LABEL_QUOTA_PARENT] = PARENT
    return {
        "apiVersion": names.ELASTIC_QUOTAS.api_version,
        "kind": names.ELASTIC_QUOTAS.kind,
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"min": {names.GPU_CORE: str(low)}, "max": {names.GPU_CORE: str(high)}},
    }


def submit(client: Client) -> int:
    """The teams' namespaces, their quotas and team B's pods (those missing); the pods created."""
    for namespace in (NAMESPACE, TEAM_A, TEAM_B):
        manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        with contextlib.suppress(errors.AlreadyExists):
            client.resource(NAMESPACES).create(manifest)
    for name, namespace in ((PARENT, NAMESPACE), (TEAM_A, TEAM_A), (TEAM_B, TEAM_B)):
        with contextlib.suppress(errors.AlreadyExists):
            client.resource(names.ELASTIC_QUOTAS).create(_quota(name, namespace), namespace=namespace)
    created = 0
    for i in range(BORROWERS):
        manifest = pod_manifest(f"{_BORROWER}{i}", {names.NVIDIA_GPU: "1"}, namespace=TEAM_B, labels=_PART_OF)
        try:
            client.resource(PODS).create(manifest, namespace=TEAM_B)
            created += 1
        except errors.AlreadyExists:
            pass
    return created


def wait_written(client: Client, timeout: float) -> dict[str, str]:
    """Until team B's pods are each bound or refused with a reason (the nodes may be too few for
    all 6), and then the controller has written every demo quota's runtime and team B's used
    counts every bound pod. What is still missing when `timeout` passes (empty: all there)."""
    deadline = time.monotonic() + timeout
    bound: list[int] = [0]

    def unplaced(pods: list[Pod]) -> dict[str, str]:
        mine = [p for p in pods if p.name.startswith(_BORROWER)]
        bound[0] = sum(1 for p in mine if p.node_name)
        out = {p.name: "not tried yet" for p in mine if not (p.node_name or p.pending_message)}
        if len(mine) < BORROWERS:
            out[TEAM_B] = f"{len(mine)} of its {BORROWERS} pods seen"
        return out

    missing = Watched(Informer(client, PODS, parse=Pod.from_dict, namespace=TEAM_B)).wait_until(unplaced, timeout)
    if missing:
        return missing

    def unwritten(quotas: list[ElasticQuota]) -> dict[str, str]:
        by_name = {q.meta.name: q for q in quotas}
        out = {}
        for name in _GPUS:
            quota = by_name.get(name)
            if quota is None:
                out[name] = "not seen yet"
            elif names.ANNOTATION_QUOTA_RUNTIME not in quota.meta.annotations:
                out[name] = "no runtime written yet (the controller writes it)"
        team_b = by_name.get(TEAM_B)
        used, wanted = (team_b.used.get(names.GPU_CORE, 0) if team_b else 0), 100 * bound[0]
        if team_b is not None and TEAM_B not in out and used != wanted:
            out[TEAM_B] = f"status.used shows {used} {names.GPU_CORE}, its bound pods use {wanted}"
        return out

    left = max(0.0, deadline - time.monotonic())
    return Watched(Informer(client, names.ELASTIC_QUOTAS, parse=ElasticQuota.from_dict)).wait_until(unwritten, left)


def render(client: Client) -> str:
    """`tessera quota` for the demo's quotas."""
    items = client.resource(names.ELASTIC_QUOTAS).list().items
    quotas = [ElasticQuota.from_dict(raw) for raw in items if raw["metadata"]["name"] in _GPUS]
    return quota_cli.render_table(*quota_cli.rows_of(quotas))
