"""`tessera bench TARGET`: benchmarks of hot paths, one module `cli/bench/<target>.py` per target.

A target module provides `add_arguments(parser)` and `run(args, report) -> int`: it measures and
puts what it measured into `report` (`cli.bench._report.Report`), which prints it the same way
for every target: a table by default, one JSON object with `-o json`. Targets are found by name,
so adding a benchmark needs no change here; modules whose names start with `_` are helpers.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil

from cli.bench._report import OUTPUTS, Report


def _targets() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="target", metavar="TARGET", required=True)
    for target in _targets():
        mod = importlib.import_module(f"{__name__}.{target}")
        p = sub.add_parser(target.replace("_", "-"), help=(mod.__doc__ or "").strip().splitlines()[0])
        mod.add_arguments(p)
        p.add_argument(
            "-o",
            "--output",
            choices=OUTPUTS,
            default="table",
            help="table (default: rows as they are measured) or json (one object on stdout at the end)",
        )
        p.set_defaults(bench=mod.run)


def run(args: argparse.Namespace) -> int:
    report = Report(args.target, output=args.output)
    code = int(args.bench(args, report))
    report.finish()
    return code
