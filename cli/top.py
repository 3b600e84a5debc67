"""`tessera top`: the dashboard's GPU map in the terminal, one line per node.

    NODE    GPUS                                            ALLOC  IDLE  FRAG
    sim-1   [████][██▌ ][░░░░][    ][XID79][    ][    ][    ]  3.63  3.37  1.00

Each GPU is a cell filled in eighths by the `gpu-core` its pods hold; `░` marks idle capacity no
pending pod fits (fragmented, as the dashboard defines it: docs/user/dashboard.md); an unhealthy
GPU shows its reason. Amounts are in GPUs. The same pure view as the web page
(`dashboard.view.cluster`), read once through the API (`--watch N`: again every N seconds).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Final

from apis.crds.device import Device
from apis.errors import ConfigError
from apis.k8s.core import Pod
from dashboard import gpumap, view
from kube import errors
from kube.client import Client, ClientSettings
from kube.crds import devices
from kube.resources import PODS

#: Characters per GPU cell, and the partial blocks that fill one character in eighths.
_CELL: Final = 4
_EIGHTHS: Final = " ▏▎▍▌▋▊▉█"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    ClientSettings.add_arguments(parser)
    parser.add_argument("-w", "--watch", type=float, metavar="SECONDS", help="print again every SECONDS")
    parser.add_argument("--pods", action="store_true", help="also list which pods hold each GPU")


def run(args: argparse.Namespace) -> int:
    if args.watch is not None and not args.watch > 0:
        raise ConfigError(f"--watch {args.watch:g}: must be a number of seconds above 0")
    with Client.from_settings(ClientSettings.from_args(args, user_agent="tessera-top")) as client:
        while True:
            try:
                found = devices(client).list()
                pods = [Pod.from_dict(p) for p in client.resource(PODS).list_all().items]
            except errors.APIError as e:
                print(f"tessera top: the API server at {client.host} did not answer: {e}", file=sys.stderr)
                return 1
            text = render(found, pods, show_pods=args.pods)
            if args.watch is None:
                print(text)
                return 0
            print("\x1b[H\x1b[2J" + text, flush=True)
            time.sleep(args.watch)


def cell(gpu: gpumap.GPU, fragmented: int) -> str:
    """One GPU as `_CELL` characters: filled by its allocated share, `░` for fragmented idle."""
    if not gpu.healthy:
        return gpu.problem[:_CELL].upper().ljust(_CELL, "!")
    eighths = round(gpu.used_core * _CELL * 8 / gpumap.WHOLE)
    full, part = divmod(eighths, 8)
    filled = "█" * full + (_EIGHTHS[part] if part else "")
    rest = _CELL - len(filled)
    return filled + ("░" if fragmented else " ") * rest


def _gpus(percent: int) -> str:
    return f"{percent / gpumap.WHOLE:.2f}"


def render(found: Sequence[Device], pods: Sequence[Pod], *, show_pods: bool = False) -> str:
    """The table for people; pure (tests call it with objects they make)."""
    built, fragments, totals = view.cluster(found, pods)
    width = max([4, *(len(n.name) for n in built.nodes)])
    gpus_width = max((len(n.gpus) * (_CELL + 2) for n in built.nodes), default=4)
    lines = [f"{'NODE':<{width}}  {'GPUS':<{gpus_width}}  ALLOC  IDLE  FRAG"]
    for node in built.nodes:
        cells = "".join(f"[{cell(g, fragments.get((node.name, g.minor), 0))}]" for g in node.gpus)
        cells = cells.ljust(gpus_width)
        healthy = [g for g in node.gpus if g.healthy]
        frag = sum(fragments.get((node.name, g.minor), 0) for g in node.gpus)
        lines.append(
            f"{node.name:<{width}}  {cells}  {_gpus(sum(g.used_core for g in healthy))}"
            f"  {_gpus(sum(g.free_core for g in healthy))}  {_gpus(frag)}"
        )
        if show_pods:
            for gpu in node.gpus:
                for share in gpu.shares:
                    lines.append(f"{'':<{width}}    GPU {gpu.minor}: {share.pod} gpu-core={share.core}")
    lines.append(
        f"{totals.gpus} GPUs ({totals.unhealthy_gpus} unhealthy): {_gpus(totals.allocated)} allocated, "
        f"{_gpus(totals.idle)} idle, {_gpus(totals.fragmented)} fragmented"
    )
    lines += [f"warning: {p}" for p in built.problems]
    return "\n".join(lines)
