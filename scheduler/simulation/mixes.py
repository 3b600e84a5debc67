"""Workload mixes of the Alibaba trace's cluster that the trace does not ship: the generator
behind held-out evaluation.

The trace's pod lists other than `default` are the default list with one knob turned (the FGD
paper's generator): `gpushare40` has 40 % of the GPU demand in shares of one GPU, `multigpu20`
20 % in pods of several GPUs, `gpuspec10` a GPU model asked by 10 % of the GPU pods, `cpu050`
fewer CPU-only pods. `MixSpec` turns the same knobs — and more, at any value — so that a
placement policy can be judged on mixes it was not tuned on. `build_mix` applies them to a
pod list, deterministically per `MixSpec.seed`:

- `cpu_only`: percent of all CPU requested that CPU-only pods ask (pods dropped, or copies of
  the list's own CPU-only pods added);
- `multi_gpu`: percent of the GPU demand in pods of several GPUs (whole-GPU pods of one GPU
  replaced by copies of the list's multi-GPU pods, or the reverse);
- `shared`: percent of the GPU demand in shares of one GPU (whole-GPU pods of one GPU replaced
  by copies of the list's shares, or the reverse);
- `share_sizes`: every share of one GPU redrawn from these sizes (percent of a GPU), or from
  `random_share_sizes` sizes drawn once for the mix;
- `constrained`: percent of the GPU pods that ask for a GPU model (a required affinity on
  `node.koordinator.sh/gpu-model`), drawn by `constraint_models` among the models with a node
  that could host the pod: `pool` as `gpuspec10` asks (its pods' model lists, by kind of pod:
  share, one whole GPU, several), `capacity` one model in proportion to its GPUs, `uniform`
  one model, every model alike (the small models get most).

Pure: pod lists in, a pod list out (reading and writing CSV is the caller's).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum

from apis.errors import ValidationError
from scheduler.simulation.trace import TraceNode, TracePod

__all__ = ["ConstraintModels", "MixSpec", "build_mix", "describe", "to_csv"]

_WHOLE = 1000


class ConstraintModels(Enum):
    """How a constrained pod's GPU models are drawn."""

    POOL = "pool"
    CAPACITY = "capacity"
    UNIFORM = "uniform"


