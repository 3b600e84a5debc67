"""`tessera bench TARGET`: benchmarks of hot paths, one module `cli/bench_<target>.py` per target.

A target module provides `add_arguments(parser)` and `run(args) -> int`, like a subcommand; it is
found by name, so adding a benchmark needs no change here.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil

import cli


def _targets() -> list[str]:
    return sorted(
        m.name.removeprefix("bench_") for m in pkgutil.iter_modules(cli.__path__) if m.name.startswith("bench_")
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="target", metavar="TARGET", required=True)
    for target in _targets():
        mod = importlib.import_module(f"cli.bench_{target}")
        p = sub.add_parser(target.replace("_", "-"), help=(mod.__doc__ or "").strip().splitlines()[0])
        mod.add_arguments(p)
        p.set_defaults(bench=mod.run)


def run(args: argparse.Namespace) -> int:
    return int(args.bench(args))
