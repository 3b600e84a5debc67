"""The gangs the Coscheduling plugins of a set of profiles know: what what-if reports, the
diagnostics endpoints serve and `tessera explain` says about a gang member. Read only; the
caller holds whatever lock guards the frameworks."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from apis.k8s.core import Pod
from scheduler.framework.runtime import Framework
from scheduler.plugins.coscheduling import Coscheduling, GangSummary

__all__ = ["gang", "gang_of", "gangs"]


def _plugins(frameworks: Mapping[str, Framework]) -> Iterable[Coscheduling]:
    for framework in frameworks.values():
        plugin = framework.plugin(Coscheduling.name)
        if isinstance(plugin, Coscheduling):
            yield plugin


def gangs(frameworks: Mapping[str, Framework]) -> list[GangSummary]:
    """Every gang with members or a PodGroup, by name (the first profile that knows it)."""
    out: dict[str, GangSummary] = {}
    for plugin in _plugins(frameworks):
        for summary in plugin.summaries():
            out.setdefault(summary.name, summary)
    return [out[name] for name in sorted(out)]


def gang(frameworks: Mapping[str, Framework], name: str) -> GangSummary | None:
    """The gang `namespace/name`, or None."""
    return next((s for p in _plugins(frameworks) if (s := p.gang_summary(name)) is not None), None)


def gang_of(frameworks: Mapping[str, Framework], pod: Pod) -> GangSummary | None:
    """The gang the pod is a member of, or None."""
    return next((s for p in _plugins(frameworks) if (s := p.gang_of_pod(pod)) is not None), None)
