"""`tessera quota`: the tree in order, GPU resources first, what the controller has not written
shown as missing (never computed here), and clear errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from apis.crds.elasticquota import ElasticQuota
from apis.extension import names
from cli import main
from cli.quota import paused_of, render_table, rows_of, to_json
from tests.support.builders import quota_cr

GPU = names.GPU_CORE


def written(
    quota: ElasticQuota, runtime: dict[str, str], request: dict[str, str], used: dict[str, Any]
) -> ElasticQuota:
    raw = quota.to_dict()
    raw["metadata"]["annotations"] = {
        names.ANNOTATION_QUOTA_RUNTIME: json.dumps(runtime),
        names.ANNOTATION_QUOTA_REQUEST: json.dumps(request),
    }
    raw["status"] = {"used": used}
    return ElasticQuota.from_dict(raw)


def tree() -> list[ElasticQuota]:
    child = {names.LABEL_QUOTA_PARENT: "research"}
    parent = quota_cr("research", labels={names.LABEL_QUOTA_IS_PARENT: "true"}, min={GPU: 800}, max={GPU: 800})
    team_b = quota_cr("team-b", labels=child, min={GPU: 400, "cpu": "8"}, max={GPU: 800, "cpu": "16"}, namespace="b")
    team_a = quota_cr("team-a", labels=child, min={GPU: 400}, max={GPU: 800}, namespace="a")
    return [
        written(team_b, {GPU: "400", "cpu": "4"}, {GPU: "700", "cpu": "4"}, {GPU: "400", "cpu": "4"}),
        team_a,  # the controller has not written it yet
        written(parent, {GPU: "800"}, {GPU: "700"}, {GPU: "400"}),
    ]


def test_rows_in_tree_order_with_missing_annotations_noted() -> None:
    rows, notes = rows_of(tree())
    assert [(r.name, r.depth) for r in rows] == [("research", 0), ("team-a", 1), ("team-b", 1)]
    assert rows[1].runtime is None and rows[2].runtime == {GPU: 400, "cpu": 4000}
    assert notes == ["no runtime/request written yet for team-a: `tessera controller` writes them (is it running?)"]


def test_namespace_filter_keeps_the_quotas_above() -> None:
    rows, _ = rows_of(tree(), "b")
    assert [r.name for r in rows] == ["research", "team-b"]


def test_table_lists_gpu_resources_first_as_kubernetes_quantities() -> None:
    rows, notes = rows_of(tree(), "b")
    lines = render_table(rows, notes).splitlines()
    assert lines[0].split() == ["QUOTA", "NAMESPACE", "RESOURCE", "MIN", "MAX", "RUNTIME", "USED", "REQUEST"]
    assert lines[1].split() == ["research", "default", GPU, "800", "800", "800", "400", "700"]
    assert lines[2].split() == ["team-b", "b", GPU, "400", "800", "400", "400", "700"]
    assert lines[2].startswith("  team-b")  # indented under its parent
    assert lines[3].split() == ["cpu", "8", "16", "4", "4", "4"]


def test_json_has_the_what_if_shape() -> None:
    doc = json.loads(to_json(*rows_of(tree())))
    team_a = doc["quotas"][1]
    assert team_a == {
        "name": "team-a",
        "namespace": "a",
        "parent": "research",
        "min": {GPU: "400"},
        "max": {GPU: "800"},
        "request": None,
        "runtime": None,
        "used": {},
    }
    assert doc["quotas"][2]["runtime"] == {GPU: "400", "cpu": "4"}


def test_an_invalid_quota_says_why() -> None:
    raw = quota_cr("orphan", labels={names.LABEL_QUOTA_PARENT: "gone"}, max={GPU: 100}).to_dict()
    raw["status"] = {"conditions": [{"type": "Valid", "status": "False", "reason": "InvalidQuota", "message": "m"}]}
    _, notes = rows_of([ElasticQuota.from_dict(raw)])
    assert "orphan: InvalidQuota: m" in notes


def test_no_server_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    assert main.main(["quota", f"--kubeconfig={kubeconfig}"]) == 1
    assert "tessera quota: cannot list ElasticQuotas from http://127.0.0.1:9" in capsys.readouterr().err


def test_a_paused_reclaim_is_shown_with_its_reason() -> None:
    quotas = tree()
    raw = quotas[0].to_dict()
    raw["status"]["conditions"] = [
        {
            "type": "ReclaimPaused",
            "status": "True",
            "reason": "RootTotalCollapsed",
            "message": "the root quota's total of koordinator.sh/gpu-core fell from 1600 to 0 in one step",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    ]
    quotas[0] = ElasticQuota.from_dict(raw)
    rows, notes = rows_of(quotas)
    assert notes[-1].startswith(
        "quota reclaim is PAUSED since 2026-01-01T00:00:00Z (RootTotalCollapsed): the root quota's total"
    )
    assert notes[-1].endswith("`tessera quota --resume-reclaim` resumes it now")
    doc = json.loads(to_json(rows, notes, paused_of(quotas)))
    assert doc["reclaimPaused"]["reason"] == "RootTotalCollapsed"
    assert json.loads(to_json(*rows_of(tree())))["reclaimPaused"] is None


def test_limits_are_shown_in_the_names_quotas_count() -> None:
    whole = quota_cr("gpus", min={names.NVIDIA_GPU: "1"}, max={names.NVIDIA_GPU: "2"}, namespace="g")
    [row], _ = rows_of([whole])
    assert row.max == {GPU: 200, names.GPU_MEMORY_RATIO: 200} and row.min == {GPU: 100, names.GPU_MEMORY_RATIO: 100}
