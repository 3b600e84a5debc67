"""How tightly the GPU shares of a trace pack when placed offline: a reference for issue 18's goal.

Under the published fill-up protocol (`scheduler.simulation.replay`), at arrived load x = 100 the
unallocated GPU equals the demand of the pods that failed, which equals the room left beside
shares on partly used GPUs. This script takes, per seed, the shares of one GPU that arrive up to
x = 100 (the same shuffled, topped-up order `tessera simulate` replays) and packs them offline,
largest first, each into the first GPU it fits (first-fit decreasing, a classic near-optimal
bin-packing heuristic that sees every share in advance). The room it leaves, as a percentage of
the cluster's GPUs, is what an online scheduler — which sees shares one at a time and must place
each one that fits — is compared with in docs/scheduling.md ("How far an online policy can go").

    PYTHONPATH=. .venv/bin/python hack/share_packing_reference.py [--trace default] [--seeds 1-10]

Not a strict lower bound (first-fit decreasing is not optimal, and a scheduler that lets late
shares fail leaves less room beside them), and CPU, memory and GPU models are ignored.
"""

from __future__ import annotations

import argparse
import collections
import statistics
from pathlib import Path

from cli.simulate import DEFAULT_DATA
from scheduler.fragmentation import WHOLE_GPU
from scheduler.simulation import replay, trace


def shares_until_full(pods: list[trace.TracePod], capacity_milli: int, seed: int) -> list[int]:
    """Percent of one GPU of every share that arrives before the arrived demand passes capacity."""
    out = []
    arrived = 0
    for pod in replay.workload(pods, capacity_milli, seed):
        arrived += pod.gpu_milli_total
        if arrived > capacity_milli:
            break
        if pod.num_gpu == 1 and 0 < pod.gpu_milli < 1000:
            out.append(-(-pod.gpu_milli // 10))  # as the scheduler requests it: whole percents
    return out


def first_fit_decreasing(shares: list[int]) -> list[int]:
    """Room left on each GPU the shares were packed onto (percent)."""
    room: list[int] = []
    for share in sorted(shares, reverse=True):
        for i, left in enumerate(room):
            if left >= share:
                room[i] = left - share
                break
        else:
            room.append(WHOLE_GPU - share)
    return room


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--trace", default="default")
    parser.add_argument("--seeds", default="1-10", help="first-last")
    args = parser.parse_args()
    with (args.data / "openb_node_list_gpu_node.csv").open(encoding="utf-8") as f:
        nodes = trace.parse_nodes(f)
    with (args.data / f"openb_pod_list_{args.trace}.csv").open(encoding="utf-8") as f:
        pods = trace.parse_pods(f)
    gpus = sum(n.gpus for n in nodes)
    first, last = (int(s) for s in args.seeds.split("-"))
    wasted = []
    for seed in range(first, last + 1):
        room = first_fit_decreasing(shares_until_full(pods, gpus * 1000, seed))
        pct = 100 * sum(room) / (gpus * WHOLE_GPU)
        wasted.append(pct)
        biggest = collections.Counter(r for r in room if r).most_common(3)
        print(f"seed {seed}: {len(room)} GPUs hold shares, {pct:.2f} % of {gpus} GPUs left beside them; {biggest}")
    sd = statistics.stdev(wasted) if len(wasted) > 1 else 0.0
    print(f"{args.trace}: first-fit decreasing leaves {statistics.fmean(wasted):.2f} % (sd {sd:.2f})")


if __name__ == "__main__":
    main()
