"""One Framework per profile over one cache: what the offline `Scheduler` and the live service
both schedule with, built the same way so that what is benchmarked is what runs."""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Mapping

from scheduler.cache import ClusterCache
from scheduler.framework.config import PluginRef, SchedulerConfig
from scheduler.framework.feeds import Feeds
from scheduler.framework.runtime import Framework, PointObserver, Registry
from scheduler.plugins import DEFAULT_PLUGINS, REGISTRY

__all__ = ["build_frameworks"]


def build_frameworks(
    config: SchedulerConfig,
    cache: ClusterCache,
    *,
    registry: Registry = REGISTRY,
    default_plugins: tuple[PluginRef, ...] = DEFAULT_PLUGINS,
    seed: int = 0,
    observer: Callable[[str], PointObserver | None] = lambda profile: None,
    shared: Mapping[Hashable, object] | None = None,
    feeds: Feeds | None = None,
) -> dict[str, Framework]:
    """One Framework per profile over `cache`, sharing one seeded RNG for score ties, one
    `Handle.scheduler` (seeded with `shared`: objects that are one per scheduler, e.g. a quota
    manager the caller fills) and one `feeds` (what the plugins register to be fed; a fresh one
    when not given); `observer(profile)` gives each its extension point observer. Raises
    ConfigError."""
    rng = random.Random(seed)
    scheduler = dict(shared or {})
    feeds = feeds if feeds is not None else Feeds()
    return {
        profile.scheduler_name: Framework.build(
            profile,
            registry=registry,
            default_plugins=default_plugins,
            cache=cache,
            scheduler=scheduler,
            feeds=feeds,
            percentage_of_nodes_to_score=config.percentage_for(profile),
            rng=rng,
            observer=observer(profile.scheduler_name),
        )
        for profile in config.profiles
    }
