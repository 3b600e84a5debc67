"""`tessera what-if`: snapshots in, placements and reasons out — through the real command line."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from apis.crds.device import DeviceType
from apis.errors import ValidationError
from apis.extension import allocation, names
from apis.extension.allocation import DeviceAllocation
from apis.k8s import resources
from cli.main import main
from scheduler import whatif
from scheduler.core import Scheduler
from scheduler.simulation.cluster import gpu_node

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


@pytest.mark.parametrize(
    ("scoring", "minor"),
    [("LeastAllocated", 1), ("FGD", 0), ("BalancedFGD", 0), (None, 0)],
    ids=["LeastAllocated", "FGD", "BalancedFGD", "default"],
)
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


@pytest.mark.parametrize("kind", ["Pod", "Node", "Reservation"])
def test_an_object_without_a_name_is_refused_as_the_api_server_would(kind: str) -> None:
    with pytest.raises(ValidationError, match=r"snapshot\[0\]: metadata.name: Required value"):
        whatif.parse_objects([{"kind": kind, "metadata": {"namespace": "ml"}}])


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


def test_every_rdma_device_of_a_joint_allocation_is_shown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The reference 8-GPU server (a NIC with VFs on each of its 4 PCIe switches) and a pod whose
    # 6 GPUs span three switches: it gets a VF on each, and both outputs list all three.
    _, device = gpu_node("gpu-1")
    node = {"kind": "Node", "metadata": {"name": "gpu-1"}, "status": {"allocatable": {"cpu": "64", "memory": "256Gi"}}}
    pod = {
        "kind": "Pod",
        "metadata": {
            "name": "mpi",
            "namespace": "ml",
            "annotations": {names.ANNOTATION_DEVICE_JOINT_ALLOCATE: '{"deviceTypes":["gpu","rdma"]}'},
        },
        "spec": {
            "schedulerName": "tessera-scheduler",
            "containers": [{"name": "c", "resources": {"limits": {names.NVIDIA_GPU: 6, names.RDMA: 1}}}],
        },
    }
    path = tmp_path / "joint.yaml"
    path.write_text(yaml.safe_dump_all([node, device.to_dict(), pod]))
    assert main(["what-if", "-f", str(path), "-o", "json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["results"]
    rdma = json.loads(result["annotations"][names.ANNOTATION_DEVICE_ALLOCATED])["rdma"]
    assert [(r["minor"], r["extension"]["vfs"][0]["busID"]) for r in rdma] == [
        (0, "0000:1f:00.1"),
        (1, "0000:3f:00.1"),
        (2, "0000:5f:00.1"),
    ]
    assert main(["what-if", "-f", str(path)]) == 0
    row = capsys.readouterr().out.splitlines()[1]
    assert row.endswith(
        "rdma 0 [rdma=1] vf 0000:1f:00.1, rdma 1 [rdma=1] vf 0000:3f:00.1, rdma 2 [rdma=1] vf 0000:5f:00.1"
    )


#: Koordinator v0.7's own example (its blog on fine-grained GPU scheduling): a node with GPUs of
#: 8Gi, published, reported and annotated as that release did, in kubernetes.io/ names, and the
#: blog's pods: a whole GPU as gpu-core 100 + gpu-memory 8Gi, half of one as 50 + 4Gi.
SEED_STYLE = """
apiVersion: v1
kind: Node
metadata: {name: node-a}
status:
  allocatable: {cpu: "32", memory: 128Gi, kubernetes.io/gpu-core: 200, kubernetes.io/gpu-memory: "16Gi"}
---
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Device
metadata: {name: node-a}
spec: {devices: [
  {type: gpu, id: GPU-0, minor: 0, health: true,
   resources: {kubernetes.io/gpu-core: 100, kubernetes.io/gpu-memory: 8Gi, kubernetes.io/gpu-memory-ratio: 100}},
  {type: gpu, id: GPU-1, minor: 1, health: true,
   resources: {kubernetes.io/gpu-core: 100, kubernetes.io/gpu-memory: 8Gi, kubernetes.io/gpu-memory-ratio: 100}}]}
