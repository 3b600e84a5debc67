"""Scheduler configuration: defaults, profiles, plugin sets, weights, and errors found at start-up."""

from __future__ import annotations

import pytest

from apis.errors import ConfigError
from scheduler.core import Scheduler, with_scoring_choice
from scheduler.framework.config import SchedulerConfig, load_config
from scheduler.framework.interfaces import ExtensionPoint
from scheduler.plugins.deviceshare import DeviceShare


def test_empty_config_is_one_default_profile() -> None:
    config = load_config("")
    assert [p.scheduler_name for p in config.profiles] == ["tessera-scheduler"]
    framework = Scheduler(config).frameworks["tessera-scheduler"]
    assert framework.plugin_names(ExtensionPoint.FILTER) == [
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "DeviceShare",
        "DynamicResources",
    ]
    assert framework.plugin_names(ExtensionPoint.RESERVE) == [
        "Reservation",
        "DeviceShare",
        "DynamicResources",
        "Coscheduling",
    ]
    # BalancedFGD ranks nodes: NodeResourcesFit and DeviceShare filter but do not score; the
    # DynamicResources score only scores pods with claims.
    assert framework.plugin_names(ExtensionPoint.SCORE) == [
        "Reservation",
        "TaintToleration",
        "NodeAffinity",
        "DynamicResources",
        "GPUFragmentation",
    ]
    assert [framework.weight(n) for n in ("TaintToleration", "NodeAffinity", "GPUFragmentation")] == [3, 2, 1]


def test_profiles_enable_disable_and_weigh_plugins() -> None:
    config = load_config(
        """
        percentageOfNodesToScore: 30
        profiles:
          - schedulerName: gpu
            plugins:
              multiPoint:
                enabled: [{name: DeviceShare, weight: 5}]
                disabled: [{name: NodeAffinity}]
              score:
                disabled: [{name: NodeResourcesFit}]
            pluginConfig:
              - name: DeviceShare
                args: {scoringStrategy: {type: MostAllocated}}
          - schedulerName: plain
            percentageOfNodesToScore: 100
            plugins:
              multiPoint: {disabled: [{name: "*"}], enabled: [{name: NodeResourcesFit}]}
        """
    )
    scheduler = Scheduler(config)
    gpu = scheduler.frameworks["gpu"]
    assert "NodeAffinity" not in gpu.plugin_names(ExtensionPoint.FILTER)
    # DeviceShare named again in multiPoint scores again; GPUFragmentation is a default.
    assert gpu.plugin_names(ExtensionPoint.SCORE) == [
        "Reservation",
        "TaintToleration",
        "DeviceShare",
        "DynamicResources",
        "GPUFragmentation",
    ]
    assert gpu.weight("DeviceShare") == 5
    assert scheduler.frameworks["plain"].plugin_names(ExtensionPoint.FILTER) == ["NodeResourcesFit"]
    assert config.percentage_for(config.profiles[0]) == 30
    assert config.percentage_for(config.profiles[1]) == 100


def test_every_shape_problem_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as err:
        load_config(
            """
            percentageOfNodesToScore: 150
            profiles:
              - schedulerName: ""
                plugins: {multiPoint: {enabled: [{name: X, weight: 0}]}, sideways: {}}
                bogus: 1
            """
        )
    message = str(err.value)
    for part in ("percentageOfNodesToScore", "schedulerName", "weight", "sideways", "bogus"):
        assert part in message


def test_plugin_problems_are_found_when_building() -> None:
    config = load_config(
        """
        profiles:
          - plugins: {multiPoint: {enabled: [{name: NoSuchPlugin}]}}
            pluginConfig:
              - {name: DeviceShare, args: {scoringStrategy: {type: Sideways}, allocationPolicy: Magic}}
              - {name: NodeName, args: {unexpected: true}}
        """
    )
    with pytest.raises(ConfigError) as err:
        Scheduler(config)
    message = str(err.value)
    for part in ("NoSuchPlugin", "Sideways", "Magic", "NodeName takes no arguments"):
        assert part in message


def test_duplicate_profiles_are_rejected() -> None:
    with pytest.raises(ConfigError, match="appears twice"):
        load_config("profiles: [{schedulerName: a}, {schedulerName: a}]")


def test_invalid_yaml_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config("profiles: [")


def test_default_config_equals_parsed_empty() -> None:
    assert load_config("{}") == SchedulerConfig()


@pytest.mark.parametrize("choice", ["LeastAllocated", "MostAllocated"])
def test_a_resource_strategy_replaces_the_default_balanced_fgd(choice: str) -> None:
    """`--scoring LeastAllocated` (or MostAllocated) still selects the resource scores: they
    score again, GPUFragmentation is gone and devices are placed topology-aware."""
    default = Scheduler().frameworks["tessera-scheduler"]
    device_share = default.plugin("DeviceShare")
    assert isinstance(device_share, DeviceShare) and device_share.policy.name == "FragmentationAware"
    chosen = Scheduler(with_scoring_choice(SchedulerConfig(), choice)).frameworks["tessera-scheduler"]
    assert chosen.plugin_names(ExtensionPoint.SCORE) == [
        "Reservation",
        "TaintToleration",
        "NodeAffinity",
        "DynamicResources",
        "NodeResourcesFit",
        "DeviceShare",
    ]
    assert chosen.plugin("GPUFragmentation") is None
    device_share = chosen.plugin("DeviceShare")
    assert isinstance(device_share, DeviceShare) and device_share.policy.name == "TopologyAware"
    assert device_share.args.scoring.type.value == choice


@pytest.mark.parametrize(
    ("point", "order", "read_at"),
    [
        ("reserve", "[{name: DeviceShare}, {name: Reservation}]", "reserve"),
        ("preFilter", "[{name: DeviceShare}, {name: Reservation}]", "preFilter"),
    ],
    ids=["reserve", "pre-filter"],
)
def test_a_profile_running_a_reader_before_its_writer_is_refused(point: str, order: str, read_at: str) -> None:
    """DeviceShare reads what Reservation writes (the nominated and the consumed Reservation):
    a profile that runs it first fails at startup, naming both, not with wrong devices later."""
    config = load_config(
        f"""
        profiles:
          - schedulerName: swapped
            plugins:
              {point}:
                disabled: [{{name: "*"}}]
                enabled: {order}
        """
    )
    with pytest.raises(ConfigError) as err:
        Scheduler(config)
    message = str(err.value)
    assert "plugin DeviceShare reads" in message
    assert f"at {read_at} before plugin Reservation writes it" in message


def test_a_profile_without_the_writer_is_no_error() -> None:
    """Without the Reservation plugin DeviceShare finds no Reservation: nothing to order."""
    config = load_config(
        """
        profiles:
          - schedulerName: plain
            plugins: {multiPoint: {disabled: [{name: Reservation}]}}
        """
    )
    assert "DeviceShare" in Scheduler(config).frameworks["plain"].plugin_names(ExtensionPoint.RESERVE)
