"""`tessera runtime-proxy`: the CRI proxy between kubelet and the container runtime.

Thin: flags become `ProxySettings`; `runtimeproxy.run` does the rest. Point kubelet at
`--container-runtime-endpoint=unix://<listen>`; see docs/runtime-proxy.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import runtimeproxy


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = runtimeproxy.ProxySettings()
    parser.add_argument(
        "--listen", type=Path, default=defaults.listen, help=f"socket kubelet connects to (default {defaults.listen})"
    )
    parser.add_argument(
        "--runtime-endpoint",
        default=defaults.runtime_endpoint,
        help=f"the container runtime's CRI socket (default {defaults.runtime_endpoint})",
    )
    parser.add_argument(
        "--image-endpoint", default="", help="the runtime's image service socket (default: the runtime endpoint)"
    )
    parser.add_argument(
        "--hook-config-dir",
        type=Path,
        default=defaults.hook_config_dir,
        help=f"directory of hook server registrations, *.json (default {defaults.hook_config_dir})",
    )
    parser.add_argument(
        "--hook-timeout",
        type=float,
        default=defaults.hook_timeout_s,
        metavar="SECONDS",
        help=f"deadline of one hook call (default {defaults.hook_timeout_s})",
    )
    parser.add_argument(
        "--apply-cdi",
        action="store_true",
        help="apply containers' CDI devices (DRA) for a runtime that does not, e.g. containerd 1.6",
    )
    parser.add_argument(
        "--cdi-spec-dir",
        type=Path,
        action="append",
        metavar="DIR",
        help="a CDI spec directory, lowest priority first; repeatable "
        f"(default {' '.join(map(str, defaults.cdi_spec_dirs))})",
    )


def settings_from(args: argparse.Namespace) -> runtimeproxy.ProxySettings:
    """The validated settings; raises ConfigError for flags that cannot work."""
    settings = runtimeproxy.ProxySettings(
        listen=args.listen,
        runtime_endpoint=args.runtime_endpoint,
        image_endpoint=args.image_endpoint,
        hook_config_dir=args.hook_config_dir,
        hook_timeout_s=args.hook_timeout,
        apply_cdi=args.apply_cdi,
        cdi_spec_dirs=tuple(args.cdi_spec_dir) if args.cdi_spec_dir else runtimeproxy.ProxySettings().cdi_spec_dirs,
    )
    settings.validate()
    return settings


def run(args: argparse.Namespace) -> int:
    """Flags that cannot work raise ConfigError: `tessera runtime-proxy: reason`, exit code 2 (cli.main)."""
    return runtimeproxy.run(settings_from(args))
