"""deploy/monitoring: the rules pass promtool's checks and their tests on synthetic series, the
`tessera up` configuration is one Prometheus accepts, and every metric a rule or the Grafana
dashboard reads is one a component exports (read from the components' source) or a rule records.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
from pathlib import Path
from typing import Final

import pytest
import yaml

from cli.localcluster.monitoring import prometheus_config, write_targets
from cli.localcluster.state import ComponentState, UpState
from tests.support.prometheus import binary

ROOT: Final = Path(__file__).resolve().parents[3]
MONITORING: Final = ROOT / "deploy" / "monitoring"
COMPONENTS: Final = ("agent", "apiserver", "controller", "descheduler", "kubecontrollers", "scheduler", "kube")
_COUNTERS: Final = {"Counter", "CounterMetricFamily"}
_HISTOGRAMS: Final = {"Histogram", "HistogramMetricFamily"}
_ALL: Final = _COUNTERS | _HISTOGRAMS | {"Gauge", "GaugeMetricFamily", "Summary", "Info", "Enum"}
#: Prometheus' own series the rules and dashboard may read.
_PROMETHEUS: Final = {"up", "ALERTS"}
_KEYWORDS: Final = {"and", "or", "unless", "bool", "offset"}


def exported() -> tuple[set[str], list[str]]:
    """(names, prefixes) of the series the components export, from their source: each metric
    constructor's first argument, with prometheus_client's suffixes."""
    names: set[str] = set()
    prefixes: list[str] = []
    for package in COMPONENTS:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not (isinstance(node, ast.Call) and node.args):
                    continue
                func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if func not in _ALL:
                    continue
                first = node.args[0]
                if isinstance(first, ast.JoinedStr) and isinstance(first.values[0], ast.Constant):
                    prefixes.append(str(first.values[0].value))
                    continue
                if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                    continue
                name = first.value
                if func in _COUNTERS:
                    base = name.removesuffix("_total")
                    names |= {f"{base}_total", f"{base}_created"}
                elif func in _HISTOGRAMS:
                    names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
                else:
                    names.add(name)
    return names, prefixes


def recorded() -> set[str]:
    rules = yaml.safe_load((MONITORING / "rules.yaml").read_text())
    return {r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r}


def metric_names(expr: str) -> set[str]:
    """The series names a PromQL expression reads: identifiers outside strings, label matchers,
    ranges and grouping clauses that are neither functions nor keywords."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    names = set()
    for match in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        if text[match.end() :].lstrip().startswith("(") or match.group() in _KEYWORDS:
            continue  # a function, or an operator
        names.add(match.group())
    return names


def dashboard_exprs() -> list[str]:
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    return [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", ())]


def rule_exprs() -> list[str]:
    rules = yaml.safe_load((MONITORING / "rules.yaml").read_text())
    return [r["expr"] for g in rules["groups"] for r in g["rules"]]


def unknown(exprs: list[str]) -> set[str]:
    names, prefixes = exported()
    known = names | recorded() | _PROMETHEUS
    return {n for e in exprs for n in metric_names(e) if n not in known and not any(n.startswith(p) for p in prefixes)}


def test_the_name_finder_sees_names_and_not_functions() -> None:
    assert metric_names('sum by (node) (rate(tessera_x_total{a="b"}[5m])) / tessera:y:z > 0 and up == 0') == {
        "tessera_x_total",
        "tessera:y:z",
        "up",
    }


def test_every_dashboard_query_names_a_metric_we_export() -> None:
    exprs = dashboard_exprs()
    assert len(exprs) >= 15
    assert unknown(exprs) == set()
    # The check can fail: a typo in a name is found.
    assert unknown(["sum(tessera_gpu_helthy)"]) == {"tessera_gpu_helthy"}


def test_every_rule_reads_a_metric_we_export() -> None:
    assert unknown(rule_exprs()) == set()


def test_the_rules_pass_promtool_and_their_tests() -> None:
    promtool = binary("promtool")
    check = subprocess.run(
        [promtool, "check", "rules", str(MONITORING / "rules.yaml")], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stdout + check.stderr
    tests = subprocess.run(
        [promtool, "test", "rules", "rules.test.yaml"], cwd=MONITORING, capture_output=True, text=True, check=False
    )
    assert tests.returncode == 0, tests.stdout + tests.stderr
    alerts = {
        r["alert"]
        for g in yaml.safe_load((MONITORING / "rules.yaml").read_text())["groups"]
        for r in g["rules"]
        if "alert" in r
    }
    tested = {
        t["alertname"]
        for case in yaml.safe_load((MONITORING / "rules.test.yaml").read_text())["tests"]
        for t in case.get("alert_rule_test", ())
    }
    assert alerts == tested, "every alert has a promtool test"


@pytest.mark.parametrize("file_sd", [False, True], ids=["static", "targets-files"])
def test_tessera_ups_configuration_is_one_prometheus_accepts(tmp_path: Path, file_sd: bool) -> None:
    promtool = binary("promtool")
    components = {
        "apiserver": ComponentState(url="https://127.0.0.1:6443"),
        "scheduler": ComponentState(url="http://127.0.0.1:10251"),
        "agent/sim-1": ComponentState(url="http://127.0.0.1:9316", node="sim-1"),
        "dashboard": ComponentState(url="http://127.0.0.1:8080"),
    }
    up = UpState(pid=1, phase="ready", data_dir=str(tmp_path), kubeconfig="", components=components)
    (tmp_path / "ca.crt").write_text("")
    (tmp_path / "token").write_text("t")
    (tmp_path / "metrics-token").write_text("m")
    targets = tmp_path / "targets" if file_sd else None
    config = prometheus_config(up, ca_file=tmp_path / "ca.crt", token_file=tmp_path / "token", targets_dir=targets)
    jobs = [job["job_name"] for job in config["scrape_configs"]]
    assert jobs == ["tessera-agent", "tessera-apiserver", "tessera-scheduler"]
    if targets is not None:
        write_targets(up, targets, [*jobs, "tessera-descheduler"])
        agent = json.loads((targets / "tessera-agent.json").read_text())
        assert agent == [{"targets": ["127.0.0.1:9316"], "labels": {"component": "agent/sim-1", "node": "sim-1"}}]
        assert json.loads((targets / "tessera-descheduler.json").read_text()) == [], "a job with none now is empty"
    # The components answer /metrics to a token allowed `get` on it (docs/security.md): tessera
    # up's metrics-only one; the API server gets the admin's.
    tokens = {job["job_name"]: job["authorization"]["credentials_file"] for job in config["scrape_configs"]}
    assert tokens == {
        "tessera-agent": str(tmp_path / "metrics-token"),
        "tessera-scheduler": str(tmp_path / "metrics-token"),
        "tessera-apiserver": str(tmp_path / "token"),
    }
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    result = subprocess.run(
        [promtool, "check", "config", "--syntax-only", str(path)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", ["prometheus.yaml", "podmonitor.yaml"])
def test_the_cluster_manifests_name_jobs_as_the_rules_expect(name: str) -> None:
    # Debian's promtool has no Kubernetes service discovery to check prometheus.yaml with; the job
    # label must come from app.kubernetes.io/name, which is what rules.yaml's `job=` matchers read.
    text = (MONITORING / name).read_text()
    assert "app_kubernetes_io_name" in text or "app.kubernetes.io/name" in text
    for doc in yaml.safe_load_all(text):
        assert doc
