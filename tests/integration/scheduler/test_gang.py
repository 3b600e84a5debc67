"""Gang scheduling live: the API server and the scheduler as real processes.

- a Strict gang that cannot fit stays wholly pending, its condition naming the gang; a node
  (Device CR + allocatable) added makes room and the whole gang binds;
- members that time out give their devices back;
- a PodGroup CR forms a gang; a pod naming a missing PodGroup says so, and bad gang annotations
  leave the scheduler running; scheduler-plugins' PodGroups too, with their minResources, and a
  pod naming both kinds of gang is refused with an Event;
- kill -9 while members wait at Permit, or after half the gang was bound: the restarted
  scheduler completes the gang from what the API server holds.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from apis.extension import names
from apis.k8s.core import Pod
from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.scheduler import SchedulerProcess, pod_manifest
from kube import Client, resources
from tests.support import apiservers
from tests.support.cluster import (
    PodWatch,
    assert_no_device_shared_beyond_capacity,
    condition,
    create_gpu_nodes,
    create_namespace,
    create_pod,
    wait_for_event,
)
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


# A cluster per test: a gang left pending by one test would take room in the next.
apiserver = apiservers.apiserver_fixture("function")


def gang(name: str, min_available: int, **extra: str) -> dict[str, str]:
    ann = {names.ANNOTATION_GANG_NAME: name, names.ANNOTATION_GANG_MIN_AVAILABLE: str(min_available)}
    ann.update({f"{names.GANG_DOMAIN}/{k.replace('_', '-')}": v for k, v in extra.items()})
    return ann


def pending_message(watch: PodWatch, name: str) -> str:
    """The pod's PodScheduled message ("" while the watch has not seen the pod or no condition)."""
    pods = [p for p in watch.pods() if p.name == name]
    found = condition(pods[0]) if pods else None
    return found[2] if found else ""


def wait_until_pending_for_the_gang(watch: PodWatch, gang_name: str, *, members: int) -> None:
    """Until the gang's `members` pods (named `w-*`) are all pending with a reason naming the gang."""

    def all_pending(pods: list[Pod]) -> bool:
        workers = [p for p in pods if p.name.startswith("w-")]
        reasons = [(condition(p) or ("", "", ""))[2] for p in workers]
        return len(workers) == members and all(f"gang {gang_name}" in reason for reason in reasons)

    watch.wait_for(all_pending, "every member pending with a reason naming the gang")


def test_a_strict_gang_that_cannot_fit_stays_pending_then_binds_whole_on_a_new_node(
    apiserver: EmbeddedAPIServer, client: Client, work_dir: Path
) -> None:
    create_gpu_nodes(client, "gang-a")
    ns = create_namespace(client)
    watch = PodWatch(client, ns)
    try:
        with SchedulerProcess(apiserver.kubeconfig, work_dir) as scheduler:
            for i in range(3):
                create_pod(client, ns, f"w-{i}", {names.NVIDIA_GPU: "4"}, annotations=gang("train", 3))
            wait_until_pending_for_the_gang(watch, f"{ns}/train", members=3)
            assert not any(p.node_name for p in watch.pods())
            gangs = scheduler.get_json("/apis/v1/plugins/Coscheduling/gangs")
            assert [g["name"] for g in gangs] == [f"{ns}/train"]
            one = scheduler.get_json(f"/apis/v1/plugins/Coscheduling/gang/{ns}/train")
            assert one["min"] == 3 and one["created"] == 3 and one["bound"] == 0 and not one["satisfied"]
            assert scheduler.metric("tessera_scheduler_gang_groups_rejected_total", {"cause": "failure"}) >= 1
            create_gpu_nodes(client, "gang-b")
            pods = watch.wait_bound(3)
            assert scheduler.metric("tessera_scheduler_gang_groups_allowed_total") == 1
            assert scheduler.metric("tessera_scheduler_gang_wait_duration_seconds_count") == 1
            assert scheduler.metric("tessera_scheduler_gangs_waiting") == 0
        assert_no_device_shared_beyond_capacity(client, pods)
        for pod in pods:
            assert pod.annotations[names.ANNOTATION_BIND_GANG_GROUP_ID] == f"{ns}/train"
            assert pod.annotations[names.ANNOTATION_BIND_GANG_MEMBER_COUNT] == "3"
    finally:
        watch.stop()


