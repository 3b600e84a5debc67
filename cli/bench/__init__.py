"""`tessera bench TARGET`: benchmarks of hot paths, one module `cli/bench/<target>.py` per target.

A target module provides `add_arguments(parser)` and `run(args) -> int`, like a subcommand; it is
found by name, so adding a benchmark needs no change here. Modules whose names start with `_`
are shared helpers, not targets.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil


def _targets() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="target", metavar="TARGET", required=True)
    for target in _targets():
        mod = importlib.import_module(f"{__name__}.{target}")
        p = sub.add_parser(target.replace("_", "-"), help=(mod.__doc__ or "").strip().splitlines()[0])
        mod.add_arguments(p)
        p.set_defaults(bench=mod.run)


def run(args: argparse.Namespace) -> int:
    return int(args.bench(args))
