"""The scheduler's explanation of a pending pod, as the steps a person reads in order.

`tessera explain` prints the scheduler's `Explain` answer for one pod; the dashboard shows the
same answer for every pending pod, condensed into a chain that follows the order in which the
scheduler decides: quota (ElasticQuota), gang (Coscheduling), nodes (fit, affinity, taints, ...),
devices (DeviceShare, GPUFragmentation). Pure: the gRPC call is in `dashboard.sources`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Final

from proto.scheduler.v1 import scheduler_pb2 as pb

__all__ = ["STAGES", "Step", "chain", "stage_of"]

#: The chain's stages, in the order the scheduler meets them.
STAGES: Final = ("quota", "gang", "nodes", "devices")
_STAGE_OF_PLUGIN: Final = {
    "ElasticQuota": "quota",
    "Coscheduling": "gang",
    "DeviceShare": "devices",
    "GPUFragmentation": "devices",
}
#: Distinct (plugin, reason) lines shown per pod; the rest are counted in one line.
_MAX_REASONS: Final = 6


@dataclass(frozen=True, slots=True)
class Step:
    stage: str  # one of STAGES
    plugin: str
    text: str


def stage_of(plugin: str) -> str:
    """The chain stage a plugin's reason belongs to; plugins not named are about nodes."""
    return _STAGE_OF_PLUGIN.get(plugin, "nodes")


def chain(response: pb.ExplainResponse) -> tuple[Step, ...]:
    """The steps of one `Explain` answer, ordered quota → gang → nodes → devices.

    A PreFilter rejection (the pod's quota, its gang, an invalid request) is the whole story:
    it applies to every node. Otherwise each distinct node reason is one step with the number of
    nodes that gave it, most common first within its stage, and the nearest node's shortfall
    closes the chain. Empty when the pod is not pending.
    """
    if response.state != "pending":
        return ()
    if response.HasField("rejected"):
        plugin = response.rejected.plugin
        return (Step(stage_of(plugin), plugin or "PreFilter", f"{response.rejected.reason} (every node)"),)
    counts = Counter((reason.plugin, reason.reason) for node in response.nodes for reason in node.reasons)
    ranked = sorted(counts.items(), key=lambda kv: (STAGES.index(stage_of(kv[0][0])), -kv[1], kv[0]))
    steps = [
        Step(stage_of(plugin), plugin, f"{n} node{'s' if n != 1 else ''}: {reason}")
        for (plugin, reason), n in ranked[:_MAX_REASONS]
    ]
    if len(ranked) > _MAX_REASONS:
        steps.append(Step("nodes", "", f"… and {len(ranked) - _MAX_REASONS} more reasons"))
    if response.nearest:
        miss = response.nearest[0]
        steps.append(Step("devices", "", f"nearest node {miss.node} lacks {'; '.join(miss.missing)}"))
    if not steps and response.message:
        steps.append(Step("nodes", "", response.message))
    return tuple(steps)
