"""Every scheduler plugin, by name: the registry profiles are built from.

A plugin is a folder (`plugin.py`, `reasons.py`, `args.py` when it takes arguments, a README)
exposing `NAME` and `new(args, handle)`. Plugins never import each other; what two of them share
lives below them in `scheduler.framework` (or in `apis`).
"""

from __future__ import annotations

from typing import Final

from scheduler.framework.config import PluginRef
from scheduler.framework.runtime import Registry
from scheduler.plugins import (
    coscheduling,
    defaultpreemption,
    deviceshare,
    dynamicresources,
    elasticquota,
    gpufragmentation,
    nodeaffinity,
    nodename,
    noderesources,
    nodeunschedulable,
    reservation,
    tainttoleration,
)

__all__ = ["DEFAULT_PLUGINS", "FGD_PLUGIN", "OPT_IN_PLUGINS", "REGISTRY", "SCORING_STRATEGY_PLUGINS"]

REGISTRY: Final[Registry] = {
    reservation.NAME: reservation.new,
    nodeunschedulable.NAME: nodeunschedulable.new,
    nodename.NAME: nodename.new,
    tainttoleration.NAME: tainttoleration.new,
    nodeaffinity.NAME: nodeaffinity.new,
    noderesources.NAME: noderesources.new,
    deviceshare.NAME: deviceshare.new,
    dynamicresources.NAME: dynamicresources.new,
    gpufragmentation.NAME: gpufragmentation.new,
    elasticquota.NAME: elasticquota.new,
    coscheduling.NAME: coscheduling.new,
    defaultpreemption.NAME: defaultpreemption.new,
}

#: Enabled in every profile unless disabled, in this order, with kube-scheduler's score weights.
#: Nodes are ranked by GPUFragmentation (BalancedFGD, docs/scheduling.md), so the resource
#: scores of NodeResourcesFit and DeviceShare are off unless a profile enables them under
#: `score` (`--scoring LeastAllocated` does: `scheduler.core.with_scoring`).
DEFAULT_PLUGINS: Final = (
    # First: DeviceShare reads what it writes at PreFilter and Reserve (`Framework.build` checks).
    PluginRef(reservation.NAME, reservation.DEFAULT_WEIGHT),
    PluginRef(nodeunschedulable.NAME),
    PluginRef(nodename.NAME),
    PluginRef(tainttoleration.NAME, 3),
    PluginRef(nodeaffinity.NAME, 2),
    PluginRef(noderesources.NAME, 1, score=False),
    PluginRef(deviceshare.NAME, 1, score=False),
    # After DeviceShare: its Reserve adds the claims' GPUs to what DeviceShare reserved for the pod.
    PluginRef(dynamicresources.NAME, 1),
    PluginRef(gpufragmentation.NAME, 1),
    PluginRef(coscheduling.NAME),
    # PostFilter only, after every other PostFilter (kube's and koord-scheduler's default).
    PluginRef(defaultpreemption.NAME),
)

#: Registered but enabled only when a profile asks for them (`multiPoint.enabled`).
OPT_IN_PLUGINS: Final = (elasticquota.NAME,)

#: The node-scoring plugin of FGD placement (`scheduler.core.with_fgd`).
FGD_PLUGIN: Final = gpufragmentation.NAME

#: Plugins whose `scoringStrategy` argument `--scoring` on the command line sets.
SCORING_STRATEGY_PLUGINS: Final = (noderesources.NAME, deviceshare.NAME)