@dataclass(frozen=True, slots=True)
class MixSpec:
    """The knobs; None leaves that property of the pod list as it is. Percents are 0–100."""

    constrained: float | None = None
    constraint_models: ConstraintModels = ConstraintModels.POOL
    shared: float | None = None
    multi_gpu: float | None = None
    cpu_only: float | None = None
    share_sizes: tuple[int, ...] = ()
    random_share_sizes: int = 0
    seed: int = 0

    @property
    def empty(self) -> bool:
        return (
            self.constrained is None
            and self.shared is None
            and self.multi_gpu is None
            and self.cpu_only is None
            and not self.share_sizes
            and not self.random_share_sizes
        )

    def check(self) -> None:
        """Raises ValidationError naming the knob out of range."""
        for name in ("constrained", "shared", "multi_gpu", "cpu_only"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= 100:
                raise ValidationError("mix", f"{name}={value}: expected a percent in 0..100")
        bad = [s for s in self.share_sizes if not 1 <= s <= 99]
        if bad:
            raise ValidationError("mix", f"share size {bad[0]}: expected a percent of a GPU in 1..99")
        if self.share_sizes and self.random_share_sizes:
            raise ValidationError("mix", "give share sizes or a number of random sizes, not both")
        if not 0 <= self.random_share_sizes <= 50:
            raise ValidationError("mix", f"random share sizes {self.random_share_sizes}: expected 1..50")


def _kind(pod: TracePod) -> str:
    if pod.num_gpu <= 0 or pod.gpu_milli <= 0:
        return "cpu"
    if pod.gpu_milli < _WHOLE:
        return "share"
    return "whole" if pod.num_gpu == 1 else "multi"


def build_mix(
    pods: Sequence[TracePod],
    nodes: Sequence[TraceNode],
    spec: MixSpec,
    *,
    model_pool: Sequence[TracePod] = (),
) -> list[TracePod]:
    """`pods` with the knobs of `spec` turned (see the module docstring). `model_pool`: pods
    whose `gpu_spec` the `pool` draw takes (e.g. `gpuspec10`'s); without one, `pods`' own.
    Raises ValidationError when a knob cannot be met from what the list holds."""
    spec.check()
    rng = random.Random(f"mix-{spec.seed}")
    out = list(pods)
    sizes = spec.share_sizes
    if spec.random_share_sizes:
        sizes = tuple(sorted(rng.sample(range(5, 96), spec.random_share_sizes)))
    if sizes:
        out = [replace(p, gpu_milli=10 * rng.choice(sizes)) if _kind(p) == "share" else p for p in out]
    kinds: dict[str, list[TracePod]] = {}
    for p in out:
        kinds.setdefault(_kind(p), []).append(p)
    for _ in range(3):  # each swap moves the other fraction a little: settle both
        if spec.multi_gpu is not None:
            out = _gpu_fraction(out, "multi", spec.multi_gpu, kinds, rng)
        if spec.shared is not None:
            out = _gpu_fraction(out, "share", spec.shared, kinds, rng)
    if spec.cpu_only is not None:  # last: the swaps above change the CPU the GPU pods ask
        out = _cpu_only(out, spec.cpu_only, rng)
    if spec.constrained is not None:
        out = _constrain(out, nodes, spec, model_pool or pods, rng)
    return [replace(p, name=f"mix{spec.seed}-{i:05d}") for i, p in enumerate(out)]


def _cpu_only(pods: list[TracePod], percent: float, rng: random.Random) -> list[TracePod]:
    """CPU-only pods dropped, or copies of them added, until they ask `percent` of all CPU
    requested."""
    cpu = [p for p in pods if _kind(p) == "cpu"]
    others = [p for p in pods if _kind(p) != "cpu"]
    if percent >= 100:
        raise ValidationError("mix", "cpu_only=100 leaves no GPU pod")
    if not cpu and percent > 0:
        raise ValidationError("mix", "cpu_only: the pod list has no CPU-only pod to copy")
    # C / (C + other) = percent / 100  ⇔  C = other · percent / (100 − percent)
    target = sum(p.milli_cpu for p in others) * percent / (100 - percent)
    rng.shuffle(cpu)
    kept: list[TracePod] = []
    total = 0
    while total < target:
        pod = cpu[len(kept) % len(cpu)]
        kept.append(pod)
        total += pod.milli_cpu
    mixed = others + kept
    rng.shuffle(mixed)
    return mixed


def _gpu_fraction(
    pods: list[TracePod], kind: str, percent: float, kinds: Mapping[str, list[TracePod]], rng: random.Random
) -> list[TracePod]:
    """Pods of `kind` (share or multi) swapped with whole-GPU pods of one GPU until `kind` asks
    `percent` of the GPU demand (or nothing is left to swap); each swap takes a copy of a pod
    of the other kind from the original list (`kinds`, pods by kind)."""
    donors, wholes = kinds.get(kind, []), kinds.get("whole", [])
    if not donors or not wholes:
        raise ValidationError("mix", f"{kind}: the pod list needs pods of that kind and of one whole GPU")
    out = list(pods)
    demand = sum(p.gpu_milli_total for p in out)
    mine = sum(p.gpu_milli_total for p in out if _kind(p) == kind)
    order = list(range(len(out)))
    rng.shuffle(order)
    grow = mine < demand * percent / 100
    for i in order:
        if (mine >= demand * percent / 100) if grow else (mine <= demand * percent / 100):
            break
        pod = out[i]
        if grow and _kind(pod) == "whole":
            new = rng.choice(donors)
        elif not grow and _kind(pod) == kind:
            new = rng.choice(wholes)
        else:
            continue
        demand += new.gpu_milli_total - pod.gpu_milli_total
        mine += new.gpu_milli_total if grow else -pod.gpu_milli_total
        out[i] = replace(new, gpu_spec=pod.gpu_spec)
    return out


def _hosts(nodes: Sequence[TraceNode], pod: TracePod) -> set[str]:
    """GPU models with a node that could host `pod` on its own."""
    return {
        n.model
        for n in nodes
        if n.gpus >= pod.num_gpu and n.milli_cpu >= pod.milli_cpu and n.memory_mib >= pod.memory_mib and n.model
    }


def _constrain(
    pods: list[TracePod],
    nodes: Sequence[TraceNode],
    spec: MixSpec,
    pool: Sequence[TracePod],
    rng: random.Random,
) -> list[TracePod]:
    """`spec.constrained` percent of the GPU pods ask for models, the others for none."""
    gpu = [i for i, p in enumerate(pods) if _kind(p) != "cpu"]
    count = round(len(gpu) * (spec.constrained or 0) / 100)
    chosen = set(rng.sample(gpu, count))
    capacity: dict[str, int] = {}
    for n in nodes:
        if n.model:
            capacity[n.model] = capacity.get(n.model, 0) + n.gpus
    lists: dict[str, list[tuple[str, ...]]] = {}
    for p in pool:
        if p.gpu_spec and _kind(p) != "cpu":
            lists.setdefault(_kind(p), []).append(tuple(dict.fromkeys(p.gpu_spec)))
    if spec.constraint_models is ConstraintModels.POOL and not lists:
        raise ValidationError("mix", "constraint models 'pool': the model pool has no pod asking for a GPU model")
    hosts_of: dict[tuple[int, int, int], set[str]] = {}
    out = []
    for i, pod in enumerate(pods):
        if i not in chosen:
            out.append(replace(pod, gpu_spec=()) if pod.gpu_spec else pod)
            continue
        key = (pod.num_gpu, pod.milli_cpu, pod.memory_mib)
        hosts = hosts_of.get(key)
        if hosts is None:
            hosts = hosts_of[key] = _hosts(nodes, pod)
        models = _models(pod, hosts=hosts, how=spec.constraint_models, lists=lists, capacity=capacity, rng=rng)
        out.append(replace(pod, gpu_spec=models))
    return out


def _models(
    pod: TracePod,
    *,
    hosts: set[str],
    how: ConstraintModels,
    lists: Mapping[str, list[tuple[str, ...]]],
    capacity: Mapping[str, int],
    rng: random.Random,
) -> tuple[str, ...]:
    if not hosts:
        return ()
    if how is ConstraintModels.POOL:
        fitting = [m for m in lists.get(_kind(pod), ()) if hosts.intersection(m)]
        if fitting:
            return rng.choice(fitting)
    models = sorted(hosts)
    if how is ConstraintModels.UNIFORM:
        return (rng.choice(models),)
    return (rng.choices(models, weights=[capacity[m] for m in models])[0],)


def describe(pods: Sequence[TracePod]) -> dict[str, float]:
    """What the knobs measure, read back from a pod list: percent of the GPU demand in shares
    and in pods of several GPUs, percent of the CPU asked by CPU-only pods, percent of the GPU
    pods asking for a model."""
    demand = sum(p.gpu_milli_total for p in pods) or 1
    cpu = sum(p.milli_cpu for p in pods) or 1
    gpu_pods = [p for p in pods if _kind(p) != "cpu"]
    return {
        "shared": 100 * sum(p.gpu_milli_total for p in pods if _kind(p) == "share") / demand,
        "multi_gpu": 100 * sum(p.gpu_milli_total for p in pods if _kind(p) == "multi") / demand,
        "cpu_only": 100 * sum(p.milli_cpu for p in pods if _kind(p) == "cpu") / cpu,
        "constrained": 100 * sum(1 for p in gpu_pods if p.gpu_spec) / (len(gpu_pods) or 1),
    }


def to_csv(pods: Sequence[TracePod]) -> str:
    """The pod list in the trace's columns (`trace.parse_pods` reads it back)."""
    rows = ["name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec"]
    rows += [f"{p.name},{p.milli_cpu},{p.memory_mib},{p.num_gpu},{p.gpu_milli},{'|'.join(p.gpu_spec)}" for p in pods]
    return "\n".join(rows) + "\n"
