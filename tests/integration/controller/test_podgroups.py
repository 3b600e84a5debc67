"""`tessera controller` keeps PodGroup status (phase, counts, scheduleStartTime) from the member
pods and says each phase change with an Event on the PodGroup: both real processes over HTTP."""

from collections.abc import Callable
from typing import Any

import pytest

from apis.crds.podgroup import PodGroup, PodGroupPhase
from apis.extension import names
from cli.launchers.controller import ControllerProcess
from cli.launchers.scheduler import pod_manifest
from kube.client import Client
from kube.resources import EVENTS, PODS
from tests.support.cluster import unique
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


def status_of(client: Client, name: str) -> PodGroup:
    return PodGroup.from_dict(client.resource(names.POD_GROUPS).get(name, namespace="default"))


def member(client: Client, group: str, name: str, node: str = "") -> dict[str, Any]:
    manifest = pod_manifest(name, {"cpu": "1"}, labels={names.LABEL_POD_GROUP: group}, node_name=node)
    return client.resource(PODS).create(manifest, namespace="default")


def test_pod_group_status_follows_its_members(
    client: Client, start_controller: Callable[..., ControllerProcess]
) -> None:
    start_controller()
    name = unique("pg")
    body = {"apiVersion": names.POD_GROUPS.api_version, "kind": "PodGroup", "metadata": {"name": name}}
    client.resource(names.POD_GROUPS).create({**body, "spec": {"minMember": 2}}, namespace="default")
    member(client, name, f"{name}-0")
    wait_for(lambda: status_of(client, name).phase is PodGroupPhase.PENDING, what="Pending with one member")
    member(client, name, f"{name}-1")
    # Min members exist: PreScheduling, then (at once, as Koordinator) Scheduling, timed from now.
    scheduling = wait_for(
        lambda: (s := status_of(client, name)).phase is PodGroupPhase.SCHEDULING and s, what="Scheduling"
    )
    assert scheduling.scheduled == 0 and scheduling.schedule_start_time
    pods = client.resource(PODS)
    pods.delete(f"{name}-0", namespace="default", grace_period_seconds=0)
    member(client, name, f"{name}-0", node="n1")
    wait_for(lambda: status_of(client, name).scheduled == 1, what="one member scheduled")
    pods.delete(f"{name}-1", namespace="default", grace_period_seconds=0)
    member(client, name, f"{name}-1", node="n1")
    wait_for(lambda: status_of(client, name).phase is PodGroupPhase.SCHEDULED, what="Scheduled")
    for i in range(2):
        pod = pods.get(f"{name}-{i}", namespace="default")
        pod["status"] = {"phase": "Running"}
        pods.update_status(pod, namespace="default")
    running = wait_for(lambda: (s := status_of(client, name)).phase is PodGroupPhase.RUNNING and s, what="Running")
    assert (running.running, running.scheduled, running.schedule_start_time) == (
        2,
        2,
        scheduling.schedule_start_time,
    )

    def messages() -> list[str]:
        events = client.resource(EVENTS).list(namespace="default", field_selector=f"involvedObject.name={name}").items
        return [e["message"] for e in events if e["reason"] == "PodGroupPhaseChanged"]

    # The Event follows the status write (the recorder sends it on its own thread): wait for it.
    said = wait_for(lambda: (m := messages()) and any("Scheduled → Running" in x for x in m) and m, what="events")
    assert any("Pending → PreScheduling" in m for m in said), said


def test_a_scheduler_plugins_pod_group_status_moves_as_that_projects_controller_moves_it(
    client: Client, start_controller: Callable[..., ControllerProcess]
) -> None:
    """scheduling.x-k8s.io: Pending, Scheduling once minMember pods exist (occupiedBy their owner),
    Running once they run, Finished once they succeeded; status through the CRD's status
    subresource, and no `scheduled` count."""
    start_controller()
    name = unique("upg")
    groups = client.resource(names.UPSTREAM_POD_GROUPS)
    body = {"apiVersion": names.UPSTREAM_POD_GROUPS.api_version, "kind": "PodGroup", "metadata": {"name": name}}
    groups.create({**body, "spec": {"minMember": 2}}, namespace="default")

    def status() -> PodGroup:
        return PodGroup.upstream_from_dict(groups.get(name, namespace="default"))

    def phase(expected: PodGroupPhase) -> PodGroup:
        return wait_for(lambda: (s := status()).phase is expected and s.phase_given and s, what=expected.value)

    phase(PodGroupPhase.PENDING)
    pods = client.resource(PODS)
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": "uid-job"}
    for i in range(2):
        manifest = pod_manifest(f"{name}-{i}", {"cpu": "1"}, labels={names.LABEL_UPSTREAM_POD_GROUP: name})
        manifest["metadata"]["ownerReferences"] = [owner]
        pods.create(manifest, namespace="default")
    scheduling = phase(PodGroupPhase.SCHEDULING)
    assert scheduling.occupied_by == f"default/{name}"
    assert "scheduled" not in groups.get(name, namespace="default")["status"]

    def move(pod_phase: str) -> None:
        for i in range(2):
            pod = pods.get(f"{name}-{i}", namespace="default")
            pod["status"] = {"phase": pod_phase}
            pods.update_status(pod, namespace="default")

    move("Running")
    assert phase(PodGroupPhase.RUNNING).running == 2
    move("Succeeded")
    finished = phase(PodGroupPhase.FINISHED)
    assert (finished.running, finished.succeeded) == (0, 2)

    def about_it() -> list[dict[str, Any]]:
        events = client.resource(EVENTS).list(namespace="default", field_selector=f"involvedObject.name={name}").items
        return [e for e in events if e["reason"] == "PodGroupPhaseChanged"]

    # The Events name the object of its own API group.
    said = wait_for(lambda: (e := about_it()) and any("→ Finished" in x["message"] for x in e) and e, what="events")
    assert {e["involvedObject"]["apiVersion"] for e in said} == {names.UPSTREAM_POD_GROUPS.api_version}