---
apiVersion: v1
kind: PodList
items:
- kind: Pod
  metadata:
    {name: running, namespace: default, annotations: {scheduling.koordinator.sh/device-allocated: '{"gpu":[{"minor":0,
      "resources":{"kubernetes.io/gpu-core":"50","kubernetes.io/gpu-memory":"4Gi","kubernetes.io/gpu-memory-ratio":"50"}}]}'}}
  spec:
    nodeName: node-a
    containers: [{name: main, resources: {limits: &half {kubernetes.io/gpu-core: 50, kubernetes.io/gpu-memory: 4Gi}}}]
- kind: Pod
  metadata: {name: demo-pod, namespace: default}
  spec:
    schedulerName: tessera-scheduler
    containers: [{name: main, resources: {limits: {kubernetes.io/gpu-core: 100, kubernetes.io/gpu-memory: 8Gi},
                  requests: {kubernetes.io/gpu-core: 100, kubernetes.io/gpu-memory: 8Gi}}}]
- kind: Pod
  metadata: {name: demo-half, namespace: default}
  spec: {schedulerName: tessera-scheduler, containers: [{name: main, resources: {limits: *half, requests: *half}}]}
- kind: Pod
  metadata: {name: current-half, namespace: default}
  spec:
    schedulerName: tessera-scheduler
    containers: [{name: c, resources: {limits: {koordinator.sh/gpu-core: "50", koordinator.sh/gpu-memory-ratio: "50"}}}]
"""


def test_a_seed_style_snapshot_in_deprecated_names_schedules_like_the_current_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "seed.yaml"
    path.write_text(SEED_STYLE)
    assert main(["what-if", "-f", str(path), "-o", "json"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    # The whole GPU takes GPU 1; the half takes what `running` left of GPU 0; then both are full.
    assert [(r["pod"], r["node"]) for r in results] == [
        ("default/demo-pod", "node-a"),
        ("default/demo-half", "node-a"),
        ("default/current-half", None),
    ]
    gpus = [json.loads(r["annotations"][names.ANNOTATION_DEVICE_ALLOCATED])["gpu"] for r in results[:2]]
    whole = {names.GPU_CORE: "100", names.GPU_MEMORY: "8Gi", names.GPU_MEMORY_RATIO: "100"}
    half = {names.GPU_CORE: "50", names.GPU_MEMORY: "4Gi", names.GPU_MEMORY_RATIO: "50"}
    assert gpus == [[{"minor": 1, "resources": whole, "id": "GPU-1"}], [{"minor": 0, "resources": half, "id": "GPU-0"}]]
    assert results[2]["reasons"] == {"node-a": ["Insufficient gpu devices"]}


def test_nvlink_connected_gpus_are_said_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The reference 8-GPU server with NVLink bridges joining GPUs on different PCIe switches
    # (0-2, 1-3, ...): a 2-GPU pod gets a bridged pair, and both outputs say NVLink joins them;
    # a 3-GPU pod cannot be joined all to all, a 1-GPU pod has nothing to join.
    _, device = gpu_node("gpu-1")
    device = dataclasses.replace(device, nvlink={m: frozenset({m ^ 2}) for m in range(8)})
    node = {"kind": "Node", "metadata": {"name": "gpu-1"}, "status": {"allocatable": {"cpu": "64", "memory": "256Gi"}}}

    def pod(name: str, gpus: int) -> dict[str, object]:
        container = {"name": "c", "resources": {"limits": {names.NVIDIA_GPU: gpus}}}
        return {
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"schedulerName": "tessera-scheduler", "containers": [container]},
        }

    path = tmp_path / "nvlink.yaml"
    path.write_text(yaml.safe_dump_all([node, device.to_dict(), pod("pair", 2), pod("three", 3), pod("one", 1)]))
    assert main(["what-if", "-f", str(path), "-o", "json"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    gpus = [
        [g["minor"] for g in json.loads(r["annotations"][names.ANNOTATION_DEVICE_ALLOCATED])["gpu"]] for r in results
    ]
    assert gpus[0] == [0, 2]
    assert [r.get("nvlink") for r in results] == [True, False, None]
    assert main(["what-if", "-f", str(path)]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[1].endswith("gpu 2 [gpu-core=100 gpu-memory=80Gi gpu-memory-ratio=100] (NVLink)")
    assert "NVLink" not in rows[2] and "NVLink" not in rows[3]


QUOTA_SNAPSHOT = """
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "10", memory: 64Gi, pods: "110"}}
---
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata: {name: team-a, namespace: team-a}
spec: {min: {cpu: "5"}, max: {cpu: "10"}}
---
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata: {name: team-b, namespace: team-b}
spec: {min: {cpu: "5"}, max: {cpu: "10"}}
---
apiVersion: v1
kind: Pod
metadata: {name: b1, namespace: team-b}
spec: {schedulerName: tessera-scheduler, containers: [{name: c, image: x, resources: {requests: {cpu: "4"}}}]}
"""


def _cpu_pod(name: str, cpu: str) -> str:
    return f"""---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: team-a}}