def test_members_that_time_out_give_their_gpus_back(
    apiserver: EmbeddedAPIServer, client: Client, work_dir: Path
) -> None:
    create_gpu_nodes(client, "timeout-a")
    ns = create_namespace(client)
    watch = PodWatch(client, ns)
    try:
        with SchedulerProcess(apiserver.kubeconfig, work_dir) as scheduler:
            # The third member exists but belongs to another scheduler: the two never complete.
            for i in range(2):
                create_pod(client, ns, f"w-{i}", {names.NVIDIA_GPU: "4"}, annotations=gang("t", 3, waiting_time="2s"))
            other = pod_manifest(
                "w-2", {names.NVIDIA_GPU: "4"}, namespace=ns, scheduler_name="other", annotations=gang("t", 3)
            )
            client.resource(resources.PODS).create(other, namespace=ns)
            watch.wait_for(
                lambda pods: any("rejected due to timeout" in (condition(p) or ("", "", ""))[2] for p in pods),
                "a member rejected by the timeout",
            )
            # Their 8 GPUs are free again: a pod asking for all of them binds.
            create_pod(client, ns, "whole-node", {names.NVIDIA_GPU: "8"})
            watch.wait_for(lambda pods: any(p.name == "whole-node" and p.node_name for p in pods), "whole-node bound")
            assert not any(p.node_name for p in watch.pods() if p.name.startswith("w-"))
            assert scheduler.metric("tessera_scheduler_gang_groups_rejected_total", {"cause": "timeout"}) >= 1
    finally:
        watch.stop()


def test_pod_group_gangs_and_bad_input_keep_the_scheduler_running(
    apiserver: EmbeddedAPIServer, client: Client, work_dir: Path
) -> None:
    create_gpu_nodes(client, "pg-a")
    ns = create_namespace(client)
    watch = PodWatch(client, ns)
    try:
        with SchedulerProcess(apiserver.kubeconfig, work_dir):
            label = {names.LABEL_POD_GROUP: "pg"}
            create_pod(client, ns, "missing-0", {names.NVIDIA_GPU: "1"}, labels={names.LABEL_POD_GROUP: "nope"})
            create_pod(
                client,
                ns,
                "bad-0",
                {names.NVIDIA_GPU: "1"},
                annotations=gang("bad", 1) | {names.ANNOTATION_GANG_MIN_AVAILABLE: "many"},
            )
            for i in range(2):
                create_pod(client, ns, f"pg-{i}", {names.NVIDIA_GPU: "2"}, labels=label)
            group = {"apiVersion": names.POD_GROUPS.api_version, "kind": "PodGroup", "metadata": {"name": "pg"}}
            group["spec"] = {"minMember": 2}
            client.resource(names.POD_GROUPS).create(group, namespace=ns)
            watch.wait_for(
                lambda pods: sum(1 for p in pods if p.name.startswith("pg-") and p.node_name) == 2,
                "the PodGroup's two members bound",
            )
            watch.wait_for(
                lambda pods: (
                    f"gang {ns}/nope: PodGroup {ns}/nope not found" in pending_message(watch, "missing-0")
                    and "min-available 'many' is not an integer" in pending_message(watch, "bad-0")
                ),
                "the missing PodGroup and the bad annotation said in the pods' conditions",
            )
            sloppy = gang("sloppy", 1, mode="Sloppy", waiting_time="soon")
            create_pod(client, ns, "sloppy-0", {names.NVIDIA_GPU: "1"}, annotations=sloppy)
            create_pod(client, ns, "plain", {names.NVIDIA_GPU: "1"})
            watch.wait_for(
                lambda pods: {"plain", "sloppy-0"} <= {p.name for p in pods if p.node_name}, "plain and sloppy-0 bound"
            )
            # One Event per value ignored; wait for the mode's (the waiting time's may come first).
            ignored = f"{names.ANNOTATION_GANG_MODE} 'Sloppy' is not Strict or NonStrict"
            mode = f"gang {ns}/sloppy: {ignored}; using the default"
            events = wait_for_event(client, ns, "sloppy-0", "GangValueIgnored", mode)
            assert any(e["message"] == mode for e in events)
    finally:
        watch.stop()


