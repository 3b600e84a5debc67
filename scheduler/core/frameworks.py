"""One Framework per profile over one cache: what the offline `Scheduler` and the live service
both schedule with, built the same way so that what is benchmarked is what runs."""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Mapping

from scheduler.cache import ClusterCache
from scheduler.framework.config import PluginRef, SchedulerConfig
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
) -> dict[str, Framework]:
    """One Framework per profile over `cache`, sharing one seeded RNG for score ties;
    `observer(profile)` gives each its extension point observer; `shared` seeds every profile's
    `Handle.shared` with objects that are one per scheduler (the quota manager its informers
    feed). Raises ConfigError."""
    rng = random.Random(seed)
    return {
        profile.scheduler_name: Framework.build(
            profile,
            registry=registry,
            default_plugins=default_plugins,
            cache=cache,
            shared=shared,
            percentage_of_nodes_to_score=config.percentage_for(profile),
            rng=rng,
            observer=observer(profile.scheduler_name),
        )
        for profile in config.profiles
    }
