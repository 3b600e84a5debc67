"""`tessera explain` for a person: what it prints for each kind of answer, and when no scheduler answers."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

import pytest

from cli import explain
from proto.scheduler.v1 import scheduler_pb2 as pb

INSUFFICIENT = "Insufficient gpu devices"


def pending() -> pb.ExplainResponse:
    return pb.ExplainResponse(
        pod="ml/train",
        state="pending",
        pending=True,
        queue="unschedulable",
        attempts=3,
        profile="tessera-scheduler",
        last_attempt="0/3 nodes are available: 2 Insufficient gpu devices, 1 node(s) had untolerated taint.",
        message="0/3 nodes are available: 2 Insufficient gpu devices, 1 node(s) had untolerated taint.",
        nodes=[
            pb.NodeReasons(
                node="n1", reasons=[pb.PluginReason(plugin="DeviceShare", reason="Insufficient gpu devices")]
            ),
            pb.NodeReasons(
                node="n2",
                reasons=[
                    pb.PluginReason(plugin="TaintToleration", reason="node(s) had untolerated taint"),
                    pb.PluginReason(plugin="DeviceShare", reason="Insufficient gpu devices"),
                ],
            ),
        ],
        nearest=[pb.NearMiss(node="n1", missing=["GPU 3 has 40 gpu-core free, needs 50"])],
        waiting_for=["DeviceShare", "TaintToleration"],
    )


def test_a_pending_pod_is_explained_by_plugin_by_node_and_nearest_miss() -> None:
    text = explain.render(pending())
    assert text.splitlines() == [
        "Pod ml/train: pending after 3 attempts, unschedulable, waiting for a cluster change"
        " (profile tessera-scheduler)",
        "Last attempt: 0/3 nodes are available: 2 Insufficient gpu devices, 1 node(s) had untolerated taint.",
        "Retried when a cluster change concerns: DeviceShare, TaintToleration",
        "Now: 0/3 nodes are available: 2 Insufficient gpu devices, 1 node(s) had untolerated taint.",
        "Reasons, by plugin:",
        "  DeviceShare      2 nodes: Insufficient gpu devices",
        "  TaintToleration  1 node: node(s) had untolerated taint",
        "Nodes:",
        "  n1  DeviceShare: Insufficient gpu devices",
        "  n2  TaintToleration: node(s) had untolerated taint; DeviceShare: Insufficient gpu devices",
        "Nearest nodes, and what they lack:",
        "  n1: GPU 3 has 40 gpu-core free, needs 50",
    ]


def test_an_invalid_request_says_to_fix_the_pod() -> None:
    response = pb.ExplainResponse(
        pod="ml/bad",
        state="pending",
        queue="unschedulable",
        attempts=1,
        message="0/3 nodes are available: invalid device request: gpu-core=150 must be <= 100.",
        rejected=pb.PluginReason(plugin="DeviceShare", reason="invalid device request: gpu-core=150 must be <= 100"),
    )
    lines = explain.render(response).splitlines()
    assert (
        lines[1]
        == "Fix the pod: invalid device request: gpu-core=150 must be <= 100 (retried only when the pod changes)"
    )
    assert lines[-1] == "  DeviceShare: invalid device request: gpu-core=150 must be <= 100 (every node)"
    assert "Nodes:" not in lines
    assert not any(line.startswith("Retried when a cluster change") for line in lines)


def test_bound_and_other_states() -> None:
    bound = pb.ExplainResponse(
        pod="ml/a",
        state="bound",
        node="n1",
        devices=[pb.AllocatedDevice(type="gpu", minor=3, resources={"koordinator.sh/gpu-core": "50"})],
    )
    assert explain.render(bound).splitlines() == ["Pod ml/a: bound to n1", "  gpu 3: gpu-core=50"]
    other = pb.ExplainResponse(pod="ml/b", state="not-ours", detail="spec.schedulerName is 'default-scheduler'")
    assert explain.render(other).splitlines() == [
        "Pod ml/b: not scheduled by this scheduler",
        "Note: spec.schedulerName is 'default-scheduler'",
    ]


def test_no_scheduler_at_the_address_says_how_to_point_at_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    explain.add_arguments(parser)
    args = parser.parse_args(["train", "-n", "ml", "--scheduler", f"unix://{tmp_path}/none.sock", "--timeout", "5"])
    assert explain.run(args) == 1
    err = capsys.readouterr().err
    assert "did not answer" in err and "TESSERA_SCHEDULER_ADDRESS" in err


@pytest.mark.parametrize("package", ["scheduler.service"])
def test_all_is_sorted_and_complete(package: str) -> None:
    mod = importlib.import_module(package)
    assert list(mod.__all__) == sorted(mod.__all__, key=lambda n: (not n.isupper(), n))
    for name in mod.__all__:
        assert hasattr(mod, name), name
