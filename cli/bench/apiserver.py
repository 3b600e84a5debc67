"""The embedded API server: creates/s, list latency, watch fan-out and the per-pod request mix.

Starts `tessera apiserver` as a separate process with a fresh SQLite data directory and drives it
over HTTP (see cli/bench/_apiserver_load.py for what each phase does).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path

from cli.bench._apiserver_load import BenchSettings, Result, run_benchmarks
from cli.launchers.apiserver import run_apiserver


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = BenchSettings()
    parser.add_argument("--pods", type=int, default=defaults.pods, help="pods to create and then list")
    parser.add_argument("--concurrency", type=int, default=defaults.concurrency, help="requests in flight")
    parser.add_argument("--watchers", type=int, default=defaults.watchers, help="watchers in the fan-out phase")
    parser.add_argument("--fanout-writes", type=int, default=defaults.fanout_writes, help="writes the watchers observe")
    parser.add_argument(
        "--pipeline-pods", type=int, default=defaults.pipeline_pods, help="pods through the request mix"
    )
    parser.add_argument(
        "--client-creates", type=int, default=defaults.client_creates, help="creates via the official client"
    )
    parser.add_argument("--secure", action="store_true", help="HTTPS with a bearer token (as `tessera up` runs it)")
    parser.add_argument("--smoke", action="store_true", help="a tiny run that only checks the benchmark works")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON")


def _settings(args: argparse.Namespace) -> BenchSettings:
    if args.smoke:
        return BenchSettings(
            pods=100,
            concurrency=4,
            watchers=2,
            fanout_writes=50,
            pipeline_pods=20,
            pipeline_watchers=1,
            client_creates=10,
        )
    return BenchSettings(
        pods=args.pods,
        concurrency=args.concurrency,
        watchers=args.watchers,
        fanout_writes=args.fanout_writes,
        pipeline_pods=args.pipeline_pods,
        client_creates=args.client_creates,
    )


def _print(result: Result) -> None:
    detail = ", ".join(f"{k}={v}" for k, v in result.detail.items())
    print(f"{result.name:<48} {result.value:>10.1f} {result.unit:<9} {detail}", flush=True)


def run(args: argparse.Namespace) -> int:
    settings = _settings(args)
    print(
        f"# tessera apiserver benchmark: python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"{'https+token' if args.secure else 'http'}",
        flush=True,
    )
    with run_apiserver(secure=args.secure, verbosity=1) as server:
        results = run_benchmarks(server, settings, _print)
    if args.json:
        args.json.write_text(
            json.dumps([{"name": r.name, "value": r.value, "unit": r.unit, **r.detail} for r in results], indent=2)
        )
    return 0
