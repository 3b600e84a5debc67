"""`tessera bench quota` and `tessera bench scheduler --quotas N`: tiny runs report what they
promise (the real numbers are in docs/scheduling.md)."""

from __future__ import annotations

import json

import pytest

from cli.bench.quota import build_tree
from cli.main import main


def test_the_tree_is_contended_at_every_level() -> None:
    quotas, leaves = build_tree(2, 3, 4)
    assert (len(quotas), len(leaves)) == (2 + 6 + 24, 24)
    assert {q.meta.labels.get("quota.scheduling.koordinator.sh/parent", "") for q in quotas} >= {"", "q0", "q0-0"}


def test_quota_bench_reports_event_and_full_recompute(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bench", "quota", "--top", "2", "--middle", "3", "--leaves", "4", "--events", "40", "--full", "3"]
    assert main([*args, "--controller-events", "6", "-o", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["quotas"] == 32 and result["samples"] == 40
    assert 0 < result["p50_ms"] <= result["p99_ms"] <= result["max_ms"]
    assert result["full_recompute"]["samples"] == 3 and result["pod_event_cpu"]["samples"] == 40
    assert isinstance(result["targets_met_cpu"], bool)
    # The controller reconciles what a pod event moved, not every quota (unless asked to).
    assert result["controller_pass"]["samples"] == 6 and 0 < result["quotas_queued"] < 32
    assert main([*args, "--controller-events", "2", "--controller-every-quota", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["quotas_queued"] == 32


def test_scheduler_bench_with_a_quota_per_namespace(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "scheduler", "--nodes", "4", "--pods", "30", "--quotas", "3", "-o", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["quotas"] == 3 and result["scheduled"] > 0 and result["pods_per_cpu_second"] > 0
    assert main(["bench", "scheduler", "--quotas", "-1", "-o", "json"]) == 2
    assert capsys.readouterr().err == "tessera bench: --quotas must not be negative, got -1\n"
