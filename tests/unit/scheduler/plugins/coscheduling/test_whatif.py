"""`tessera what-if` with gangs: all or nothing, PodGroups from the snapshot, and the `gangs`
section of its JSON and table output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cli.main import main

GPU = {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": "80Gi", "koordinator.sh/gpu-memory-ratio": "100"}
NODE = {
    "kind": "Node",
    "metadata": {"name": "n1"},
    "status": {
        "allocatable": {
            "cpu": "64",
            "memory": "256Gi",
            "pods": "110",
            "koordinator.sh/gpu-core": "800",
            "koordinator.sh/gpu-memory": "640Gi",
            "koordinator.sh/gpu-memory-ratio": "800",
        }
    },
}
DEVICE = {
    "apiVersion": "scheduling.koordinator.sh/v1alpha1",
    "kind": "Device",
    "metadata": {"name": "n1"},
    "spec": {
        "devices": [{"type": "gpu", "id": f"GPU-{i}", "minor": i, "health": True, "resources": GPU} for i in range(8)]
    },
}


def worker(name: str, gang: str, gpus: int, **extra: str) -> dict[str, object]:
    annotations = {"gang.scheduling.koordinator.sh/name": gang, **extra}
    resources = {"limits": {"koordinator.sh/gpu": str(100 * gpus)}}
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team", "annotations": annotations},
        "spec": {"schedulerName": "tessera-scheduler", "containers": [{"name": "c", "resources": resources}]},
    }


def snapshot(tmp_path: Path) -> Path:
    docs: list[dict[str, object]] = [NODE, DEVICE]
    fits = {"gang.scheduling.koordinator.sh/min-available": "2"}
    docs += [worker(f"small-{i}", "small", 2, **fits) for i in range(2)]
    too_big = {"gang.scheduling.koordinator.sh/min-available": "3"}
    docs += [worker(f"big-{i}", "big", 4, **too_big) for i in range(3)]
    docs.append({"kind": "PodGroup", "metadata": {"name": "pg", "namespace": "team"}, "spec": {"minMember": 2}})
    for i in range(2):
        pod = worker(f"pg-{i}", "unused", 1)
        pod["metadata"] = {"name": f"pg-{i}", "namespace": "team", "labels": {"pod-group.scheduling.sigs.k8s.io": "pg"}}
        docs.append(pod)
    path = tmp_path / "gangs.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def test_what_if_json_reports_each_gang_and_leaves_unsatisfied_members_without_a_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["what-if", "-f", str(snapshot(tmp_path)), "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    gangs = {g["name"]: g for g in out["gangs"]}
    assert gangs["team/small"] == {"name": "team/small", "min": 2, "placed": 2, "satisfied": True, "reason": ""}
    assert gangs["team/pg"]["satisfied"] and gangs["team/pg"]["placed"] == 2
    big = gangs["team/big"]
    assert (big["min"], big["placed"], big["satisfied"]) == (3, 0, False)
    assert "unschedulable: 0/1 nodes are available: 1 Insufficient gpu devices" in big["reason"]
    nodes = {r["pod"]: r["node"] for r in out["results"]}
    assert nodes["team/small-0"] == nodes["team/small-1"] == "n1"
    assert nodes["team/big-0"] is None and nodes["team/big-1"] is None and nodes["team/big-2"] is None
    assert all("gang team/big" in r["message"] for r in out["results"] if r["pod"].startswith("team/big"))


def test_what_if_table_lists_the_gangs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["what-if", "-f", str(snapshot(tmp_path))]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines.index(next(line for line in lines if line.startswith("GANG")))
    rows = {line.split()[0]: line.split()[1:3] for line in lines[header + 1 :]}
    assert rows == {"team/big": ["0/3", "no"], "team/pg": ["2/2", "yes"], "team/small": ["2/2", "yes"]}


def test_what_if_reads_scheduler_plugins_pod_groups_by_their_api_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A snapshot with scheduling.x-k8s.io PodGroups (what Kubeflow's operator makes): one that
    fits is placed whole, one whose minResources the node cannot hold is not started."""
    docs: list[dict[str, object]] = [NODE, DEVICE]
    for name, spec in (("job", {"minMember": 2}), ("huge", {"minMember": 2, "minResources": {"nvidia.com/gpu": "16"}})):
        docs.append(
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "team"},
                "spec": spec,
            }
        )
        for i in range(2):
            pod = worker(f"{name}-{i}", "unused", 1)
            pod["metadata"] = {
                "name": f"{name}-{i}",
                "namespace": "team",
                "labels": {"scheduling.x-k8s.io/pod-group": name},
            }
            docs.append(pod)
    path = tmp_path / "upstream.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    assert main(["what-if", "-f", str(path), "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    gangs = {g["name"]: g for g in out["gangs"]}
    assert gangs["team/job"]["satisfied"] and gangs["team/job"]["placed"] == 2
    assert not gangs["team/huge"]["satisfied"] and gangs["team/huge"]["placed"] == 0
    assert "minResources do not fit in the cluster's free resources" in gangs["team/huge"]["reason"]
