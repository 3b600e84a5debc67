"""The scheduler's public surface: complete `__all__`s (ruff's RUF022 keeps them sorted), and
every plugin registered under its NAME."""

from __future__ import annotations

import importlib

import pytest

from scheduler.plugins import DEFAULT_PLUGINS, OPT_IN_PLUGINS, REGISTRY

PACKAGES = [
    "scheduler.cache",
    "scheduler.framework",
    "scheduler.plugins",
    "scheduler.plugins.deviceshare",
    "scheduler.plugins.noderesources",
    "scheduler.plugins.nodeaffinity",
    "scheduler.plugins.tainttoleration",
    "scheduler.plugins.nodeunschedulable",
    "scheduler.plugins.nodename",
    "scheduler.plugins.gpufragmentation",
    "scheduler.plugins.elasticquota",
]
#: Packages below the plugins that are not plugins themselves.
DOMAIN_PACKAGES = ["scheduler.fragmentation", "apis.quota"]
#: Offline entry points above the core.
ENTRY_PACKAGES = ["scheduler.defrag"]


@pytest.mark.parametrize("package", PACKAGES + DOMAIN_PACKAGES + ENTRY_PACKAGES)
def test_all_is_complete(package: str) -> None:
    mod = importlib.import_module(package)
    for name in mod.__all__:
        assert hasattr(mod, name), name


def test_registry_names_match_plugins() -> None:
    for package in PACKAGES[3:]:
        mod = importlib.import_module(package)
        assert REGISTRY[mod.NAME] is mod.new
    defaults = {ref.name for ref in DEFAULT_PLUGINS}
    assert defaults | set(OPT_IN_PLUGINS) == set(REGISTRY)
    assert not defaults & set(OPT_IN_PLUGINS)
