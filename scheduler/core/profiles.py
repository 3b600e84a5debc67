"""Profile editors: the switches `tessera what-if`, `simulate` and `bench scheduler` turn on a
SchedulerConfig (`--scoring`, `--percentage-of-nodes-to-score`), written as changes to every
profile so that one flag means the same thing whatever the config file says.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from scheduler import fragmentation
from scheduler.framework.config import PluginRef, PluginSet, SchedulerConfig
from scheduler.framework.interfaces import ExtensionPoint
from scheduler.framework.scoring import ScoringStrategyType
from scheduler.plugins import FGD_PLUGIN, SCORING_STRATEGY_PLUGINS, deviceshare, elasticquota
from scheduler.plugins.gpufragmentation import DEFAULT_BALANCE_PERCENT

__all__ = [
    "BALANCED_FGD",
    "FGD",
    "FGD_CHOICES",
    "SCORING_CHOICES",
    "with_elastic_quota",
    "with_fgd",
    "with_percentage_of_nodes_to_score",
    "with_scoring",
    "with_scoring_choice",
]

#: The `--scoring` choice that places by fragmentation (FGD, as the paper) rather than by a
#: resource strategy.
FGD = "FGD"
#: FGD plus the CPU/memory balance term (`fragmentation.Balance`): GPU that the workload could
#: not feed with the node's CPU and memory counts as lost too.
BALANCED_FGD = "BalancedFGD"
#: The `--scoring` choices that measure against a target workload.
FGD_CHOICES: tuple[str, ...] = (FGD, BALANCED_FGD)
#: What `--scoring` accepts: the resource-allocation strategies, FGD and BalancedFGD.
SCORING_CHOICES: tuple[str, ...] = (*(t.value for t in ScoringStrategyType), FGD, BALANCED_FGD)


def with_scoring(config: SchedulerConfig, strategy: ScoringStrategyType) -> SchedulerConfig:
    """The config with every profile ranking nodes by a resource strategy instead of the
    default BalancedFGD: `scoringStrategy.type` set on the resource-scoring plugins
    (NodeResourcesFit, DeviceShare) and their scores on, GPUFragmentation off, DeviceShare
    placing devices topology-aware (as it did before FGD). One switch between spreading and
    packing, whatever the config file says."""
    profiles = []
    for profile in config.profiles:
        plugin_args = dict(profile.plugin_args)
        plugin_args.pop(FGD_PLUGIN, None)
        for name in SCORING_STRATEGY_PLUGINS:
            args = dict(plugin_args.get(name) or {})
            current = args.get("scoringStrategy")
            strategy_args = dict(current) if isinstance(current, Mapping) else {}
            strategy_args["type"] = strategy.value
            args["scoringStrategy"] = strategy_args
            plugin_args[name] = args
        device_args = dict(plugin_args[deviceshare.NAME])
        device_args["allocationPolicy"] = deviceshare.TopologyAwarePolicy.name
        device_args.pop("targetWorkload", None)
        plugin_args[deviceshare.NAME] = device_args
        multi = dataclasses.replace(
            profile.multi_point,
            enabled=tuple(r for r in profile.multi_point.enabled if r.name != FGD_PLUGIN),
            disabled=profile.multi_point.disabled | {FGD_PLUGIN},
        )
        points = dict(profile.points)
        score = points.get(ExtensionPoint.SCORE, PluginSet())
        named = {r.name for r in score.enabled}
        points[ExtensionPoint.SCORE] = dataclasses.replace(
            score,
            enabled=(*score.enabled, *(PluginRef(n) for n in SCORING_STRATEGY_PLUGINS if n not in named)),
            disabled=score.disabled - set(SCORING_STRATEGY_PLUGINS),
        )
        profiles.append(dataclasses.replace(profile, multi_point=multi, points=points, plugin_args=plugin_args))
    return dataclasses.replace(config, profiles=tuple(profiles))


def with_percentage_of_nodes_to_score(config: SchedulerConfig, percentage: int) -> SchedulerConfig:
    """The config with every profile scoring `percentage` % of nodes (100: all feasible nodes)."""
    profiles = tuple(dataclasses.replace(p, percentage_of_nodes_to_score=None) for p in config.profiles)
    return dataclasses.replace(config, profiles=profiles, percentage_of_nodes_to_score=percentage)


def with_fgd(
    config: SchedulerConfig,
    workload: Sequence[tuple[fragmentation.TaskShape, int]] = (),
    *,
    balanced: bool = False,
    prior: bool = False,
) -> SchedulerConfig:
    """The config with every profile placing by FGD (Fragmentation Gradient Descent): the
    GPUFragmentation plugin scores nodes, DeviceShare places a share of one GPU by its
    FragmentationAware policy, and the resource-allocation scores (NodeResourcesFit,
    DeviceShare) are disabled so that, as in the paper, the fragmentation measure alone ranks
    nodes (other preferences — taints, preferred affinity — still count). Both measure against
    `workload` (shape, weight) when given, else against a workload learned from the pods seen.
    `prior`: the workload is where learning starts (a configured prior), not fixed.
    `balanced`: BalancedFGD (GPUFragmentation's CPU/memory balance term, the workload's packing
    plan and model scarcity on), else the paper's FGD (all three off).
    """
    target: dict[str, object] = dict(fragmentation.shapes_to_args(workload)) if workload else {}
    if prior and workload:
        target["learn"] = {}
    if not balanced:
        target["packingPlan"] = False
        target["modelScarcity"] = False
    workload_args = {"targetWorkload": target} if target else {}
    balance = {"balancePercent": DEFAULT_BALANCE_PERCENT if balanced else 0}
    profiles = []
    for profile in config.profiles:
        plugin_args = dict(profile.plugin_args)
        device_args = dict(plugin_args.get(deviceshare.NAME) or {})
        device_args["allocationPolicy"] = deviceshare.FragmentationAwarePolicy.name
        device_args.update(workload_args)
        plugin_args[deviceshare.NAME] = device_args
        plugin_args[FGD_PLUGIN] = {**(plugin_args.get(FGD_PLUGIN) or {}), **workload_args, **balance}
        multi = _enabled(profile.multi_point, FGD_PLUGIN)
        points = dict(profile.points)
        score = points.get(ExtensionPoint.SCORE, PluginSet())
        points[ExtensionPoint.SCORE] = dataclasses.replace(
            score, disabled=score.disabled | set(SCORING_STRATEGY_PLUGINS) - {FGD_PLUGIN}
        )
        profiles.append(dataclasses.replace(profile, multi_point=multi, points=points, plugin_args=plugin_args))
    return dataclasses.replace(config, profiles=tuple(profiles))


def with_elastic_quota(config: SchedulerConfig) -> SchedulerConfig:
    """The config with the ElasticQuota plugin enabled in every profile (what-if turns it on
    when its snapshot holds ElasticQuota objects)."""
    profiles = tuple(
        dataclasses.replace(p, multi_point=_enabled(p.multi_point, elasticquota.NAME)) for p in config.profiles
    )
    return dataclasses.replace(config, profiles=profiles)


def _enabled(multi: PluginSet, name: str) -> PluginSet:
    """`multi` with plugin `name` enabled (unchanged when it already is)."""
    if any(ref.name == name for ref in multi.enabled):
        return multi
    return dataclasses.replace(multi, enabled=(*multi.enabled, PluginRef(name)))


def with_scoring_choice(
    config: SchedulerConfig,
    choice: str,
    workload: Sequence[tuple[fragmentation.TaskShape, int]] = (),
    *,
    prior: bool = False,
) -> SchedulerConfig:
    """`--scoring`: a resource-allocation strategy (`with_scoring`) or FGD / BalancedFGD
    (`with_fgd`, with `workload` as its target, or as its prior). Raises ValueError for another
    choice."""
    if choice in FGD_CHOICES:
        return with_fgd(config, workload, balanced=choice == BALANCED_FGD, prior=prior)
    return with_scoring(config, ScoringStrategyType(choice))
