"""Entry point of the `tessera` console script."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Final

from apis.errors import ConfigError
from kube import gcpolicy, logs

# name -> (module, one-line help). Only the chosen command's module is imported.
COMMANDS: Final[dict[str, tuple[str, str]]] = {
    "apiserver": ("cli.apiserver", "run the embedded Kubernetes API server"),
    "agent": ("cli.agent", "run the node agent (device discovery, health, metrics, QoS, hooks)"),
    "runtime-proxy": ("cli.runtime_proxy", "run the CRI runtime proxy between kubelet and containerd"),
    "scheduler": ("cli.scheduler", "run the device-aware scheduler"),
    "controller": ("cli.controller", "run the controller manager"),
    "descheduler": ("cli.descheduler", "run the descheduler: PodMigrationJobs executed safely, GPU defragmentation"),
    "kube-controller-manager": (
        "cli.kube_controller_manager",
        "run the workload controllers of the embedded cluster (Deployments, Jobs, GC; tessera up runs it)",
    ),
    "up": ("cli.up", "run the whole system on this machine (embedded API server, all components)"),
    "dashboard": ("cli.dashboard", "serve the web UI: GPU map, pending pods, gangs, quotas, scheduler health"),
    "top": ("cli.top", "print the GPU map in the terminal"),
    "explain": ("cli.explain", "explain why a pod is pending"),
    "deschedule": ("cli.deschedule", "print which pods to move, and where, so a pending pod fits (defragmentation)"),
    "what-if": ("cli.whatif", "schedule pods from YAML snapshots without a cluster"),
    "simulate": ("cli.simulate", "replay the Alibaba GPU trace through the scheduling core"),
    "bench": ("cli.bench", "benchmark a component's hot path"),
    "quota": ("cli.quota", "show the ElasticQuota tree: min, max, runtime, used and request per resource"),
    "gpu": ("cli.gpu", "ask a node's agent, as you, to clear a GPU fault (or inject one on simulated GPUs)"),
}


def build_parser(selected: str | None = None) -> argparse.ArgumentParser:
    """The full parser; only the selected subcommand's module is imported (for its flags)."""
    parser = argparse.ArgumentParser(
        prog="tessera",
        description="Tessera: fine-grained GPU and device sharing for Kubernetes.",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--v", type=int, default=2, metavar="N", help="log verbosity (klog style; default 2)")
    common.add_argument("--logging-format", choices=logs.FORMATS, default="text", help="log format")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, parents=[common], help=help_text, description=help_text)
        if name == selected:
            mod = importlib.import_module(module)
            mod.add_arguments(p)
            p.set_defaults(run=mod.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    selected = next((a for a in args_list if not a.startswith("-")), None)
    parser = build_parser(selected)
    args = parser.parse_args(args_list)
    run = args.run
    logs.setup(args.v, args.logging_format)
    gcpolicy.install()  # what the command imported and parsed is frozen; see kube/gcpolicy.py
    try:
        return int(run(args) or 0)
    except ConfigError as e:  # flags or configuration that cannot work: say so in one line
        print(f"tessera {args.command}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
