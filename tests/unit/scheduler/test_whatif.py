"""`tessera what-if`: snapshots in, placements and reasons out — through the real command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from apis.errors import ValidationError
from cli.main import main
from scheduler import whatif

SNAPSHOT = """
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: node-a}
  status: {allocatable: {cpu: "64", memory: 256Gi, pods: "110"}}
- apiVersion: v1
  kind: Node
  metadata: {name: node-b}
  spec: {taints: [{key: dedicated, value: infra, effect: NoSchedule}]}
  status: {allocatable: {cpu: "64", memory: 256Gi, pods: "110"}}
- apiVersion: v1
  kind: Namespace
  metadata: {name: ml}
---
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Device
metadata: {name: node-a}
spec:
  devices:
  - type: gpu
    id: GPU-a0
    minor: 0
    health: true
    resources: {koordinator.sh/gpu-core: "100", koordinator.sh/gpu-memory: 80Gi, koordinator.sh/gpu-memory-ratio: "100"}
    topology: {socketID: 0, nodeID: 0, pcieID: "pci0000:10"}
  - type: gpu
    id: GPU-a1
    minor: 1
    health: true
    resources: {koordinator.sh/gpu-core: "100", koordinator.sh/gpu-memory: 80Gi, koordinator.sh/gpu-memory-ratio: "100"}
    topology: {socketID: 0, nodeID: 0, pcieID: "pci0000:10"}
---
apiVersion: v1
kind: Pod
metadata:
  name: running
  namespace: ml
  annotations:
    scheduling.koordinator.sh/device-allocated: >-
      {"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"60",
      "koordinator.sh/gpu-memory":"48Gi","koordinator.sh/gpu-memory-ratio":"60"}}]}