def test_scheduler_plugins_pod_groups_live_with_their_min_resources_and_conflicts(
    apiserver: EmbeddedAPIServer, client: Client, work_dir: Path
) -> None:
    """scheduling.x-k8s.io PodGroups through the live feed: a gang that fits binds whole; one whose
    minResources the cluster cannot hold stays pending with the gap in its condition; a pod naming
    both kinds of gang is refused with a GangConflict Event."""
    create_gpu_nodes(client, "upg-a")
    ns = create_namespace(client)
    watch = PodWatch(client, ns)
    groups = client.resource(names.UPSTREAM_POD_GROUPS)

    def pod_group(name: str, spec: dict[str, object]) -> None:
        body = {"apiVersion": names.UPSTREAM_POD_GROUPS.api_version, "kind": "PodGroup", "metadata": {"name": name}}
        groups.create({**body, "spec": spec}, namespace=ns)

    try:
        with SchedulerProcess(apiserver.kubeconfig, work_dir):
            pod_group("fits", {"minMember": 2, "minResources": {names.NVIDIA_GPU: "4"}})
            pod_group("too-big", {"minMember": 2, "minResources": {names.NVIDIA_GPU: "64"}})
            for i in range(2):
                create_pod(
                    client, ns, f"fits-{i}", {names.NVIDIA_GPU: "2"}, labels={names.LABEL_UPSTREAM_POD_GROUP: "fits"}
                )
                create_pod(
                    client, ns, f"big-{i}", {names.NVIDIA_GPU: "1"}, labels={names.LABEL_UPSTREAM_POD_GROUP: "too-big"}
                )
            both = {names.LABEL_UPSTREAM_POD_GROUP: "fits", names.LABEL_POD_GROUP: "fits"}
            create_pod(client, ns, "both", {names.NVIDIA_GPU: "1"}, labels=both)
            watch.wait_for(
                lambda pods: sum(1 for p in pods if p.name.startswith("fits-") and p.node_name) == 2,
                "the gang that fits bound whole",
            )
            watch.wait_for(
                lambda pods: all(
                    "its PodGroup's minResources do not fit in the cluster's free resources: "
                    "koordinator.sh/gpu-core needs 6400" in pending_message(watch, f"big-{i}")
                    for i in range(2)
                ),
                "the gang too big for its minResources said in its members' conditions",
            )
            assert not any(p.node_name for p in watch.pods() if p.name.startswith("big-") or p.name == "both")
            conflict = (
                f"pod {ns}/both names two kinds of gang: {names.LABEL_POD_GROUP}=fits (Koordinator's) and "
                f"{names.LABEL_UPSTREAM_POD_GROUP}=fits (scheduler-plugins' PodGroup); keep one of them"
            )
            wait_for_event(client, ns, "both", "GangConflict", conflict)
            watch.wait_for(lambda pods: conflict in pending_message(watch, "both"), "the conflict in the condition")
    finally:
        watch.stop()


def test_kill_while_members_wait_at_permit_then_restart_completes_the_gang(
    apiserver: EmbeddedAPIServer, client: Client, work_dir: Path
) -> None:
    create_gpu_nodes(client, "kill-a")
    ns = create_namespace(client)
    watch = PodWatch(client, ns)
    scheduler = SchedulerProcess(apiserver.kubeconfig, work_dir)
    scheduler.start()
    try:
        job = gang("job", 4, mode="NonStrict")
        for i in range(3):
            create_pod(client, ns, f"w-{i}", {names.NVIDIA_GPU: "2"}, annotations=job)
        # The fourth fits no node until one is labelled: the other three wait at Permit.
        late = pod_manifest("w-3", {names.NVIDIA_GPU: "2"}, namespace=ns, annotations=job)
        late["spec"]["nodeSelector"] = {"pool": "training"}
        client.resource(resources.PODS).create(late, namespace=ns)
        path = f"/apis/v1/plugins/Coscheduling/gang/{ns}/job"
        watch.wait_for(lambda _pods: scheduler.get_json(path)["waiting"] == 3, "three members waiting", timeout=30)
        scheduler.kill()
        assert not any(p.node_name for p in watch.pods())
        node = client.resource(resources.NODES).get("kill-a")
        node["metadata"].setdefault("labels", {})["pool"] = "training"
        client.resource(resources.NODES).update(node)
        scheduler.start()
        pods = watch.wait_bound(4)
    finally:
        scheduler.stop()
        watch.stop()
    assert_no_device_shared_beyond_capacity(client, pods)


