"""The demo's placement table: what a person reads after `make run`."""

from __future__ import annotations

import copy

from apiserver.workloads import STRATEGIES
from cli.localcluster.demo import DEMO_PODS, Placement, render
from cli.localcluster.demoworkloads import INFERENCE, TRAINING


def test_the_table_shows_devices_of_placed_pods_and_the_reason_of_the_others() -> None:
    rows = [
        Placement("train-2gpu", "2 whole GPUs", node="sim-2", gpus="0, 1"),
        Placement("mpi-worker", "1 GPU + an RDMA VF", node="sim-1", gpus="2", rdma="mlx5_1 VF 0"),
        Placement("too-big", "16 whole GPUs", reason="0/3 nodes are available: 3 Insufficient gpu devices."),
    ]
    assert render(rows).splitlines() == [
        "POD         ASKS FOR            NODE   GPU (minor)  RDMA",
        "train-2gpu  2 whole GPUs        sim-2  0, 1         -",
        "mpi-worker  1 GPU + an RDMA VF  sim-1  2            mlx5_1 VF 0",
        "too-big     16 whole GPUs       -      pending: 0/3 nodes are available: 3 Insufficient gpu devices.",
    ]


def test_the_demo_has_each_kind_of_request_and_one_pod_that_cannot_fit() -> None:
    assert len({p.name for p in DEMO_PODS}) == len(DEMO_PODS)
    assert [p.name for p in DEMO_PODS if p.unschedulable] == ["too-big", "big-0", "big-1", "big-2", "big-3"]
    manifests = [p.manifest() for p in DEMO_PODS]
    assert all(m["spec"]["schedulerName"] == "tessera-scheduler" for m in manifests)


def test_the_demo_workloads_are_what_the_api_server_accepts() -> None:
    """The Deployment and the Job, defaulted and validated as the embedded API server does."""
    for storage, manifest in (("deployments.apps", INFERENCE), ("jobs.batch", TRAINING)):
        obj = copy.deepcopy(manifest)
        obj["metadata"].update(uid="u", namespace="tessera-demo")
        STRATEGIES[storage].prepare_create(obj)
        assert STRATEGIES[storage].validate(obj, None) == [], storage
    half = INFERENCE["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert half == {"koordinator.sh/gpu-core": "50", "koordinator.sh/gpu-memory-ratio": "50"}
