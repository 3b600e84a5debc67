"""`tessera deschedule --snapshot`: the plan from YAML snapshots, through the real command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from apis.crds.podmigrationjob import MigrationMode
from apis.extension import names
from cli import deschedule_apply
from cli.main import main
from scheduler import defrag
from tests.support.defragcluster import SMALL, node_objects, small_pod, train_pod


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    objects = [*node_objects(), *(small_pod("ml", name) for name in SMALL), train_pod("ml")]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objects), encoding="utf-8")
    return path


def test_the_table_names_each_move_and_what_it_frees(snapshot: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["deschedule", "--dry-run", "--snapshot", str(snapshot), "ml/train"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith("ml/train: pod ml/train fits on gpu-a after 2 migrations (ml/a0 → ")
    assert lines[1].split() == ["#", "MOVE", "FROM", "TO", "GPU"]
    assert [line.split()[1] for line in lines[2:4]] == ["ml/a0", "ml/a1"]
    assert lines[4] == "  frees gpu-a: 4 GPUs free there after the moves"
    assert err == ""


def test_json_lists_every_pending_pod_and_without_dry_run_says_nothing_moved(
    snapshot: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["deschedule", "--snapshot", str(snapshot), "-o", "json", "--exclude", "ml/a0"]) == 0
    out, err = capsys.readouterr()
    (plan,) = json.loads(out)["plans"]
    assert plan["pod"] == "ml/train" and plan["feasible"] and plan["node"] == "gpu-b"
    assert sorted(m["pod"] for m in plan["migrations"]) == ["ml/b0", "ml/b1", "ml/b2"]
    assert all(m["fromNode"] == "gpu-b" and m["toNode"] != "gpu-b" for m in plan["migrations"])
    assert "only plans; nothing was moved" in err


def test_an_impossible_budget_says_why(snapshot: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["deschedule", "--dry-run", "--snapshot", str(snapshot), "--max-migrations", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ml/train: no plan: no plan of at most 1 migrations makes room for pod ml/train")
    assert "needs more migrations than allowed" in out


def test_bad_input_is_a_clear_error(tmp_path: Path, snapshot: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["deschedule", "--snapshot", str(snapshot), "ml/nope"]) == 1
    assert "pod ml/nope is not a pending pod of the snapshot" in capsys.readouterr().err
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: Pod\nmetadata: {name: x}\nspec: {containers: 3}\n", encoding="utf-8")
    assert main(["deschedule", "--snapshot", str(broken)]) == 1
    assert "broken.yaml[0]: spec.containers: expected a list, got int" in capsys.readouterr().err
    assert main(["deschedule", "--snapshot", str(snapshot), "--max-migrations", "0"]) == 2
    assert "--max-migrations must be at least 1" in capsys.readouterr().err


def test_apply_is_for_the_live_cluster_and_names_jobs_after_their_pods(
    snapshot: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["deschedule", "--apply", "--snapshot", str(snapshot)]) == 2
    assert "--apply acts on the live cluster, not on --snapshot" in capsys.readouterr().err
    move = defrag.Migration("ml/Train_Worker.0", "0A1B2C3D-ffff", "gpu-a", "gpu-b")
    plan = defrag.MigrationPlan("ml/big", True, "gpu-a", (move,))
    job = deschedule_apply.job_for(move, plan, "uid-big")
    assert job.name == "defrag-train-worker-0-0a1b2c3d"
    assert (job.pod_ref.namespace, job.pod_ref.name, job.pod_ref.uid) == ("ml", "Train_Worker.0", "0A1B2C3D-ffff")
    assert job.mode is MigrationMode.RESERVATION_FIRST
    # As the descheduler's own jobs: pinned to the planned node, why, and for whom.
    assert job.meta.annotations[names.ANNOTATION_MIGRATION_TARGET_NODE] == "gpu-b"
    assert "make room for pending pod ml/big on gpu-a" in job.meta.annotations[names.ANNOTATION_MIGRATION_REASON]
    assert job.meta.labels == {names.LABEL_MIGRATION_FOR: "uid-big"}
    long = deschedule_apply.job_for(defrag.Migration("ml/" + "x" * 300, "", "a", "b"), plan)
    assert len(long.name) <= 63 and long.name.startswith("defrag-xxx")
