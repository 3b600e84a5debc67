"""NodeSLO / slo-controller ConfigMap parsing: Koordinator's defaults, shapes and validation."""

import json
from pathlib import Path

import pytest
import yaml

from agent.qos import config
from agent.qos.config import Bandwidth, QoSConfig, SuppressPolicy
from apis.errors import ConfigError
from apis.extension.qos import QoSClass

NODESLO = """
apiVersion: slo.koordinator.sh/v1alpha1
kind: NodeSLO
metadata: {name: node-1}
spec:
  resourceUsedThresholdWithBE:
    enable: true
    cpuSuppressThresholdPercent: 60
    cpuSuppressMinPercent: 5
    cpuSuppressPolicy: cfsQuota
    memoryEvictThresholdPercent: 70   # Koordinator field, accepted and ignored
  resourceQOSStrategy:
    lsClass:
      memoryQOS: {enable: true, minLimitPercent: 100, lowLimitPercent: 0, throttlingPercent: 80, wmarkRatio: 95}
      networkQOS: {enable: true, egressRequest: "50%", egressLimit: "100%"}
    beClass:
      cpuQOS: {enable: true, groupIdentity: -1, schedIdle: 1}
      networkQOS: {enable: true, egressRequest: 10M, egressLimit: 200M}
      resctrlQOS: {enable: false}
  systemStrategy:
    totalNetworkBandwidth: 1G
    minFreeKbytesFactor: 100
"""


def test_empty_config_is_koordinators_default() -> None:
    cfg = config.load("")
    assert cfg == QoSConfig()
    assert cfg.cpu_suppress.enable is False
    assert cfg.cpu_suppress.threshold_percent == 65
    assert cfg.cpu_suppress.policy is SuppressPolicy.CFS_QUOTA
    assert cfg.resource_qos.be.cpu.sched_idle == 1 and not cfg.resource_qos.be.cpu.enable
    assert cfg.resource_qos.ls.memory.enable is False
    assert cfg.resource_qos.for_class(QoSClass.LSE) is cfg.resource_qos.lsr


def test_nodeslo() -> None:
    cfg = config.load(NODESLO)
    assert cfg.cpu_suppress.enable and cfg.cpu_suppress.threshold_percent == 60
    assert cfg.cpu_suppress.min_percent == 5
    ls = cfg.resource_qos.ls
    assert ls.memory.enable and ls.memory.min_limit_percent == 100 and ls.memory.throttling_percent == 80
    assert ls.network.egress_request == Bandwidth(percent=50)
    be = cfg.resource_qos.be
    assert be.cpu.enable and be.cpu.sched_idle == 1
    assert be.network.egress_limit == Bandwidth(bps=200_000_000)
    assert cfg.system.total_network_bandwidth_bps == 1_000_000_000
    assert cfg.resource_qos.lsr.memory.enable is False  # untouched classes keep defaults


def test_bare_spec_and_file(tmp_path: Path) -> None:
    path = tmp_path / "slo.yaml"
    path.write_text("resourceUsedThresholdWithBE: {enable: true}\n")
    assert config.load_file(path).cpu_suppress.enable


def _configmap(threshold: dict[str, object], qos: dict[str, object] | None = None) -> str:
    data = {"resource-threshold-config": json.dumps(threshold)}
    if qos is not None:
        data["resource-qos-config"] = json.dumps(qos)
    data["colocation-config"] = "{}"  # another koordinator key: ignored
    return json.dumps(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "slo-controller-config"}, "data": data}
    )


def test_configmap_cluster_strategy_with_node_override() -> None:
    text = _configmap(
        {
            "clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 65},
            "nodeStrategies": [
                {"name": "gpu", "nodeSelector": {"matchLabels": {"pool": "gpu"}}, "cpuSuppressThresholdPercent": 40},
            ],
        },
        {"clusterStrategy": {"beClass": {"cpuQOS": {"enable": True}}}},
    )
    assert config.load(text).cpu_suppress.threshold_percent == 65
    node = config.load(text, node_labels={"pool": "gpu"})
    assert node.cpu_suppress.threshold_percent == 40
    assert node.cpu_suppress.enable  # merged over clusterStrategy, not replacing it
    assert node.resource_qos.be.cpu.enable


#: What Koordinator's slo-controller writes when nothing is configured (every NodeSLOSpec field).
KOORDINATOR_DEFAULTS = Path(__file__).parents[1] / "fixtures" / "nodeslo-koordinator-defaults.yaml"