spec:
  nodeName: node-a
  containers: [{name: c, resources: {limits: {koordinator.sh/gpu-core: "60", koordinator.sh/gpu-memory-ratio: "60"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: half, namespace: ml}
spec:
  schedulerName: tessera-scheduler
  containers: [{name: c, resources: {limits: {koordinator.sh/gpu-core: "50", koordinator.sh/gpu-memory-ratio: "50"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: too-big, namespace: ml}
spec:
  schedulerName: tessera-scheduler
  containers: [{name: c, resources: {limits: {koordinator.sh/gpu-core: "60", koordinator.sh/gpu-memory-ratio: "60"}}}]
"""


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    path = tmp_path / "snapshot.yaml"
    path.write_text(SNAPSHOT)
    return path


def test_json_output_places_pods_in_order_and_explains_failures(
    snapshot: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["what-if", "-f", str(snapshot), "-o", "json"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert [(r["pod"], r["node"]) for r in results] == [("ml/half", "node-a"), ("ml/too-big", None)]
    allocated = json.loads(results[0]["annotations"]["scheduling.koordinator.sh/device-allocated"])
    assert [(g["minor"], g["resources"]["koordinator.sh/gpu-core"]) for g in allocated["gpu"]] == [(1, "50")]
    assert results[1]["reasons"] == {
        "node-a": ["Insufficient gpu devices"],
        "node-b": ["node(s) had untolerated taint {dedicated: infra}"],
    }
    assert results[1]["nearest"] == {
        "node-a": [
            "GPU 1 has 50 gpu-core free, needs 60",
            "GPU 1 has 50 gpu-memory-ratio free, needs 60",
            "GPU 1 has 40Gi gpu-memory free, needs 48Gi",
        ]
    }


def test_table_output_says_why_in_words(snapshot: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["what-if", "-f", str(snapshot)]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].split() == ["POD", "NODE", "DEVICES", "/", "REASON"]
    assert "ml/half" in lines[1] and "gpu 1 [gpu-core=50 gpu-memory=40Gi gpu-memory-ratio=50]" in lines[1]
    assert "0/2 nodes are available: 1 Insufficient gpu devices, 1 node(s) had untolerated taint" in lines[2]
    assert lines[3].strip() == "1 node: Insufficient gpu devices"
    assert "ignoring objects of kind Namespace" in captured.err


def test_scoring_flag_packs(snapshot: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["what-if", "-f", str(snapshot), "--scoring", "MostAllocated", "-o", "json"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    half = json.loads(results[0]["annotations"]["scheduling.koordinator.sh/device-allocated"])
    assert half["gpu"][0]["minor"] == 1  # GPU 0 has only 40 left
    assert results[1]["node"] is None


SLIVER = """
apiVersion: v1
kind: Pod
metadata: {name: sliver, namespace: ml}
spec:
  schedulerName: tessera-scheduler
  containers: [{name: c, resources: {limits: {koordinator.sh/gpu-core: "40", koordinator.sh/gpu-memory-ratio: "40"}}}]
"""


@pytest.mark.parametrize(("scoring", "minor"), [(None, 1), ("FGD", 0)], ids=["LeastAllocated", "FGD"])
def test_fgd_fills_the_gap_no_other_pod_could_use(
    tmp_path: Path, snapshot: Path, capsys: pytest.CaptureFixture[str], scoring: str | None, minor: int
) -> None:
    # After `half`, GPU 0 has 40 free and GPU 1 50. Spreading puts the 40 % sliver on GPU 1, where
    # it leaves 10 that fits nothing; against the snapshot's own shapes (60, 50, 60, 40) FGD sees
    # that GPU 0's 40 is usable by the sliver alone and takes it.
    sliver = tmp_path / "sliver.yaml"
    sliver.write_text(SLIVER)
    flags = ["--scoring", scoring] if scoring else []
    assert main(["what-if", "-f", str(snapshot), "-f", str(sliver), "-o", "json", *flags]) == 0
    results = {r["pod"]: r for r in json.loads(capsys.readouterr().out)["results"]}
    allocated = json.loads(results["ml/sliver"]["annotations"]["scheduling.koordinator.sh/device-allocated"])
    assert [g["minor"] for g in allocated["gpu"]] == [minor]


def test_config_file_and_bad_input(tmp_path: Path, snapshot: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("profiles: [{plugins: {multiPoint: {disabled: [{name: TaintToleration}]}}}]\n")
    assert main(["what-if", "-f", str(snapshot), "--config", str(config), "-o", "json"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    # Without TaintToleration, node-b is rejected for what it lacks: it has no Device CR.
    assert results[1]["reasons"] == {"node-a": ["Insufficient gpu devices"], "node-b": ["Insufficient gpu devices"]}
    config.write_text("profiles: [{plugins: {multiPoint: {enabled: [{name: Nope}]}}}]\n")
    assert main(["what-if", "-f", str(snapshot), "--config", str(config)]) == 1
    assert "plugin 'Nope' is not registered" in capsys.readouterr().err
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        "kind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: c, resources: {limits: {cpu: lots}}}]}\n"
    )
    assert main(["what-if", "-f", str(broken)]) == 1
    assert "does not match the quantity grammar" in capsys.readouterr().err


def test_parse_objects_names_the_broken_document() -> None:
    docs = list(yaml.safe_load_all("kind: Node\nmetadata: {name: a}\n---\nkind: Device\nmetadata: {}\n"))
    with pytest.raises(ValidationError, match=r"snapshot\[1\]"):
        whatif.parse_objects(docs)


def test_a_pod_listed_twice_is_scheduled_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "twice.yaml"
    pod = (
        "kind: Pod\nmetadata: {name: twin, namespace: ml}\n"
        "spec: {schedulerName: tessera-scheduler, containers: [{name: c}]}\n"
    )
    node = "kind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: '1', memory: 1Gi}}\n"
    path.write_text("---\n".join([node, pod, pod]))
    assert main(["what-if", "-f", str(path), "-o", "json"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert [r["node"] for r in results] == ["n", None]
    assert results[1]["message"] == "pod ml/twin is already scheduled or running"


UNNAMED = """
apiVersion: v1
kind: Pod
metadata: {name: no-scheduler-name, namespace: ml}
spec:
  containers: [{name: c, resources: {limits: {koordinator.sh/gpu-core: "10", koordinator.sh/gpu-memory-ratio: "10"}}}]
"""


def test_a_pod_for_a_scheduler_no_profile_serves_is_not_placed(
    tmp_path: Path, snapshot: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    unnamed = tmp_path / "unnamed.yaml"
    unnamed.write_text(UNNAMED)
    assert main(["what-if", "-f", str(snapshot), "-f", str(unnamed), "-o", "json"]) == 0
    results = {r["pod"]: r for r in json.loads(capsys.readouterr().out)["results"]}
    assert results["ml/no-scheduler-name"] == {
        "pod": "ml/no-scheduler-name",
        "node": None,
        "annotations": {},
        "reasons": {},
        "reason": "schedulerName default-scheduler is not served by this scheduler",
    }
    assert results["ml/half"]["node"] == "node-a"
    assert main(["what-if", "-f", str(unnamed)]) == 0
    assert "schedulerName default-scheduler is not served by this scheduler" in capsys.readouterr().out
    # A config serving default-scheduler too, as `tessera up` writes: it is placed.
    config = tmp_path / "config.yaml"
    config.write_text("profiles: [{schedulerName: tessera-scheduler}, {schedulerName: default-scheduler}]\n")
    assert main(["what-if", "-f", str(snapshot), "-f", str(unnamed), "--config", str(config), "-o", "json"]) == 0
    results = {r["pod"]: r for r in json.loads(capsys.readouterr().out)["results"]}
    assert results["ml/no-scheduler-name"]["node"] == "node-a"
