"""`tessera simulate`'s mix knobs: replay a mix of the trace's cluster that the trace does not
ship (`scheduler.simulation.mixes`), e.g. a third of the GPU pods asking for a GPU model.

`--constrained 33 --mix-seed 4` turns the pod list (`--trace`/`--pods`) into that mix before
the replay; `--write-pods FILE` writes the mix as a pod list CSV and runs nothing, so a mix can
be kept aside and replayed later with `--pods FILE`. With any knob the paper's row is not
printed: it belongs to the trace's own mixes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from scheduler.simulation import mixes, trace

__all__ = ["add_arguments", "apply", "spec_from", "summary"]

#: The trace's own constrained pods, whose model lists `--constraint-models pool` draws.
POOL_TRACE = "gpuspec10"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "mix", "turn the pod list into another mix of the same cluster first (see docs/scheduling.md)"
    )
    group.add_argument(
        "--constrained", type=float, metavar="PCT", help="percent of the GPU pods asking for a GPU model (0-100)"
    )
    group.add_argument(
        "--constraint-models",
        choices=[m.value for m in mixes.ConstraintModels],
        default=mixes.ConstraintModels.POOL.value,
        help=f"how a constrained pod's models are drawn: pool (as DATA/openb_pod_list_{POOL_TRACE}.csv asks, "
        "the default), capacity (one model, by its GPUs), uniform (one model, all alike)",
    )
    group.add_argument("--shared", type=float, metavar="PCT", help="percent of the GPU demand in shares of one GPU")
    group.add_argument("--multi-gpu", type=float, metavar="PCT", help="percent of the GPU demand in multi-GPU pods")
    group.add_argument("--cpu-only", type=float, metavar="PCT", help="percent of the CPU asked by CPU-only pods")
    group.add_argument(
        "--share-sizes", metavar="PCT[,PCT…]", help="redraw every share of one GPU from these percents of a GPU"
    )
    group.add_argument(
        "--random-share-sizes", type=int, default=0, metavar="N", help="redraw every share from N random sizes"
    )
    group.add_argument("--mix-seed", type=int, default=0, metavar="N", help="the mix's own seed (default 0)")
    group.add_argument(
        "--write-pods", type=Path, metavar="FILE.csv", help="write the mixed pod list and exit (replay it with --pods)"
    )


def spec_from(args: argparse.Namespace) -> mixes.MixSpec:
    """The knobs given. Raises ValueError (a bad list) or ValidationError (out of range)."""
    sizes: tuple[int, ...] = ()
    if args.share_sizes:
        try:
            sizes = tuple(int(s) for s in args.share_sizes.split(","))
        except ValueError:
            raise ValueError(f"--share-sizes: expected percents like 25,50,75, got {args.share_sizes!r}") from None
    spec = mixes.MixSpec(
        constrained=args.constrained,
        constraint_models=mixes.ConstraintModels(args.constraint_models),
        shared=args.shared,
        multi_gpu=args.multi_gpu,
        cpu_only=args.cpu_only,
        share_sizes=sizes,
        random_share_sizes=args.random_share_sizes,
        seed=args.mix_seed,
    )
    spec.check()
    return spec


def apply(
    args: argparse.Namespace, spec: mixes.MixSpec, pods: list[trace.TracePod], nodes: list[trace.TraceNode]
) -> list[trace.TracePod]:
    """The pod list with the knobs turned (unchanged without any). Reads the model pool from
    the data folder when the draw needs it. Raises OSError or ValidationError."""
    if spec.empty:
        return pods
    pool: list[trace.TracePod] = []
    needs_pool = spec.constrained and spec.constraint_models is mixes.ConstraintModels.POOL
    if needs_pool and not any(p.gpu_spec for p in pods):
        path = args.data / f"openb_pod_list_{POOL_TRACE}.csv"
        with path.open(encoding="utf-8") as f:
            pool = trace.parse_pods(f, source=str(path))
    return mixes.build_mix(pods, nodes, spec, model_pool=pool)


def summary(pods: list[trace.TracePod]) -> str:
    """`shared 28.5%, multi_gpu 7.3%, …`: what the knobs measure on `pods`."""
    return ", ".join(f"{k} {v:.1f}%" for k, v in mixes.describe(pods).items())