spec:
  schedulerName: tessera-scheduler
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
"""


def test_whatif_honours_quotas_and_reports_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # team-b asks 4 of its min 5: team-a may borrow 1 beyond its own 5, so 6 CPUs in all.
    path = tmp_path / "snap.yaml"
    path.write_text(QUOTA_SNAPSHOT + _cpu_pod("a1", "4") + _cpu_pod("a2", "2") + _cpu_pod("a3", "1"))
    assert main(["what-if", "-f", str(path), "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    placed = {r["pod"]: r["node"] for r in doc["results"]}
    assert placed == {"team-b/b1": "n1", "team-a/a1": "n1", "team-a/a2": "n1", "team-a/a3": None}
    refused = next(r for r in doc["results"] if r["pod"] == "team-a/a3")
    assert "Insufficient quotas, quotaName: team-a, runtime: {cpu: 6}, used: {cpu: 6}" in refused["message"]
    assert doc["quotas"] == [_quota_report("team-a", request="7", runtime="6"), _quota_report("team-b", request="4")]


def _quota_report(name: str, *, request: str, runtime: str = "", used: str = "") -> dict[str, object]:
    """What-if's JSON for one of QUOTA_SNAPSHOT's quotas (runtime and used default to request)."""
    cpu = {"request": request, "runtime": runtime or request, "used": used or runtime or request}
    return {
        "name": name,
        "namespace": name,
        "parent": "koordinator-root-quota",
        "min": {"cpu": "5"},
        "max": {"cpu": "10"},
        **{key: {"cpu": amount} for key, amount in cpu.items()},
    }


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


RESERVATIONS = """
---
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Reservation
metadata: {name: hold-a1, uid: r-1, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  template:
    metadata: {namespace: ml}
    spec:
      schedulerName: tessera-scheduler
      containers:
      - {name: c, resources: {limits: {koordinator.sh/gpu-core: "40", koordinator.sh/gpu-memory-ratio: "40"}}}
  owners: [{labelSelector: {matchLabels: {app: serve}}}]
  ttl: 0s
---
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Reservation
metadata: {name: never, uid: r-2, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  template:
    spec:
      schedulerName: tessera-scheduler
      containers:
      - {name: c, resources: {limits: {koordinator.sh/gpu-core: "200", koordinator.sh/gpu-memory-ratio: "200"}}}
  owners: [{object: {name: x}}]
---
apiVersion: v1
kind: Pod
metadata: {name: owner, namespace: ml, labels: {app: serve}}
spec:
  schedulerName: tessera-scheduler
  containers: [{name: c, resources: {limits: {koordinator.sh/gpu-core: "40", koordinator.sh/gpu-memory-ratio: "40"}}}]
"""


def test_reservations_in_a_snapshot_hold_room_and_hand_it_to_their_owner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "snapshot.yaml"
    path.write_text(SNAPSHOT + RESERVATIONS)
    assert main(["what-if", "-f", str(path), "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    by_name = {r["name"]: r for r in out["reservations"]}
    assert by_name["hold-a1"]["phase"] == "Available" and by_name["hold-a1"]["node"] == "node-a"
    assert by_name["never"]["phase"] == "Pending" and "Insufficient gpu" in by_name["never"]["message"]
    results = {r["pod"]: r for r in out["results"]}
    # GPU 1 is 40 % reserved: `half` (50 %) still fits there, the owner gets the reserved 40 %.
    assert results["ml/half"]["node"] == "node-a"
    assert results["ml/owner"]["node"] == "node-a"
    assert "hold-a1" in results["ml/owner"]["annotations"][names.ANNOTATION_RESERVATION_ALLOCATED]
    assert main(["what-if", "-f", str(path)]) == 0
    table = capsys.readouterr().out
    assert "RESERVATION" in table and "never" in table and "Pending" in table


def test_the_docs_example_reservations_are_placed() -> None:
    _, device = gpu_node("gpu-1")
    node = {"kind": "Node", "metadata": {"name": "gpu-1"}, "status": {"allocatable": {"cpu": "64", "memory": "256Gi"}}}
    examples = Path(__file__).resolve().parents[3] / "docs" / "examples"
    docs = [
        doc
        for name in ("gpus", "cpu")
        for doc in yaml.safe_load_all((examples / f"reservation-{name}.yaml").read_text())
    ]
    report = whatif.report(whatif.parse_objects([node, device.to_dict(), *docs]), Scheduler())
    assert {r.name: (r.phase, r.node) for r in report.reservations} == {
        "trainer-4gpu": ("Available", "gpu-1"),
        "infer-half": ("Available", "gpu-1"),
        "docs-cpu": ("Available", "gpu-1"),
    }


def _running(name: str, node: str, priority: int, app: str) -> str:
    return f"""---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: ml, labels: {{app: {app}}}}}
