"""GPU fragmentation of a node against a target workload, after FGD (Weng et al., "Beware of
Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX
ATC'23). Shared by the GPUFragmentation score plugin (which node) and DeviceShare's
FragmentationAware policy (which GPU on it): plugins never import each other, so the domain
sits in its own layer below them and above `scheduler.framework`.

One job per module, all pure (plain values and functions; no I/O, no clock):

- `shapes`: task shapes, the target workload, and the shape of a pod;
- `measure`: the measure F_n and the exact, fast loss of usable GPU a placement causes;
- `plan`: which shares of one GPU the workload should put together (`PackingPlan`);
- `args`: `targetWorkload` arguments, parsed (`parse_workload_args`) and written back
  (`shapes_to_args`);
- `supply`: the cluster's GPUs by model, which make a shape that accepts few of them weigh more;
- `learner`: the workload learned online from the pods seen, one per profile.

Callers import the names below from the package: `from scheduler import fragmentation`.
"""

from scheduler.fragmentation.args import LearnSettings, WorkloadArgs, parse_workload_args, shapes_to_args
from scheduler.fragmentation.learner import WorkloadLearner, shared_learner
from scheduler.fragmentation.measure import (
    Balance,
    Demand,
    NodeResources,
    NodeTable,
    WorkloadIndex,
    can_run,
    fragmentation,
    gpu_free,
    usable,
)
from scheduler.fragmentation.plan import PackingPlan
from scheduler.fragmentation.shapes import (
    WEIGHT_SCALE,
    WHOLE_GPU,
    TargetWorkload,
    TaskShape,
    gpu_models,
    gpu_share,
    task_shape,
    workload_of,
)
from scheduler.fragmentation.supply import NO_SUPPLY, GPUSupply, SupplyTracker, shared_supply

__all__ = [
    "NO_SUPPLY",
    "WEIGHT_SCALE",
    "WHOLE_GPU",
    "Balance",
    "Demand",
    "GPUSupply",
    "LearnSettings",
    "NodeResources",
    "NodeTable",
    "PackingPlan",
    "SupplyTracker",
    "TargetWorkload",
    "TaskShape",
    "WorkloadArgs",
    "WorkloadIndex",
    "WorkloadLearner",
    "can_run",
    "fragmentation",
    "gpu_free",
    "gpu_models",
    "gpu_share",
    "parse_workload_args",
    "shapes_to_args",
    "shared_learner",
    "shared_supply",
    "task_shape",
    "usable",
    "workload_of",
]
