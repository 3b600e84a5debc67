"""Coscheduling's own feeds, called as the live scheduler's feed runner calls them: the PodGroups
of both APIs into every profile's gang book, the event a change emits, and the warnings about a
gang said on its pods."""

from __future__ import annotations

from typing import Any

from apis.crds.podgroup import PodGroup
from apis.extension import names
from apis.k8s.core import Pod
from scheduler.core import build_frameworks
from scheduler.framework import Framework, load_config
from scheduler.framework.events import ClusterEvent
from scheduler.framework.feeds import About, Concerns, Feeds, Handlers
from scheduler.plugins.coscheduling import Coscheduling
from tests.support.builders import make_node, make_pod
from tests.support.scheduling import make_cache

from .gangs import member

TWO_PROFILES = """
profiles:
- schedulerName: tessera-scheduler
- schedulerName: batch
"""


class Recorded:
    """Where the feeds' events and warnings go (the queue and Events, live)."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.warnings: list[tuple[str, str, str]] = []

    def sink(self, event: ClusterEvent, _concerns: Concerns) -> None:
        self.events.append(event.label)

    def warning(self, about: About, reason: str, message: str) -> None:
        self.warnings.append((f"{about.resource.kind} {about.namespace}/{about.name}", reason, message))


def setup(
    config: str = "profiles: [{schedulerName: tessera-scheduler}]",
) -> tuple[Feeds, dict[str, Framework], Recorded]:
    feeds = Feeds()
    frameworks = build_frameworks(load_config(config), make_cache(make_node("n1")), feeds=feeds)
    recorded = Recorded()
    feeds.connect(sink=recorded.sink, recorder=recorded)
    return feeds, frameworks, recorded


def handlers_of(feeds: Feeds, resource: object) -> list[Handlers[Any]]:
    return [h for watch, handlers in feeds.opened() for h in handlers if watch.resource == resource]


def coscheduling(framework: Framework) -> Coscheduling:
    found = framework.plugin(Coscheduling.name)
    assert isinstance(found, Coscheduling)
    return found


def group(raw_min: int, *, upstream: bool = False) -> PodGroup:
    raw = {"metadata": {"name": "job", "namespace": "ml"}, "spec": {"minMember": raw_min}}
    return PodGroup.upstream_from_dict(raw) if upstream else PodGroup.from_dict(raw)


def pod_changed(feeds: Feeds, frameworks: dict[str, Framework], old: Pod | None, pod: Pod) -> None:
    """What the scheduler's pod informer does: the frameworks count the pod, then the plugins'
    pod handlers run."""
    for framework in frameworks.values():
        framework.pod_added(pod)
    for handlers in feeds.pod_handlers():
        handlers.added(pod) if old is None else handlers.updated(old, pod)


def test_both_pod_group_apis_are_watched_by_the_plugin_without_holding_the_scheduler_back() -> None:
    feeds, _, _ = setup()
    watches = {watch.resource: watch for watch, _ in feeds.opened()}
    for resource in (names.POD_GROUPS, names.UPSTREAM_POD_GROUPS):
        assert resource in watches and not watches[resource].required

    without = Feeds()
    config = "profiles: [{plugins: {multiPoint: {disabled: [{name: Coscheduling}]}}}]"
    build_frameworks(load_config(config), make_cache(), feeds=without)
    opened = {watch.resource for watch, _ in without.opened()}
    assert names.POD_GROUPS not in opened and names.UPSTREAM_POD_GROUPS not in opened


def test_a_pod_group_reaches_every_profiles_book_and_its_change_moves_refused_pods() -> None:
    feeds, frameworks, recorded = setup(TWO_PROFILES)
    for upstream, resource in ((False, names.POD_GROUPS), (True, names.UPSTREAM_POD_GROUPS)):
        for handlers in handlers_of(feeds, resource):
            handlers.added(group(3, upstream=upstream))
        for framework in frameworks.values():
            summary = coscheduling(framework).gang_summary("ml/job")
            assert summary is not None and summary.min_available == 3
        for handlers in handlers_of(feeds, resource):
            handlers.deleted(group(3, upstream=upstream))
        for framework in frameworks.values():
            assert coscheduling(framework).gang_summary("ml/job") is None
    assert recorded.events and set(recorded.events) == {"PodGroupChange"}


def test_an_ignored_gang_value_is_said_once_per_gang_on_the_pod_that_set_it_up() -> None:
    feeds, frameworks, recorded = setup(TWO_PROFILES)
    first = member("a", min_available=1, mode="Sloppy")
    pod_changed(feeds, frameworks, None, first)
    pod_changed(feeds, frameworks, first, member("a", min_available=1, mode="Sloppy", gpus=2))
    pod_changed(feeds, frameworks, None, member("b", min_available=1, mode="Sloppy"))
    pod_changed(feeds, frameworks, None, make_pod("plain"))
    ignored = f"{names.ANNOTATION_GANG_MODE} 'Sloppy' is not Strict or NonStrict"
    assert recorded.warnings == [
        ("Pod default/a", "GangValueIgnored", f"gang default/train: {ignored}; using the default")
    ]


def test_a_pending_pod_naming_both_kinds_of_gang_is_told_once_by_its_profile() -> None:
    feeds, frameworks, recorded = setup(TWO_PROFILES)
    both = {names.LABEL_POD_GROUP: "job", names.LABEL_UPSTREAM_POD_GROUP: "job"}
    pod = make_pod("both", namespace="ml", labels=both)
    pod_changed(feeds, frameworks, None, pod)
    pod_changed(feeds, frameworks, pod, make_pod("both", namespace="ml", labels=both, nvidia_gpu=1))
    reasons = [(where, reason) for where, reason, _ in recorded.warnings]
    assert reasons == [("Pod ml/both", "GangConflict")]
    assert "names two kinds of gang" in recorded.warnings[0][2]

    # Bound, or another scheduler's: not ours to refuse, nothing said.
    recorded.warnings.clear()
    pod_changed(feeds, frameworks, None, make_pod("bound", namespace="ml", labels=both, node="n1"))
    pod_changed(feeds, frameworks, None, make_pod("theirs", namespace="ml", labels=both, scheduler_name="other"))
    assert recorded.warnings == []