spec:
  nodeName: {node}
  priority: {priority}
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: "4"}}}}}}]
"""


PREEMPTION_SNAPSHOT = (
    "".join(
        f"""---
apiVersion: v1
kind: Node
metadata: {{name: {n}}}
status: {{allocatable: {{cpu: "4", memory: 16Gi, pods: "110"}}}}
"""
        for n in ("n1", "n2")
    )
    + _running("db", "n1", 1, "db")
    + _running("web", "n2", 2, "web")
    + """---
apiVersion: v1
kind: Pod
metadata: {name: urgent, namespace: ml}
spec:
  schedulerName: tessera-scheduler
  priority: 10
  containers: [{name: c, image: x, resources: {requests: {cpu: "4"}}}]
"""
)

PDB = """---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: db, namespace: ml}
spec: {minAvailable: 1, selector: {matchLabels: {app: db}}}
status: {disruptionsAllowed: 0}
"""


@pytest.mark.parametrize(("budgets", "node", "victim"), [("", "n1", "ml/db"), (PDB, "n2", "ml/web")])
def test_whatif_says_whom_preemption_would_evict_and_honours_budgets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], budgets: str, node: str, victim: str
) -> None:
    path = tmp_path / "snap.yaml"
    path.write_text(PREEMPTION_SNAPSHOT + budgets)
    assert main(["what-if", "-f", str(path), "-o", "json"]) == 0
    urgent = next(r for r in json.loads(capsys.readouterr().out)["results"] if r["pod"] == "ml/urgent")
    assert urgent["node"] is None
    assert urgent["preemption"] == {"node": node, "plugin": "DefaultPreemption", "victims": [victim]}


def test_a_tree_in_whole_gpus_is_enforced_for_every_way_a_pod_asks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Ten quotas over 80 GPUs, each min 8 and max 80 in nvidia.com/gpu; every team asks for 10
    # GPUs' worth, in a spelling of its own. Each gets its 8: the runtimes share out all 80 GPUs
    # (none lost to rounding), and no team's pods take more than its runtime.
    docs: list[object] = []
    for n in range(10):
        node, device = gpu_node(f"gpu-{n}")
        allocatable = resources.format_list(node.allocatable)  # as the controller publishes it
        docs += [{"kind": "Node", "metadata": {"name": node.name}, "status": {"allocatable": allocatable}}]
        docs.append(device.to_dict())
    spellings = [
        {names.NVIDIA_GPU: 1},
        {names.KOORD_GPU: 100},
        {names.DEPRECATED_KOORD_GPU: 100},
        {names.GPU_CORE: 100, names.GPU_MEMORY_RATIO: 100},
        {names.GPU_CORE: 100, names.GPU_MEMORY: "80Gi"},
        {names.GPU_MEMORY_RATIO: 100},
        {names.DEPRECATED_GPU_CORE: 100, names.DEPRECATED_GPU_MEMORY_RATIO: 100},
        {names.GPU_CORE: 200, names.GPU_MEMORY_RATIO: 200, names.GPU_SHARED: 2},
        {names.KOORD_GPU: 50},
        {names.GPU_MEMORY: "40Gi"},
    ]
    percent = [100, 100, 100, 100, 100, 100, 100, 200, 50, 50]
    for n, (asks, share) in enumerate(zip(spellings, percent, strict=True)):
        team = f"team-{n}"
        spec = {"min": {names.NVIDIA_GPU: "8"}, "max": {names.NVIDIA_GPU: "80"}}
        docs.append({"kind": "ElasticQuota", "metadata": {"name": team, "namespace": team}, "spec": spec})
        for i in range(1000 // share):  # 10 GPUs' worth
            container = {"name": "c", "resources": {"limits": {k: str(v) for k, v in asks.items()}}}
            pod_spec = {"schedulerName": "tessera-scheduler", "containers": [container]}
            docs.append({"kind": "Pod", "metadata": {"name": f"p{i}", "namespace": team}, "spec": pod_spec})
    path = tmp_path / "teams.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    assert main(["what-if", "-f", str(path), "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    quotas = {q["name"]: q for q in doc["quotas"]}

    def amount(q: dict[str, dict[str, str]], figure: str, name: str) -> int:
        return resources.to_int(name, q[figure].get(name, "0"))

    for name in (names.GPU_CORE, names.GPU_MEMORY_RATIO):
        shares = [amount(q, "runtime", name) for q in quotas.values()]
        assert sum(shares) == 8000 and all(v % 100 == 0 for v in shares)  # 80 GPUs, whole, none lost
    assert all(amount(q, "runtime", names.GPU_MEMORY_RATIO) >= 800 for q in quotas.values())  # each its min
    for n, share in enumerate(percent):
        team = quotas[f"team-{n}"]
        placed = [r for r in doc["results"] if r["pod"].startswith(f"team-{n}/") and r["node"]]
        # Every GPU pod counts in gpu-memory-ratio: no team uses more than its runtime there.
        assert len(placed) * share == amount(team, "used", names.GPU_MEMORY_RATIO)
        assert amount(team, "used", names.GPU_MEMORY_RATIO) <= amount(team, "runtime", names.GPU_MEMORY_RATIO)
        refused = next(r for r in doc["results"] if r["pod"].startswith(f"team-{n}/") and not r["node"])
        assert f"Insufficient quotas, quotaName: team-{n}" in refused["message"]
    assert sum(amount(q, "used", names.GPU_MEMORY_RATIO) for q in quotas.values()) <= 8000
    assert quotas["team-0"]["max"] == {names.GPU_CORE: "8k", names.GPU_MEMORY_RATIO: "8k"}


def test_the_partition_a_pod_gets_and_why_one_does_not_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # An 8-GPU node labelled as Koordinator's built-in table wants it (model H100, Honor), a
    # running pod on GPU 1: 4 GPUs go to the other half; 3 GPUs are no partition of the table.
    node, device = gpu_node("h100")
    labels = {names.LABEL_GPU_MODEL: "H100", names.LABEL_GPU_PARTITION_POLICY: "Honor"}
    raw_node = {"kind": "Node", "metadata": {"name": "h100", "labels": labels}}
    raw_node["status"] = {"allocatable": resources.format_list(node.allocatable)}

    def pod(name: str, gpus: int, **more: object) -> dict[str, object]:
        limits = {names.NVIDIA_GPU: gpus}
        return {
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "ml", **more},
            "spec": {
                "schedulerName": "tessera-scheduler",
                "containers": [{"name": "c", "resources": {"limits": limits}}],
            },
        }

    held = allocation.encode(
        {DeviceType.GPU: (DeviceAllocation(1, {names.GPU_CORE: 100, names.GPU_MEMORY_RATIO: 100}),)}
    )
    running = pod("running", 1, annotations={names.ANNOTATION_DEVICE_ALLOCATED: held})
    running["spec"]["nodeName"] = "h100"  # type: ignore[index]
    path = tmp_path / "partitions.yaml"
    path.write_text(yaml.safe_dump_all([raw_node, device.to_dict(), running, pod("four", 4), pod("three", 3)]))
    assert main(["what-if", "-f", str(path), "-o", "json"]) == 0
    four, three = json.loads(capsys.readouterr().out)["results"]
    assert four["node"] == "h100" and four["partition"] == "[4,5,6,7] (built-in table for H100, Honor)"
    assert three["node"] is None
    assert three["reasons"]["h100"][0] == "node(s) Unsupported number of GPU requests"
    assert "hold 1, 2, 4, 8 GPUs, not 3" in three["reasons"]["h100"][1]
    assert main(["what-if", "-f", str(path)]) == 0
    assert "; partition [4,5,6,7] (built-in table for H100, Honor)" in capsys.readouterr().out