def test_a_nodeslo_rendered_by_koordinator_parses_to_everything_off() -> None:
    doc = yaml.safe_load(KOORDINATOR_DEFAULTS.read_text())
    cfg = config.parse(doc, source="NodeSLO node-1")
    assert cfg.cpu_suppress == config.CPUSuppressConfig(policy=SuppressPolicy.CPUSET)
    classes = cfg.resource_qos
    assert not any(c.cpu.enable or c.memory.enable or c.network.enable for c in (classes.lsr, classes.ls, classes.be))
    assert classes.ls.network == config.NetworkQoS()  # Koordinator's zeros: rates not set
    assert cfg.system.total_network_bandwidth_bps is None  # "0": the interface's speed


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (50, Bandwidth(percent=50)),
        ("50%", Bandwidth(percent=50)),
        ("100M", Bandwidth(bps=100_000_000)),
        (0, None),
        ("0%", None),
        ("0", None),
    ],
    ids=["int-is-percent", "percent-string", "quantity", "zero", "zero-percent", "zero-quantity"],
)
def test_network_rates_are_koordinators_int_or_string(value: object, expected: Bandwidth | None) -> None:
    doc = {"resourceQOSStrategy": {"lsClass": {"networkQOS": {"enable": True, "egressLimit": value}}}}
    assert config.parse(doc, source="test").resource_qos.ls.network.egress_limit == expected


def test_parse_reports_like_load() -> None:
    doc = {"kind": "NodeSLO", "spec": {"resourceUsedThresholdWithBE": {"cpuSupressMinPercent": 5}}}
    with pytest.raises(ConfigError, match=r"^NodeSLO n1: invalid QoS config:\n  spec\.resourceUsedThresholdWithBE\."):
        config.parse(doc, source="NodeSLO n1")


def test_cpuset_policy_is_accepted() -> None:
    assert (
        config.load("resourceUsedThresholdWithBE: {cpuSuppressPolicy: cpuset}").cpu_suppress.policy
        is SuppressPolicy.CPUSET
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "resourceUsedThresholdWithBE: {cpuSuppressThresholdPercent: 150}",
            "cpuSuppressThresholdPercent: must be a percent in 0..100, got 150",
        ),
        (
            "resourceUsedThresholdWithBE: {cpuSupressThresholdPercent: 50}",
            "resourceUsedThresholdWithBE.cpuSupressThresholdPercent: unknown field",
        ),
        ("resourceUsedThresholdWithBE: {enable: 'yes'}", "enable: must be true or false, got 'yes'"),
        (
            "resourceUsedThresholdWithBE: {cpuSuppressPolicy: fast}",
            "cpuSuppressPolicy: must be cfsQuota or cpuset, got 'fast'",
        ),
        ("resourceQOSStrategy: {beClass: {cpuQOS: {schedIdle: 2}}}", "beClass.cpuQOS.schedIdle: must be 0 or 1, got 2"),
        (
            "resourceQOSStrategy: {lsClass: {memoryQOS: {minLimitPercent: true}}}",
            "minLimitPercent: must be an integer, got True",
        ),
        (
            "resourceQOSStrategy: {lsClass: {networkQOS: {egressLimit: 120%}}}",
            'egressLimit: must be a percent in 0..100 (50 or "50%") or a rate',
        ),
        (
            "resourceQOSStrategy: {lsClass: {networkQOS: {egressLimit: fast}}}",
            'egressLimit: must be a percent ("50%") or a rate in bits/s ("100M")',
        ),
        ("resourceQOSStrategy: {lsClass: {networkQOS: {egressLimit: -5M}}}", "egressLimit: must be >= 0 bits/s"),
        ("resourceQOSStrategy: {midClass: {}}", "resourceQOSStrategy.midClass: unknown field"),
        ("resourceQOSStrategy: [1, 2]", "resourceQOSStrategy: expected a mapping, got list"),
        ("systemStrategy: {totalNetworkBandwidth: 50%}", "totalNetworkBandwidth: must be an absolute rate"),
        ("kind: Pod", "kind: expected NodeSLO or ConfigMap, got 'Pod'"),
        ("key: [unclosed", "not valid YAML"),
        ("- a list", "<root>: expected a mapping, got list"),
    ],
    ids=[
        "percent-range",
        "typo",
        "bool",
        "policy",
        "sched-idle",
        "int-not-bool",
        "bandwidth-percent",
        "bandwidth-garbage",
        "bandwidth-negative",
        "unknown-class",
        "not-a-mapping",
        "total-percent",
        "kind",
        "yaml",
        "list-document",
    ],
)
def test_bad_config_names_the_field(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        config.load(text, source="/etc/tessera/slo.yaml")
    assert str(e.value).startswith("/etc/tessera/slo.yaml: ")
    assert message in str(e.value)


def test_every_problem_is_reported_at_once() -> None:
    text = "resourceUsedThresholdWithBE: {cpuSuppressThresholdPercent: 101, enable: 3}\nsystemStrategy: {bogus: 1}"
    with pytest.raises(ConfigError) as e:
        config.load(text)
    lines = str(e.value).splitlines()[1:]
    assert len(lines) == 3, lines


def test_bad_configmap_json_names_the_key() -> None:
    text = json.dumps({"kind": "ConfigMap", "data": {"resource-qos-config": "{not json"}})
    with pytest.raises(ConfigError, match=r"data\.resource-qos-config: not valid JSON"):
        config.load(text)


def test_bad_node_selector_names_the_entry() -> None:
    text = _configmap({"nodeStrategies": [{"nodeSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}]})
    with pytest.raises(ConfigError, match=r"nodeStrategies\[0\]"):
        config.load(text, node_labels={})


def test_unreadable_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="missing.yaml: cannot read QoS config"):
        config.load_file(tmp_path / "missing.yaml")
