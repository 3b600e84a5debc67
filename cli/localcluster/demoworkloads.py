"""The workloads of `tessera up --demo`: an inference Deployment and a training Job.

Nobody runs bare pods: inference is a Deployment (here 2 replicas on half a GPU each), training a
Job (here one pod on a whole GPU that the simulated kubelet lets run `TRAIN_SECONDS`, then
completes). They are submitted after the demo's pods are placed, so they take what is left; the
workload controllers (`tessera kube-controller-manager`) make their pods and the scheduler places
those like any other. Their pods join the demo's table (`demo.placements`) under the names their
controllers gave them. Submitting is idempotent (fixed names).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Final

from apis.extension import names
from cli.localcluster.demo import NAMESPACE, DemoPod
from kube import errors
from kube.client import Client
from kube.resources import DEPLOYMENTS, JOBS, PODS

__all__ = ["INFERENCE", "TRAINING", "TRAIN_SECONDS", "demo_pods", "submit", "wait_pods"]

TRAIN_SECONDS: Final = 120
_HALF: Final = {names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50"}
_WHOLE: Final = {names.NVIDIA_GPU: "1"}
_PART_OF: Final = {"app.kubernetes.io/part-of": "tessera-demo"}


def _container(image: str, requests: dict[str, str]) -> dict[str, Any]:
    return {"name": "main", "image": image, "resources": {"requests": requests, "limits": dict(requests)}}


INFERENCE: Final[dict[str, Any]] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "infer", "labels": _PART_OF},
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "infer"}},
        "template": {
            "metadata": {"labels": {"app": "infer", **_PART_OF}},
            "spec": {
                "schedulerName": names.SCHEDULER_NAME,
                "containers": [_container("vllm/vllm-openai:latest", _HALF)],
            },
        },
    },
}
TRAINING: Final[dict[str, Any]] = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "train", "labels": _PART_OF},
    "spec": {
        "backoffLimit": 2,
        "template": {
            "metadata": {
                "labels": _PART_OF,
                "annotations": {names.ANNOTATION_SIMULATED_RUN_SECONDS: str(TRAIN_SECONDS)},
            },
            "spec": {
                "schedulerName": names.SCHEDULER_NAME,
                "restartPolicy": "Never",
                "containers": [_container("pytorch/pytorch:latest", _WHOLE)],
            },
        },
    },
}
_WORKLOADS: Final = (
    (DEPLOYMENTS, INFERENCE),
    (JOBS, TRAINING),
)


def submit(client: Client) -> int:
    """Create the Deployment and the Job where they do not exist yet; the number created."""
    created = 0
    for resource, manifest in _WORKLOADS:
        with contextlib.suppress(errors.AlreadyExists):
            client.resource(resource).create(manifest, namespace=NAMESPACE)
            created += 1
    return created


def _owner_kind(pod: dict[str, Any]) -> str:
    for ref in pod["metadata"].get("ownerReferences") or ():
        if ref.get("controller"):
            return str(ref.get("kind", ""))
    return ""


def _row(pod: dict[str, Any], asks: str, requests: dict[str, str]) -> DemoPod:
    # Taken after the demo's pods, these may find no room left on a small cluster: placed or
    # pending with the scheduler's reason, either is an answer for the table.
    return DemoPod(pod["metadata"]["name"], asks, requests, unschedulable=True)


def demo_pods(client: Client) -> list[DemoPod]:
    """The workloads' pods now (not finished ones), as rows of the demo's table."""
    pods = client.resource(PODS).list(namespace=NAMESPACE, label_selector="app.kubernetes.io/part-of").items
    rows = []
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        kind = _owner_kind(pod)
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if kind == "ReplicaSet":
            rows.append(_row(pod, "deployment infer: half a GPU", _HALF))
        elif kind == "Job":
            rows.append(_row(pod, f"job train: 1 GPU, {TRAIN_SECONDS} s", _WHOLE))
    return rows


def wait_pods(client: Client, timeout: float) -> list[DemoPod]:
    """Until the controllers made the workloads' 3 pods (or `timeout` passed); those there are."""
    deadline = time.monotonic() + timeout
    rows = demo_pods(client)
    while len(rows) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
        rows = demo_pods(client)
    return rows