def test_a_gang_half_bound_when_the_scheduler_died_is_completed(
    apiserver: EmbeddedAPIServer, client: Client, work_dir: Path
) -> None:
    create_gpu_nodes(client, "half-a")
    ns = create_namespace(client)
    allowed = {names.ANNOTATION_BIND_GANG_GROUP_ID: f"{ns}/half", names.ANNOTATION_BIND_GANG_MEMBER_COUNT: "4"}
    for i in range(2):  # bound before the crash, with the annotations of an allowed gang
        create_pod(client, ns, f"w-{i}", {names.CPU: "1"}, annotations=gang("half", 4) | allowed, node_name="half-a")
    for i in range(2, 4):
        create_pod(client, ns, f"w-{i}", {names.CPU: "1"}, annotations=gang("half", 4))
    watch = PodWatch(client, ns)
    try:
        with SchedulerProcess(apiserver.kubeconfig, work_dir):
            watch.wait_bound(4)
    finally:
        watch.stop()


def test_a_gang_group_across_namespaces_binds_together(
    apiserver: EmbeddedAPIServer, client: Client, work_dir: Path
) -> None:
    create_gpu_nodes(client, "group-a")
    team_a, team_b = create_namespace(client), create_namespace(client)
    groups = json.dumps([f"{team_a}/ps", f"{team_b}/worker"])
    watch_a, watch_b = PodWatch(client, team_a), PodWatch(client, team_b)
    try:
        with SchedulerProcess(apiserver.kubeconfig, work_dir):
            create_pod(client, team_a, "ps-0", {names.NVIDIA_GPU: "1"}, annotations=gang("ps", 1, groups=groups))
            watch_a.wait_for(
                lambda _pods: f"gang {team_b}/worker of its group has no members" in pending_message(watch_a, "ps-0"),
                "ps-0 waiting for the other gang of its group",
            )
            for i in range(2):
                create_pod(
                    client, team_b, f"w-{i}", {names.NVIDIA_GPU: "2"}, annotations=gang("worker", 2, groups=groups)
                )
            bound = watch_a.wait_bound(1) + watch_b.wait_bound(2)
        ids = {p.annotations[names.ANNOTATION_BIND_GANG_GROUP_ID] for p in bound}
        assert ids == {",".join(sorted([f"{team_a}/ps", f"{team_b}/worker"]))}
        assert {p.annotations[names.ANNOTATION_BIND_GANG_MEMBER_COUNT] for p in bound} == {"3"}
    finally:
        watch_a.stop()
        watch_b.stop()


def test_a_gang_that_can_never_fit_is_retried_with_backoff_not_in_a_busy_loop(
    apiserver: EmbeddedAPIServer, client: Client, work_dir: Path
) -> None:
    # As in `tessera up --demo`: two 8-GPU nodes with a GPU taken on each, and a gang of four
    # 4-GPU workers. Each cycle two wait at Permit, the others fail and the group is rejected.
    # Retrying the members past their backoff used to spin the scheduler (over 600 attempts a
    # second in the demo).
    create_gpu_nodes(client, "spin-a", "spin-b")
    ns = create_namespace(client)
    watch = PodWatch(client, ns)
    try:
        with SchedulerProcess(apiserver.kubeconfig, work_dir) as scheduler:
            for i in range(2):
                create_pod(client, ns, f"one-{i}", {names.NVIDIA_GPU: "1"})
            watch.wait_for(lambda pods: len([p for p in pods if p.node_name]) == 2, "the 1-GPU pods bound")
            for i in range(4):
                create_pod(client, ns, f"w-{i}", {names.NVIDIA_GPU: "4"}, annotations=gang("spin", 4))
            wait_until_pending_for_the_gang(watch, f"{ns}/spin", members=4)

            def failures() -> float:
                """Tries that ended with the member back in the queue (one per try: a member that
                waited at Permit counts `waiting` first, then this once the gang is rejected)."""
                return scheduler.metric("tessera_scheduler_schedule_attempts_total", {"result": "unschedulable"})

            # Five failed tries among four members: one member was tried twice, and between its
            # two tries it waited out its backoff (1 s at least, doubling), where the spin takes
            # a fraction of that. A loaded machine only makes the wait longer.
            before, started = failures(), time.monotonic()
            wait_for(lambda: failures() >= before + 5, timeout_s=60, what="five more failed tries")
            took = time.monotonic() - started
            assert took >= 0.9, f"five tries in {took:.2f} s: members retried before their 1 s backoff"
            assert not any(p.node_name for p in watch.pods() if p.name.startswith("w-"))
    finally:
        watch.stop()
